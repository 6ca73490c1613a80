"""A killed run leaves nothing running: SIGTERM ends a command as Ctrl-C does (rows kept, exit
143), and a worker whose parent is gone, SIGKILL included, ends with its process group.

Processes are read from /proc: a run's are the command's descendants recorded before the kill
and every process in their process groups (a compile subprocess spawned later sits in its
worker's group). A zombie waiting for its adopter to reap it counts as gone: it runs nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import typer

from nanobench.harness.cli.console import interrupted, run_command
from nanobench.harness.cli.lifeline import PARENT_ENV, Terminated, interrupt_code

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
GONE_WITHIN_S = 5.0


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, parent, process group) from /proc, or None when the pid is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
    return fields[0], int(fields[1]), int(fields[2])


def processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := stat(int(entry.name))) is not None:
            found[int(entry.name)] = st
    return found


def descendants(pid: int) -> set[int]:
    table, found, todo = processes(), set(), [pid]
    while todo:
        parent = todo.pop()
        kids = {p for p, (_, ppid, _) in table.items() if ppid == parent}
        todo.extend(kids - found)
        found |= kids
    return found


def running(pids: set[int], groups: set[int]) -> list[tuple[int, str]]:
    """Processes not zombies among `pids` or in `groups`, with their command lines."""
    alive = []
    for pid, (state, _, group) in processes().items():
        if state != "Z" and (pid in pids or group in groups):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                cmd = "?"
            alive.append((pid, cmd[:120]))
    return alive


def assert_all_gone(pids: set[int], groups: set[int], since: float) -> None:
    """Nothing of the run runs GONE_WITHIN_S after `since` (when the signal was sent)."""
    while running(pids, groups) and time.monotonic() < since + GONE_WITHIN_S:
        time.sleep(0.1)
    left = running(pids, groups)
    assert not left, f"{time.monotonic() - since:.1f} s after the kill, still running: {left}"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def reap(proc: subprocess.Popen, groups: set[int]) -> None:
    """Whatever a failing test left running is killed."""
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()
    proc.communicate()


# -- SIGTERM as Ctrl-C, in the command's process ------------------------------------------------


def test_sigterm_inside_a_command_is_exit_143_and_the_handler_is_put_back():
    fallen_through = []
    guard = signal.signal(signal.SIGTERM, lambda s, f: fallen_through.append(s))
    try:
        with pytest.raises(typer.Exit) as ended, run_command(quiet=True):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises on the next bytecode, long before this ends
        assert ended.value.exit_code == 143
        assert not fallen_through, "SIGTERM reached the handler from before the command"
        os.kill(os.getpid(), signal.SIGTERM)
        assert fallen_through == [signal.SIGTERM], "the previous handler is back after it"
    finally:
        signal.signal(signal.SIGTERM, guard)


def test_the_interrupted_line_exits_with_the_signal_that_interrupted():
    for raised, code in ((KeyboardInterrupt(), 130), (Terminated(), 143)):
        try:
            raise raised
        except KeyboardInterrupt:
            assert interrupted(1, 2, ["dynamic"], "compile.csv").exit_code == code
    assert interrupt_code(Terminated()) == 143 and interrupt_code(KeyboardInterrupt()) == 130


# -- a child ends with its parent ----------------------------------------------------------------

# The worker is spawned from a thread that ends once the worker is set up: Linux sends the
# parent-death signal when that *thread* exits, and the worker must live on while its parent
# does. Then the parent is SIGKILLed: the worker and its grandchild must go.
THREAD_SPAWNED = """
import json, threading, time
from nanobench.harness.workers.fresh import LiveWorker

def spawn():
    set_up = threading.Event()
    def progress(event):
        print(json.dumps(event), flush=True)
        set_up.set()
    LiveWorker('tests.spawning_worker', {'sleep_s': 600}, on_progress=progress)
    set_up.wait(120)

thread = threading.Thread(target=spawn)
thread.start()
thread.join()
print('{"thread": "ended"}', flush=True)
time.sleep(600)
"""


def test_a_worker_outlives_the_thread_that_spawned_it_but_not_its_parent():
    driver = subprocess.Popen(
        [sys.executable, "-c", THREAD_SPAWNED], stdout=subprocess.PIPE, text=True, env=ENV
    )
    groups: set[int] = set()
    try:
        pids = json.loads(driver.stdout.readline())
        groups.add(pids["group"])
        assert json.loads(driver.stdout.readline()) == {"thread": "ended"}
        time.sleep(1.0)
        assert running({pids["worker"], pids["grandchild"]}, set()), (
            "the worker ended with the thread that spawned it, its parent still alive"
        )
        driver.kill()
        assert_all_gone({pids["worker"], pids["grandchild"]}, groups, time.monotonic())
    finally:
        reap(driver, groups)


# Where there is no prctl: the daemon thread that polls for the parent.
POLLING_CHILD = """
import os, subprocess, sys, time
from nanobench.harness.cli import lifeline

