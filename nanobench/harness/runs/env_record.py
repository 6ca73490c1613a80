"""The environment a run measured in, recorded beside its numbers.

What it is: `EnvRecord` (frozen: schema version, nanobench version and git commit, torch,
triton and transformers versions, CPU model, cores, torch threads, the CPU capability ATen
dispatches to, CUDA device and driver, argv, and the machine's load before and after the run:
1-minute load average and the cores other processes kept busy, `nanobench.harness.workers.load`;
and, where a side ran elsewhere, each side's interpreter and versions, `environments.Probed`),
`collect_env(threads, argv)`, `with_load(record, before, after)` and `write_env(path,
record)`, which writes `<out>/<command>-env.json` whole or not at all.
What it is not: a check. Nothing here refuses to run; a missing piece is null.
Invariant: reads only this machine (no network); `read_env(path)` rebuilds what `write_env`
wrote (`rows.rebuild`: a renamed or dropped key is an error naming it), the same row the run had.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import nanobench
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.workers.inductor_cache import cpu_model

SCHEMA_VERSION = 3  # 2: the load before and after the run; 3: each side's environment


@dataclass(frozen=True)
class EnvRecord:
    schema_version: int
    nanobench_version: str
    git_commit: str | None
    torch_version: str
    triton_version: str | None
    transformers_version: str | None
    cpu_model: str
    cores: int
    threads: int
    aten_cpu_capability: str
    aten_cpu_capability_env: str | None
    cuda_device: str | None
    cuda_driver: str | None
    argv: list[str]
    load_avg_1m_before: float | None = None
    others_cores_before: float | None = None  # cores other processes kept busy before timing
    load_avg_1m_after: float | None = None
    others_cores_after: float | None = None
    # by side name, what its interpreter answered (`environments.Probed`), where a side's
    # workers ran under another interpreter or the user's variables; None: all ran here
    sides: dict | None = None


def _version(module: str) -> str | None:
    try:
        return version(module)
    except PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The checkout's HEAD when nanobench runs from one (an installed wheel has none)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _cuda_driver() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else None


def collect_env(threads: int, argv: list[str]) -> EnvRecord:
    """This machine and process; `threads` is the torch thread count the workers ran with."""
    import torch  # here, not at import: a command's parent starts without torch (0.8 s)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cuda = torch.cuda.is_available()
    return EnvRecord(
        schema_version=SCHEMA_VERSION,
        nanobench_version=nanobench.__version__,
        git_commit=_git_commit(),
        torch_version=torch.__version__,
        triton_version=_version("triton"),
        transformers_version=_version("transformers"),
        cpu_model=cpu_model(),
        cores=int(cores or 1),
        threads=int(threads or torch.get_num_threads()),
        aten_cpu_capability=torch.backends.cpu.get_cpu_capability(),
        aten_cpu_capability_env=os.environ.get("ATEN_CPU_CAPABILITY"),
        cuda_device=torch.cuda.get_device_name(0) if cuda else None,
        cuda_driver=_cuda_driver() if cuda else None,
        argv=list(argv),
    )


def with_load(record: EnvRecord, before=None, after=None) -> EnvRecord:
    """The record with `nanobench.harness.workers.load.LoadSample`s taken before and after the timed run."""
    found = {}
    for when, sample in (("before", before), ("after", after)):
        if sample is not None:
            found[f"load_avg_1m_{when}"] = sample.load_avg_1m
            found[f"others_cores_{when}"] = sample.others_cores
    return replace(record, **found)


def read_env(path: Path) -> EnvRecord:
    """The record `write_env` wrote at `path`."""
    return rebuild(EnvRecord, json.loads(path.read_text()))


def write_env(path: Path, record: EnvRecord) -> Path:
    """`record` as JSON, written to a temporary file and renamed over `path`."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2) + "\n")
    os.replace(tmp, path)
    return path
