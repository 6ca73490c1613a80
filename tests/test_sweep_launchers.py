"""`nanobench sweep`'s launchers: a point's statuses, Ctrl-C, sharing the machine, Ray's request.

Every point here is a stand-in (a shell script as the interpreter, or a canned `PointRun`), so
these run in seconds; tests/test_sweep.py runs real points.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import nanobench.sweep.launchers as launchers
from nanobench.cli import app
from nanobench.sweep.launchers import PointRun, Task, run_point
from nanobench.sweep.points import load_grid, points

# Four points; every run here is canned, so the options only have to be valid.
BUCKETS_GRID = 'command = "buckets"\n[axes]\nwidth_multiple = [64, 512]\nrows = [3, 5]\n'


def write_grid(tmp_path: Path, text: str, name: str = "grid.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def test_a_timed_ray_task_asks_for_a_whole_node():
    from nanobench.harness.errors import BadInput
    from nanobench.sweep.launchers import parse_resources, whole_node

    two = {"Alive": True, "Resources": {"CPU": 2.0}}
    assert whole_node([two, two, {"Alive": False, "Resources": {"CPU": 64.0}}]) == {"num_cpus": 2.0}
    tagged = {"Alive": True, "Resources": {"CPU": 8.0, "nanobench_node": 1.0}}
    assert whole_node([tagged, {**tagged, "Resources": {"CPU": 96.0, "nanobench_node": 1.0}}]) == {
        "resources": {"nanobench_node": 1}
    }
    with pytest.raises(BadInput, match="nanobench_node"):
        whole_node([two, {"Alive": True, "Resources": {"CPU": 8.0}}])
    assert parse_resources('{"GPU": 1, "accelerator_type:H100": 0.01}') == {
        "num_gpus": 1,
        "resources": {"accelerator_type:H100": 0.01},
    }
    with pytest.raises(BadInput, match="--resources"):
        parse_resources("GPU=1")


# --- launching: failures, interrupts, sharing the machine -------------------------------------


def fake_executable(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def task(tmp_path: Path, timeout_s: float = 30) -> Task:
    return Task("k", ("buckets",), str(tmp_path / "o"), timeout_s, timed=False)


@pytest.mark.parametrize(
    "body,status,detail",
    [
        ("kill -9 $$", "crashed", "killed by SIGKILL"),
        ("echo not json; exit 0", "crashed", "exit 0"),
        ("echo 'nanobench: error: --rows 0: expected' >&2; exit 2", "bad-input", "--rows 0"),
        ("sleep 30", "timeout", "killed after 1 s"),
        ('echo \'{"rows": [{"a": 1}], "gates": []}\'', "ok", ""),
    ],
)
def test_a_point_that_crashes_or_hangs_is_a_status(tmp_path, monkeypatch, body, status, detail):
    monkeypatch.setattr(launchers.sys, "executable", fake_executable(tmp_path, body))
    began = time.perf_counter()
    run = run_point(task(tmp_path, timeout_s=1))
    assert run.status == status and detail in run.detail, run
    assert time.perf_counter() - began < 10
    assert run.env["hostname"] == socket.gethostname()


def test_the_commands_own_environment_record_wins(tmp_path, monkeypatch):
    doc = {"rows": [], "gates": [], "env": {"hostname": "gpu-node-7", "gpu": "H100"}}
    body = f"echo '{json.dumps(doc)}'"
    monkeypatch.setattr(launchers.sys, "executable", fake_executable(tmp_path, body))
    assert run_point(task(tmp_path)).env == doc["env"]


def canned(task, started=None) -> PointRun:
    return PointRun("ok", "", 0.0, {"rows": [{"waste": 0.5}], "gates": []}, {"hostname": "h"})


def test_ctrl_c_keeps_every_finished_point_and_a_rerun_runs_the_rest(tmp_path, monkeypatch):
    grid = write_grid(tmp_path, BUCKETS_GRID)
    out = tmp_path / "out"
    calls: list[str] = []

    def interrupted_at_third(task, started=None):
        calls.append(task.key)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return canned(task)

    monkeypatch.setattr(launchers, "run_point", interrupted_at_third)
    result = invoke(["sweep", grid, "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output
    frame = pd.read_csv(out / "sweep.csv")
    assert list(frame["point_key"]) == calls[:2]

    rerun: list[str] = []
    monkeypatch.setattr(launchers, "run_point", lambda t, s=None: rerun.append(t.key) or canned(t))
    assert invoke(["sweep", grid, "--out", str(out)]).exit_code == 0
    assert sorted(rerun) == sorted({p.key for p in points(load_grid(grid))} - set(calls[:2]))
    assert invoke(["sweep", grid, "--out", str(out), "--redo"]).exit_code == 0
    assert len(rerun) == 2 + 4


def most_at_once(tmp_path, monkeypatch, text: str, jobs: int) -> int:
    lock, live, peak = threading.Lock(), [0], [0]

    def slow(task, started=None):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.3)
        with lock:
            live[0] -= 1
        return canned(task)

    monkeypatch.setattr(launchers, "run_point", slow)
    grid = write_grid(tmp_path, text, f"g{jobs}.toml")
    result = invoke(["sweep", grid, "--jobs", str(jobs), "--out", str(tmp_path / f"o{jobs}")])
    assert result.exit_code == 0, result.output
    return peak[0]


def test_arithmetic_points_share_the_machine_and_timed_points_never(tmp_path, monkeypatch):
    assert most_at_once(tmp_path, monkeypatch, BUCKETS_GRID, jobs=2) == 2
    timed = 'command = "capture"\n[axes]\nrows = [1, 2, 3]\n'
    assert most_at_once(tmp_path, monkeypatch, timed, jobs=3) == 1


@pytest.mark.parametrize(
    "verdict,status,code",
    [
        ("pass", "ok", 0),
        ("inconclusive", "ok", 3),  # nothing failed, one gate can't tell: exit 3, as every command
        ("fail", "ok", 1),
        ("pass", "crashed", 1),
    ],
)
def test_sweep_check_exit_code_follows_the_points_gates(
    tmp_path, monkeypatch, verdict, status, code
):
    def run(task, started=None) -> PointRun:
        gate = {"name": "g", "passed": verdict == "pass", "detail": "", "verdict": verdict}
        return PointRun(status, "", 0.0, {"rows": [], "gates": [gate]}, {"hostname": "h"})

    monkeypatch.setattr(launchers, "run_point", run)
    grid = write_grid(tmp_path, 'command = "buckets"\n[axes]\nrows = [3]\n')
    result = invoke(["sweep", grid, "--out", str(tmp_path / "o"), "--check", "--json"])
    assert result.exit_code == code, result.output
    (point,) = json.loads(result.stdout)["gates"]
    assert point["verdict"] == ("pass" if code == 0 else "fail" if code == 1 else "inconclusive")


def test_a_point_record_with_a_renamed_field_is_run_again_not_trusted(tmp_path, monkeypatch):
    grid = write_grid(tmp_path, 'command = "buckets"\n[axes]\nrows = [3, 5]\n')
    out = tmp_path / "o"
    calls: list[str] = []

    def counted(task, started=None) -> PointRun:
        calls.append(task.key)
        return canned(task)

    monkeypatch.setattr(launchers, "run_point", counted)
    assert invoke(["sweep", grid, "--out", str(out)]).exit_code == 0
    first = sorted(out.glob("points/*/point.json"))[0]
    record = json.loads(first.read_text())
    record["wall_seconds"] = record.pop("wall_s")  # as a later version might name it
    first.write_text(json.dumps(record))
    calls.clear()
    assert invoke(["sweep", grid, "--out", str(out)]).exit_code == 0
    assert calls == [first.parent.name]
