"""Measurements survive faults: killed workers, timeouts, interrupts, and errors inside a worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow
NANOBENCH = [sys.executable, "-m", "nanobench.cli"]


def start(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *NANOBENCH,
            "compile",
            "--backend",
            "eager",
            "--threads",
            "1",
            "--rounds",
            "1",
            "--max-rounds",
            "1",
            "--out",
            str(out),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, timeout: float = 240.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def rows_on_disk(out: Path) -> list[dict]:
    path = out / "compile.csv"
    return pd.read_csv(path).to_dict("records") if path.exists() else []


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def test_a_killed_worker_becomes_a_row_and_the_sweep_goes_on(tmp_path):
    proc = start(tmp_path, "--modes", "off,dynamic", "--steps", "40")
    wait_for(lambda: len(rows_on_disk(tmp_path)) == 1)
    # off's worker stays alive for the rounds; the newer child is dynamic's, setting up
    wait_for(lambda: len(children(proc.pid)) == 2)
    os.kill(max(children(proc.pid)), signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    rows = rows_on_disk(tmp_path)
    assert [r["mode"] for r in rows] == ["off", "dynamic"]
    assert rows[1]["status"] == "crashed: SIGKILL"
    assert rows[0]["status"] == "ok" and rows[0]["rounds"] == 1, "off went on to its round"
    assert "Traceback" not in err


def test_an_interrupted_sweep_keeps_finished_rows_and_says_what_did_not_run(tmp_path):
    proc = start(tmp_path, "--modes", "off,dynamic,static", "--steps", "40")
    wait_for(lambda: len(rows_on_disk(tmp_path)) == 1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "not run: dynamic, static" in err
    assert "Traceback" not in err
    rows = rows_on_disk(tmp_path)
    assert [(r["mode"], r["status"]) for r in rows] == [("off", "ok")]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".compile.csv")]
    wait_for(lambda: not children(proc.pid), timeout=30)


def test_a_worker_past_its_timeout_becomes_a_timeout_row(tmp_path):
    proc = start(tmp_path, "--modes", "dynamic", "--steps", "40", "--timeout", "2", "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    rows = rows_on_disk(tmp_path)
    assert rows[0]["status"] == "timeout"
    import json

    doc = json.loads(out)
    assert doc["rows"][0]["status"] == "timeout"
    assert any(not g["passed"] for g in doc["gates"])


def test_an_exception_inside_a_worker_is_an_error_row_with_its_line(tmp_path):
    from nanobench.compile_bench import spec_for
    from nanobench.fresh import run_fresh

    spec = spec_for(model=tmp_path / "gone", steps=2, backend="eager", mode="off")
    row = run_fresh("nanobench.compile_worker", spec, timeout=120)
    assert row["status"].startswith("error: CheckpointError:")
    assert "no such checkpoint directory" in row["status"]
