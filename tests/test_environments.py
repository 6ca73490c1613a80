"""Another environment as a side: `--python`, `--vs-python` and `--vs-env`.

Checked against peers: which interpreter started each worker against a wrapper script's own log
of its invocations; a variable reaching the after side's workers against a step whose output
reads it (the output check fails exactly that side, by the amount the step adds); the versions
and capability a side reports against what that interpreter itself prints under the variable;
the variables nanobench refuses against the env functions its commands hand their workers;
every refusal before any worker, one line, exit 2.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.spec import CompileSpec
from nanobench.decode.spec import DecodeSpec
from nanobench.harness.runs.environments import Probed, differences, probe
from nanobench.harness.runs.history_store import KeyFacts
from nanobench.harness.runs.sides import AFTER, BEFORE, ENVIRONMENTS, Sides
from nanobench.harness.workers.environment import PROTOCOL, WorkerEnv, owned_by
from nanobench.profile.spec import ProfileSpec
from nanobench.startup.spec import StartupSpec
from tests.helpers import text_tables

runner = CliRunner()

SHIFTED_STEP = """
import os

import torch


class Shifted:
    def __init__(self, rows, steps):
        g = torch.Generator().manual_seed(0)
        self.w = torch.randn(16, 24, generator=g)  # (W, V)
        self.x = torch.randn(steps, rows, 16, generator=g)  # (S, B, W)
        self.shift = float(os.environ.get("NB_TEST_SHIFT", "0"))  # read by the worker

    def forward(self, x):  # x (B, W)
        return x @ self.w + self.shift  # (B, V)

    def step_inputs(self, step):
        return (self.x[step],), {}


def factory(*, rows, prompt_len, steps, device, dtype):
    return Shifted(rows, steps)