lifeline._parent_death_signal = lambda parent: False  # as on a system without prctl
lifeline.end_with_parent()
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(os.getpid(), grandchild.pid, os.getpgrp(), flush=True)
time.sleep(600)
"""
POLLING_DRIVER = f"""
import os, subprocess, sys, time
from nanobench.harness.workers.fresh import own_group
from nanobench.harness.cli.lifeline import parent_env

subprocess.Popen([sys.executable, "-c", {POLLING_CHILD!r}], env={{**os.environ, **parent_env()}},
                 **own_group())
time.sleep(600)
"""


def test_without_prctl_a_polling_thread_ends_the_child_with_its_parent():
    driver = subprocess.Popen(
        [sys.executable, "-c", POLLING_DRIVER], stdout=subprocess.PIPE, text=True, env=ENV
    )
    groups: set[int] = set()
    try:
        child, grandchild, group = map(int, driver.stdout.readline().split())
        groups.add(group)
        assert group == child, "the child leads its own group"
        driver.kill()
        assert_all_gone({child, grandchild}, groups, time.monotonic())
    finally:
        reap(driver, groups)


def test_a_child_whose_parent_died_before_it_asked_ends_at_once():
    """Its parent named, but gone by the time it asks for the signal: nothing would send it."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is nobody's parent now
    code = "from nanobench.harness.cli.lifeline import end_with_parent\nend_with_parent()\n"
    child = subprocess.run(
        [sys.executable, "-c", code + "import time\ntime.sleep(60)\n"],
        env={**ENV, PARENT_ENV: str(dead.pid)},
        timeout=30,
        start_new_session=True,
    )
    assert child.returncode == -signal.SIGKILL


# -- a real compile run, killed while the dynamic worker compiles cold ---------------------------


def start_compile(tmp_path: Path) -> subprocess.Popen:
    """`off` then `dynamic`, one process each, one round: `off`'s row is on disk within seconds,
    then `dynamic`'s first worker compiles cold for most of a minute on 2 cores. `--trace`
    makes dynamo's start visible: its log appears under trace/dynamic once it compiles."""
    env = {**ENV, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    return subprocess.Popen(
        [sys.executable, "-m", "nanobench.cli", "compile", "--modes", "off,dynamic"]
        + ["--steps", "2", "--threads", "1", "--processes", "1", "--rounds", "1"]
        + ["--max-rounds", "1", "--trace", "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def compiling(tmp_path: Path) -> bool:
    logs = (tmp_path / "out" / "trace" / "dynamic").glob("*.log")
    return any(p.stat().st_size > 0 for p in logs)


def the_run(proc: subprocess.Popen) -> tuple[set[int], set[int]]:
    """The command's descendants now, and every process group of them and of the command."""
    pids = descendants(proc.pid)
    return pids | {proc.pid}, {stat(p)[2] for p in pids if stat(p)} | {proc.pid}


@pytest.mark.slow
def test_sigterm_mid_compile_keeps_the_rows_ends_every_process_and_exits_143(tmp_path):
    proc = start_compile(tmp_path)
    groups: set[int] = set()
    try:
        wait_for(lambda: compiling(tmp_path), 120, "the dynamic worker to compile")
        time.sleep(2.0)  # into the compile, past dynamo's first frame
        pids, groups = the_run(proc)
        assert len(pids) >= 3, f"the command and both workers: {pids}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert_all_gone(pids, groups, sent)
        _, err = proc.communicate(timeout=30)
    finally:
        reap(proc, groups)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert "not run: dynamic" in err and "interrupted: 1 rows" in err, err[-2000:]
    rows = pd.read_csv(tmp_path / "out" / "compile.csv").to_dict("records")
    assert [(r["mode"], r["status"]) for r in rows] == [("off", "ok")]


@pytest.mark.slow
def test_sigkill_mid_compile_ends_every_worker_with_its_parent(tmp_path):
    proc = start_compile(tmp_path)
    groups: set[int] = set()
    try:
        wait_for(lambda: compiling(tmp_path), 120, "the dynamic worker to compile")
        time.sleep(2.0)
        pids, groups = the_run(proc)
        assert len(pids) >= 3, f"the command and both workers: {pids}"
        sent = time.monotonic()
        proc.kill()
        assert_all_gone(pids, groups, sent)
    finally:
        reap(proc, groups)
