"""Measurements survive faults: killed workers, timeouts, interrupts, and errors inside a worker.

A worker runs in its own session, so after a timeout or an interrupt it is checked by pid: the
worker and every process in its group must be gone (a zombie waiting for its adopter to reap
it counts as gone: it runs nothing).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
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


def state(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) from /proc, or None when the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
    return fields[0], int(fields[2])


def running_in_group(pgid: int) -> list[int]:
    """Pids of processes in group `pgid` that are not zombies."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = state(int(entry.name))
            if st is not None and st[1] == pgid and st[0] != "Z":
                found.append(int(entry.name))
    return found


def the_worker(cli_pid: int) -> int:
    """The one worker the CLI is running now; it leads its own process group."""
    wait_for(lambda: len(children(cli_pid)) == 1, timeout=60)
    (worker,) = children(cli_pid)
    assert state(worker)[1] == worker, "a worker leads its own process group"
    return worker


def assert_group_gone(pgid: int, grace_s: float = 5.0) -> None:
    """SIGKILL to a group is delivered at once, but a grandchild may take a moment to exit."""
    deadline = time.time() + grace_s
    while running_in_group(pgid) and time.time() < deadline:
        time.sleep(0.1)
    assert not running_in_group(pgid), f"still running in group {pgid}: {running_in_group(pgid)}"


@pytest.fixture
def spawned():
    """Pids a test learns (`group`: a worker's); whatever a failing test left running is killed."""
    seen: dict = {}
    yield seen
    if "group" in seen:
        try:
            os.killpg(seen["group"], signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def sigint_heard():
    """Children start with SIGINT's default action, however this process was started.

    A shell starts a background job (`make test &` beside another) with SIGINT ignored, exec
    keeps an ignored signal, and Python then installs no KeyboardInterrupt handler: the
    child would never hear the test's Ctrl-C. A handled signal is reset to its default at
    exec, so with a handler here for the test's length every child starts as a terminal's."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


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


def test_an_interrupted_sweep_keeps_finished_rows_and_says_what_did_not_run(
    tmp_path, spawned, sigint_heard
):
    proc = start(tmp_path, "--modes", "off,dynamic,static", "--steps", "40")
    wait_for(lambda: len(rows_on_disk(tmp_path)) == 1)
    # off's worker stays alive for the rounds; the second child is dynamic's, setting up.
    wait_for(lambda: len(children(proc.pid)) == 2, timeout=60)
    workers = children(proc.pid)
    spawned["group"] = max(workers)
    proc.send_signal(signal.SIGINT)  # the CLI only: the workers' sessions get no SIGINT
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    # The CLI reaps the workers it killed before it exits, so their pids are gone outright.
    for worker in workers:
        assert state(worker) is None, f"worker {worker} outlived the CLI: {state(worker)}"
        assert_group_gone(worker)
    assert "not run: dynamic, static" in err
    assert "Traceback" not in err
    rows = rows_on_disk(tmp_path)
    assert [(r["mode"], r["status"]) for r in rows] == [("off", "ok")]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".compile.csv")]


def test_a_worker_past_its_timeout_becomes_a_timeout_row(tmp_path, spawned):
    proc = start(tmp_path, "--modes", "dynamic", "--steps", "40", "--timeout", "2", "--json")
    worker = the_worker(proc.pid)
    spawned["group"] = worker
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert state(worker) is None, f"worker {worker} outlived its timeout: {state(worker)}"
    assert_group_gone(worker)
    rows = rows_on_disk(tmp_path)
    assert rows[0]["status"] == "timeout"
    doc = json.loads(out)
    assert doc["rows"][0]["status"] == "timeout"
    assert any(not g["passed"] for g in doc["gates"])


def test_an_exception_inside_a_worker_is_an_error_row_with_its_line(tmp_path):
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.workers.fresh import run_fresh

    spec = WorkerSpec(model=str(tmp_path / "gone"), steps=2, backend="eager", mode="off")
    row = run_fresh("nanobench.compile.session", asdict(spec), timeout=120)
    assert row["status"].startswith("error: CheckpointError:")
    assert "no such checkpoint directory" in row["status"]


# -- the whole group, grandchildren included (tests/spawning_worker.py) ------------------------

ROOT = Path(__file__).resolve().parents[1]
WORKER_ENV = {"PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_a_timeout_kills_the_worker_and_its_grandchildren(spawned):
    from nanobench.harness.workers.fresh import run_fresh

    row = run_fresh(
        "tests.spawning_worker",
        {"sleep_s": 600},
        timeout=3,
        env=WORKER_ENV,
        on_progress=spawned.update,
    )
    assert row["status"] == "timeout"
    assert {"worker", "grandchild", "group"} <= set(spawned), "the worker reported no pids"
    assert spawned["group"] == spawned["worker"]
    assert state(spawned["worker"]) is None, "run_fresh reaps the worker it killed"
    assert_group_gone(spawned["group"])


def test_an_interrupt_kills_the_worker_and_its_grandchildren(spawned, sigint_heard):
    """SIGINT to the process running run_fresh (as Ctrl-C reaches the CLI), not to the group."""
    driver = (
        "import json, sys\n"
        "from nanobench.harness.workers.fresh import run_fresh\n"
        "run_fresh('tests.spawning_worker', {'sleep_s': 600}, timeout=600,\n"
        "          on_progress=lambda e: print(json.dumps(e), flush=True))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **WORKER_ENV},
    )
    spawned.update(json.loads(proc.stdout.readline()))
    assert state(spawned["grandchild"]) is not None, "the grandchild runs before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert state(spawned["worker"]) is None, "run_fresh reaps the worker before re-raising"
    assert_group_gone(spawned["group"])


# -- a renamed field in a real worker's payload ------------------------------------------------

RENAMING_WORKER = """
import nanobench.compile.session as session
from nanobench.harness.workers.fresh import serve_main

real_ledger = session.CompileSession.ledger


def renamed(self, *args):
    row = real_ledger(self, *args)
    row["frames_built"] = row.pop("builds")  # what a careless rename in the worker looks like
    return row


session.CompileSession.ledger = renamed
serve_main(session.open_session)
"""


def test_a_field_renamed_in_the_worker_fails_the_parent_naming_it(tmp_path, monkeypatch):
    """The real compile session, one field renamed before it is emitted: the parent refuses."""
    from engine.sources import materialize_preset
    from nanobench.compile.bench import sweep
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.runs.rows import RowSchemaError

    (tmp_path / "renaming_worker.py").write_text(RENAMING_WORKER)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{ROOT}")
    monkeypatch.setattr("nanobench.compile.bench.WORKER", "renaming_worker")
    spec = WorkerSpec(model=str(materialize_preset("tiny")), steps=2, backend="eager", threads=1)
    with pytest.raises(RowSchemaError, match="unknown field 'frames_built'"):
        sweep(spec, ["off"], timeout=120)
