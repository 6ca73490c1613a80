"""Asking an interpreter what it runs, before any worker: the environments of a run's sides.

What it is: `Probed` (frozen: what one side's interpreter answers, under the side's variables:
its path, Python, nanobench and where it loads from, the worker protocol, torch, triton and
transformers versions, the CPU capability ATen dispatches to, torch's threads, the variables),
`probed(sides)` (each side's, every distinct environment asked once; a path that is not an
interpreter, one without nanobench or one whose nanobench speaks another worker protocol is
`BadInput`, one line with the command that installs it there), `differences(found)` (what
differs between the sides, a line each: versions, capability, threads, variables, said before
the run) and `main`, the probe's other end: `python -m nanobench.harness.runs.environments`
prints this interpreter's answer as one line.
What it is not: the options (`run_spec.MeasuredSpec`), where workers start (`workers.fleet`,
`workers.environment.WorkerEnv`) or the run's own env record (`env_record`, which keeps these).
Invariant: an answer is the interpreter's own, read in a process started as its workers are
(the side's variables set), never this process's guess; nothing is asked of a run whose sides
all run here, as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from nanobench.harness.errors import BadInput
from nanobench.harness.workers.environment import PROTOCOL, WorkerEnv

ANSWER = "@@nanobench-env "  # the probe's one line, apart from whatever else the interpreter says
MODULE = "nanobench.harness.runs.environments"


@dataclass(frozen=True)
class Probed:
    """What one side's interpreter runs, as it answered under the side's variables."""

    python: str
    python_version: str
    protocol: int
    nanobench_version: str
    nanobench_at: str  # the directory its nanobench is imported from
    torch_version: str
    triton_version: str | None
    transformers_version: str | None
    aten_cpu_capability: str
    threads: int  # torch's threads there (OMP_NUM_THREADS and the cores)
    variables: tuple[tuple[str, str], ...] = ()  # the user's, set for the side's workers


def install_line(python: str) -> str:
    """The command that puts this nanobench, and what it needs, under `python`."""
    root = Path(__file__).resolve().parents[3]
    if (root / "pyproject.toml").exists():
        return f"{python} -m pip install -e {root} (or, beside .venv: make env TORCH=<version>)"
    from nanobench import __version__

    return f"{python} -m pip install nanobench=={__version__}"


def probe(option: str, env: WorkerEnv, timeout: float = 300) -> Probed:
    """`env`'s interpreter asked what it runs, with `env`'s variables set; `option` names it
    in a refusal."""
    python = env.executable()
    try:
        done = subprocess.run([python, "-m", MODULE], capture_output=True, text=True,
                              timeout=timeout, env=env.over(dict(os.environ)))  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        raise BadInput(f"{option} {python}: not an interpreter that runs ({e}); expected a "
                       "Python interpreter's path") from None  # fmt: skip
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(ANSWER)), None)
    if line is None:
        raise BadInput(refusal(option, python, done.stderr, done.returncode))
    answer = json.loads(line[len(ANSWER) :])
    if answer.get("protocol") != PROTOCOL:
        raise BadInput(f"{option} {python}: its nanobench ({answer.get('nanobench_version')}) "
                       f"speaks worker protocol {answer.get('protocol')}, this one {PROTOCOL}; "
                       f"install this one there: {install_line(python)}")  # fmt: skip
    known = {f.name for f in fields(Probed)} - {"python", "variables"}
    # the path as the user gave it (a wrapper script runs another), with the side's variables
    return Probed(python=python, variables=env.variables,
                  **{k: v for k, v in answer.items() if k in known})  # fmt: skip


def refusal(option: str, python: str, stderr: str, code: int) -> str:
    """Why an interpreter gave no answer, in one line, with what to do."""
    said = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = said[-1] if said else f"it said nothing and exited {code}"
    if "No module named 'nanobench'" in last or "No module named nanobench" in last:
        return f"{option} {python}: no nanobench there; install it: {install_line(python)}"
    if MODULE in last:
        return (f"{option} {python}: its nanobench is older than worker protocol {PROTOCOL}; "
                f"install this one there: {install_line(python)}")  # fmt: skip
    if "ModuleNotFoundError" in last:
        return f"{option} {python}: nanobench cannot start there ({last}); install it: " + (
            install_line(python))  # fmt: skip
    return f"{option} {python}: not a Python with nanobench that answers ({last[:200]})"


def probed(sides) -> dict[str, Probed]:
    """Each side's environment (`harness.runs.sides.Sides`), by side name; each distinct one
    asked once. Empty where every side runs here, as it is."""
    if not sides.elsewhere:
        return {}
    asked: dict[WorkerEnv, Probed] = {}
    found = {}
    for side in sides:
        if side.env not in asked:
            asked[side.env] = probe(option_of(side.env, sides), side.env)
        found[side.name] = asked[side.env]
    return found


def option_of(env: WorkerEnv, sides) -> str:
    """The option that named `env`, for its refusal: --vs-python, --vs-env or --python."""
    first = sides.sides[0].env
    if env == first:
        return "--python"
    return "--vs-python" if env.python != first.python else "--vs-env"


SAID = (("torch_version", "torch"), ("triton_version", "triton"),
        ("transformers_version", "transformers"), ("nanobench_version", "nanobench"),
        ("python_version", "Python"), ("aten_cpu_capability", "CPU capability"),
        ("threads", "torch threads"))  # fmt: skip


def differences(found: dict[str, Probed]) -> list[str]:
    """What differs between the sides' environments, a line each: the variables set for a
    side, then the interpreters, versions and capability that differ ("torch: 2.13.0 (before),
    2.14.1 (after)"). Nothing for one environment."""
    if len(set(found.values())) < 2:
        return []
    lines = [f"set for {side}: " + ", ".join(f"{k}={v}" for k, v in p.variables)
             for side, p in found.items() if p.variables]  # fmt: skip
    for attr, name in (("python", "interpreter"), *SAID):
        values = {side: getattr(p, attr) for side, p in found.items()}
        if len(set(values.values())) > 1:
            lines.append(f"{name}: " + ", ".join(f"{v} ({s})" for s, v in values.items()))
    return lines


def recorded(record, found: dict[str, Probed]):
    """The run's env record (`env_record.EnvRecord`) with each side's environment; where every
    side ran in one environment (--python alone), its versions are the record's own: what
    `compare` holds against another run's."""
    record = replace(record, sides={side: asdict(p) for side, p in found.items()})
    if len(set(found.values())) > 1:
        return record
    one = next(iter(found.values()))
    same = ("torch_version", "triton_version", "transformers_version", "nanobench_version",
            "aten_cpu_capability")  # fmt: skip
    return replace(record, **{k: getattr(one, k) for k in same})


def answer() -> dict:
    """This interpreter's answer: what its workers would run."""
    import nanobench
    from nanobench.harness.runs.env_record import collect_env

    record = collect_env(0, [])
    return {
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "protocol": PROTOCOL,
        "nanobench_version": record.nanobench_version,
        "nanobench_at": str(Path(nanobench.__file__).resolve().parent),
        **{k: v for k, v in asdict(record).items() if k.endswith("_version")},
        "aten_cpu_capability": record.aten_cpu_capability,
        "threads": record.threads,
    }


def main() -> None:
    sys.stdout.write(ANSWER + json.dumps(answer()) + "\n")


if __name__ == "__main__":
    main()
