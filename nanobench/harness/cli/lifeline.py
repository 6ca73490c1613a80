"""A run's processes end together: SIGTERM ends a command as Ctrl-C does, workers end with it.

What it is: the command's side, `terminate_as_interrupt()` (while a command runs, SIGTERM, what
`timeout`, CI runners and schedulers send, raises `Terminated`, a KeyboardInterrupt, so every
`except KeyboardInterrupt` that keeps finished rows and ends workers runs for it unchanged) and
`interrupt_code(e)` (the exit code that follows the signal: 130 for Ctrl-C, 143 for SIGTERM);
the spawning side, `parent_env()` (the variables a child is started with, naming its parent);
the child's side, `end_with_parent()` (a worker, or a sweep's point, whose parent is gone for any
reason, SIGKILL included, kills itself and its process group: Inductor's compile workers too).
What it is not: killing workers while the parent lives (`fresh.kill_group`, the fleet) or saying
what was kept (`console.interrupted`).
Invariant: nothing happens at import; a handler is installed in the main thread only, and the
previous SIGTERM handler is back once the command ends; a child told its parent's pid ends its
group once that parent is gone: at once on Linux (the parent-death signal), within POLL_S
elsewhere, and at once when the parent died before the child could ask to be told.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

PARENT_ENV = "NANOBENCH_PARENT_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Linux sends it when the *thread* that spawned the child exits, not only the process (a sweep
# spawns its points from pool threads), so the handler checks who the parent is before acting.
PARENT_DEATH_SIGNAL = signal.SIGHUP
POLL_S = 0.5  # where there is no parent-death signal: how often the parent is looked for


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt: the same rows kept, workers ended."""

    signum = signal.SIGTERM


def interrupt_code(e: BaseException | None) -> int:
    """128 + the signal that interrupted the run: 143 for `Terminated`, else 130 (SIGINT)."""
    return 128 + int(getattr(e, "signum", signal.SIGINT))


def _raise_terminated(signum, frame) -> None:
    # A second SIGTERM would cut short the clean-up the first started (killing the workers,
    # saving the rows); SIGKILL still ends the run at once.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


@contextmanager
def terminate_as_interrupt():
    """While the block runs (in the main thread), SIGTERM raises `Terminated`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        # None: a handler not set from Python, which cannot be put back; the default is.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def parent_env() -> dict[str, str]:
    """What a child nanobench spawns is started with, so that it can end with this process."""
    return {PARENT_ENV: str(os.getpid())}


def end_with_parent() -> None:
    """When this process was started by nanobench (`parent_env`), end it and its group as soon
    as that parent is gone. Consumes the variable, so this process's own children are told of
    their own parent, not of this one's. Call it from the main thread, before spawning."""
    named = os.environ.pop(PARENT_ENV, "")
    if not named.isdigit():
        return
    parent = int(named)
    if not (_on_main_thread() and _parent_death_signal(parent)):
        threading.Thread(target=_poll_parent, args=(parent,), daemon=True).start()
    # The parent may have died before the signal was asked for: then nothing would send it.
    if os.getppid() != parent:
        _end_group()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _parent_death_signal(parent: int) -> bool:
    """Ask Linux for PARENT_DEATH_SIGNAL when the parent's spawning thread exits; False where
    there is no prctl. The handler ends the group only if the parent process itself is gone."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False

    def on_parent_death(signum, frame) -> None:
        if os.getppid() != parent:
            _end_group()

    previous = signal.signal(PARENT_DEATH_SIGNAL, on_parent_death)
    if prctl(PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0) != 0:
        signal.signal(PARENT_DEATH_SIGNAL, previous)
        return False
    return True


def _poll_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    _end_group()


def _end_group() -> None:
    """SIGKILL to this process and, when it leads its group (a worker does), the whole group:
    anything it spawned goes with it. One that does not lead its group kills itself only."""
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