"""


@pytest.fixture
def wrapper(tmp_path) -> tuple[Path, Path]:
    """An interpreter of its own path: a script that logs how it was started, then runs this
    Python (the same packages: what `make env` gives, cheaply)."""
    log, script = tmp_path / "started.log", tmp_path / "wrapped-python"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return script, log


def step_args(tmp_path: Path, *more: str) -> list[str]:
    step = tmp_path / "shifted.py"
    step.write_text(SHIFTED_STEP)
    return ["compile", "--target", f"{step}:factory", "--modes", "off", "--steps", "3",
            "--rows", "2", "--processes", "1", "--rounds", "2", "--max-rounds", "2",
            "--out", str(tmp_path / "out"), *more]  # fmt: skip


def test_the_after_side_runs_under_its_interpreter_with_its_variables(tmp_path, wrapper):
    """One run as a user types it: the after side under another interpreter with a variable
    the step reads; its workers, and only its, start under that interpreter, and the output
    check fails its row by the shift the variable adds."""
    script, log = wrapper
    records = tmp_path / "records.json"
    result = runner.invoke(app, step_args(
        tmp_path, "--vs-python", str(script), "--vs-env", "NB_TEST_SHIFT=1",
        "--export-json", str(records)))  # fmt: skip
    assert result.exit_code == 1, result.output
    started = log.read_text().splitlines()
    # the probe, then the after side's one worker; the before side's never came through here
    assert started == ["-m nanobench.harness.runs.environments", "-m nanobench.compile.session"]
    text = " ".join(result.output.split())
    assert f"interpreter: {sys.executable} (before), {script} (after)" in text
    assert "set for after: NB_TEST_SHIFT=1" in text
    assert "after off: output changed: step 1 row 0's top logits differ by 1" in text
    assert text_tables(result.output)[0].header == ("", "measure", "before", "after", "change")
    with open(tmp_path / "out" / "compile.csv") as f:
        status = {r["side"]: r["status"] for r in csv.DictReader(f)}
    assert status["before"] == "ok" and status["after"].endswith("against before off")
    env = json.loads((tmp_path / "out" / "compile-env.json").read_text())
    assert env["sides"]["after"]["python"] == str(script)
    assert env["sides"]["after"]["variables"] == [["NB_TEST_SHIFT", "1"]]
    assert env["sides"]["before"]["python"] == sys.executable
    exported = json.loads(records.read_text())
    befores = [r for r in exported if r["benchmark"]["extra_info"]["side"] == "before"]
    assert befores and all(r["benchmark"]["extra_info"]["python"] == sys.executable
                           for r in befores)  # fmt: skip


def test_a_variable_nothing_reads_leaves_both_sides_ok_and_the_table_says_it(tmp_path):
    result = runner.invoke(app, step_args(tmp_path, "--vs-env", "NB_NOTHING_READS_THIS=1"))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "factory: NB_NOTHING_READS_THIS=1 (after) vs this environment (before)" in text
    assert "set for after: NB_NOTHING_READS_THIS=1" in text
    with open(tmp_path / "out" / "compile.csv") as f:
        assert {r["side"]: r["status"] for r in csv.DictReader(f)} == {
            "before": "ok",
            "after": "ok",
        }


def test_a_side_reports_what_its_interpreter_itself_prints_under_its_variables():
    env = WorkerEnv("", (("ATEN_CPU_CAPABILITY", "default"),))
    found = probe("--vs-env", env)
    itself = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__, "
         "torch.backends.cpu.get_cpu_capability())"],
        capture_output=True, text=True, check=True, env={**os.environ, "ATEN_CPU_CAPABILITY": "default"},
    ).stdout.split()  # fmt: skip
    assert [found.torch_version, found.aten_cpu_capability] == itself == [itself[0], "DEFAULT"]
    assert found.protocol == PROTOCOL and found.python == sys.executable
    here = probe("--python", WorkerEnv())
    assert (
        differences({"before": here, "after": found})[:2]
        == [
            "set for after: ATEN_CPU_CAPABILITY=default",
            f"CPU capability: {here.aten_cpu_capability} (before), DEFAULT (after)",
        ]
        or here.aten_cpu_capability == "DEFAULT"
    )


def bare_venv(where: Path) -> Path:
    """A Python with nothing installed: no nanobench, no torch."""
    venv.EnvBuilder(with_pip=False).create(where)
    return where / "bin" / "python"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--vs-env", "ATEN_CPU_CAPABILITY"], "expected KEY=VALUE"),
        (["--vs-env", "A=1,A=2"], "each KEY once"),
        (["--vs-env", "TORCHINDUCTOR_CACHE_DIR=/tmp/x"], "nanobench sets it for its workers"),
        (["--vs-env", "OMP_NUM_THREADS=1", "--threads", "1"], "leave --threads at 0"),
        (["--vs-python", "/no/such/python"], "no such file; expected a Python interpreter"),
        (["--vs-python", "{tmp}/plain.txt"], "not executable"),
        (["--vs-python", "/bin/true"], "not a Python with nanobench that answers"),
        (["--vs-env", "A=1", "--try", "cpp-wrapper"], "one comparison a run"),
        (["--vs-env", "A=1", "--vs-path", "unplanned"], "one comparison a run"),
    ],
)
def test_bad_environments_are_one_line_before_any_worker(tmp_path, args, says):
    out = tmp_path / "out"
    (tmp_path / "plain.txt").write_text("not a program")
    args = [a.format(tmp=tmp_path) for a in args]
    result = runner.invoke(app, ["compile", "--modes", "off,dynamic", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1
    assert not (out / "compile.csv").exists()


def test_an_interpreter_without_nanobench_or_of_another_protocol_is_told_how_to_install(
    tmp_path, monkeypatch
):
    bare = bare_venv(tmp_path / "bare")
    monkeypatch.chdir(tmp_path)  # a checkout in the working folder would be importable there
    result = runner.invoke(app, ["compile", "--python", str(bare), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert f"--python {bare}: no nanobench there; install it: {bare} -m pip install" in (
        " ".join(result.output.split()))  # fmt: skip
    other = tmp_path / "other-protocol"
    answer = {"protocol": PROTOCOL + 1, "nanobench_version": "9.9"}
    other.write_text(f"#!/bin/sh\necho '@@nanobench-env {json.dumps(answer)}'\n")
    other.chmod(0o755)
    result = runner.invoke(app, ["startup", "--vs-python", str(other), "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"speaks worker protocol {PROTOCOL + 1}, this one {PROTOCOL}" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["decode", "profile", "startup"])
def test_every_measured_command_takes_an_environment_side(tmp_path, command):
    """The options are each measured command's; a refusal names the command's own variable."""
    owned = {"decode": "HF_HUB_OFFLINE=0", "profile": "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=0",
             "startup": "TRITON_CACHE_DIR=/tmp/t"}[command]  # fmt: skip
    result = runner.invoke(app, [command, "--vs-env", owned, "--out", str(tmp_path)])
    assert result.exit_code == 2 and "nanobench sets it for its workers" in result.output
    spec = {"decode": DecodeSpec, "profile": ProfileSpec, "startup": StartupSpec}[command]
    sides = Sides.of(spec(vs_env=(("X", "1"),)))
    assert sides.kind == ENVIRONMENTS and sides.names == (BEFORE, AFTER)
    assert sides[AFTER].env == WorkerEnv("", (("X", "1"),)) and sides[AFTER].held_to == BEFORE


def test_the_variables_refused_are_those_each_command_hands_its_workers(tmp_path):
    """Read off the commands' own env functions: a variable one of them sets and the spec does
    not refuse would be overridden silently, one way or the other."""
    from nanobench.compile.bench import cache_env
    from nanobench.decode.bench import worker_env
    from nanobench.harness.cli.lifeline import parent_env
    from nanobench.profile.bench import PROFILE_ENV
    from nanobench.startup.caches import start_env

    compile_env = {**cache_env("warm", "dynamic", "cpu")[0], "TORCH_TRACE": "t", **parent_env()}
    decode_env, cache = worker_env(2)
    os.rmdir(cache)
    given = {
        CompileSpec: compile_env,
        ProfileSpec: {**compile_env, **PROFILE_ENV},
        DecodeSpec: {**decode_env, **parent_env()},
        StartupSpec: {**start_env(tmp_path, False), **parent_env()},
    }
    for spec, env in given.items():
        assert set(env) <= set(owned_by(spec.OWNS, threads=2)), spec.__name__
    assert "OMP_NUM_THREADS" not in owned_by(CompileSpec.OWNS, threads=0)


def test_a_plain_run_under_another_interpreter_keeps_a_history_of_its_own():
    facts = KeyFacts("compile", "dynamic speedup", "", "tiny", None, {"torch": "2.13.0"}, {})
    there = Probed("/x/python", "3.11", PROTOCOL, "0.1", "/x", "2.14.1", None, None, "AVX2", 2)
    moved = facts.elsewhere(there)
    assert moved.key() != facts.key() and moved.machine["torch"] == "2.14.1"
    assert moved.machine["python"] == "/x/python"


def test_a_run_in_one_other_environment_records_its_versions_as_the_runs_own():
    """What `compare` reads of two saved runs is the env record's top level: a --python run's
    must be the interpreter's that ran the workers, not the coordinator's."""
    from nanobench.harness.runs.env_record import collect_env
    from nanobench.harness.runs.environments import recorded

    here = collect_env(0, [])
    there = Probed("/x/python", "3.11", PROTOCOL, "0.1", "/x", "2.14.1", "3.8.0", None, "AVX2", 2)
    alone = recorded(here, {"": there})
    assert (alone.torch_version, alone.triton_version) == ("2.14.1", "3.8.0")
    assert alone.sides[""]["python"] == "/x/python"
    both = recorded(here, {"before": probe("--python", WorkerEnv()), "after": there})
    assert both.torch_version == here.torch_version and set(both.sides) == {"before", "after"}
