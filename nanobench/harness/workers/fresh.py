"""Fresh processes: run measurements in spawned interpreters and keep whatever they return.

What it is: the coordinator side, `run_fresh(module, spec, timeout)` (spawn `python -m module`
under this interpreter or another,
send the spec, relay progress, return its result row) and `LiveWorker` (the same process kept
alive: the spec first, then one request at a time, each answered with one reply); and the worker
side, `serve_main(open_session)` (JSON lines on stdin and stdout: the spec, then requests until
`stop` or end of input; a session's `ready` row, one `reply` per request, the final `result`).
`run_fresh` is `LiveWorker` with no requests: send the spec, close stdin, read the result;
A worker exits once its final row is out (`exit_now`: what exit runs, not the teardown);
`start_side_by_side` sets up several LiveWorkers at once when their threads leave cores free;
a request that names a `pin` core moves the worker's timing thread there (`pin_this_thread`).
What it is not: a scheduler (`nanobench.harness.workers.rounds` decides who runs when).
Invariant: a worker that crashes, is killed or passes its timeout still yields a row, with a
`status` of `crashed: <signal>`, `timeout` or `error: <one line>`; nothing it measured before is
lost, and killing it kills its whole process group (Inductor's compile workers with it); a
worker whose parent is gone, however it ended, kills its own group (`lifeline.end_with_parent`).
Dynamo's counters and recompile budget are per code object per process, so a fresh process
per mode is the only sweep whose rows are independent of each other.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator

from nanobench.harness.cli.lifeline import end_with_parent, parent_env
from nanobench.harness.errors import MeasurementFailed

EVENT = "@@nanobench "


class LiveWorker:
    """One fresh worker process, kept alive across requests; every answer is a row.

    `start` waits for the session's `ready` row, `request` sends one request and waits for its
    `reply`, `close` asks for the final `result` (`stop` asks without waiting). Once the process is gone, each of them
    returns `{"status": ...}` naming how it ended.
    """

    def __init__(
        self,
        module: str,
        spec: dict,
        *,
        env: dict[str, str] | None = None,
        on_progress: Callable[[dict], None] | None = None,
        python: str = "",
    ) -> None:
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {}), **parent_env()},
            **own_group(),
        )
        self.ended: str | None = None
        self._events: queue.Queue = queue.Queue()
        self._stderr_tail: list[str] = []
        self._on_progress = on_progress
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._readers:
            t.start()
        self._send(spec)

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            if not line.startswith(EVENT):
                continue
            event = json.loads(line[len(EVENT) :])
            if event.get("event") == "progress":
                if self._on_progress is not None:
                    self._on_progress(event)
            else:
                self._events.put(event)
        self._events.put(None)  # stdout closed: the process is ending

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            if line.strip():
                self._stderr_tail.append(line.rstrip())
                del self._stderr_tail[:-40]

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the process is gone; the wait that follows says how it ended

    def _wait(self, kind: str, timeout: float) -> dict:
        if self.ended is not None:
            return {"status": self.ended}
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                self.ended = "timeout"
                return {"status": "timeout"}
            if event is None:
                self.ended = self._death_status()
                return {"status": self.ended}
            if event.get("event") == kind:
                return event["row"]

    def _death_status(self) -> str:
        self.proc.wait()
        for t in self._readers:
            t.join(timeout=5)
        code = self.proc.returncode
        if code < 0:
            return f"crashed: {signal.Signals(-code).name}"
        tail = self._stderr_tail
        last = next((ln for ln in reversed(tail) if ln.startswith("nanobench-worker:")), None)
        detail = (last or (tail[-1] if tail else f"exit {code}")).replace("nanobench-worker: ", "")
        # bounded, yet long enough for a target's error line whole: its spec, the user's
        # exception and the file:line that raised it (`forward_raised`)
        return f"error: {detail[:600]}"

    def answered(self) -> bool:
        """Whether an answer (or the end of the process) waits to be read: `start` would not block."""
        return self.ended is not None or not self._events.empty()

    def start(self, timeout: float) -> dict:
        """The session's `ready` row: what it built and measured before any request."""
        return self._wait("ready", timeout)

    def request(self, payload: dict, timeout: float) -> dict:
        if self.ended is None:
            self._send(payload)
        return self._wait("reply", timeout)

    def stop(self) -> None:
        """Ask for the final row without waiting for it: several workers finish side by side."""
        if self.ended is None and not self.proc.stdin.closed:
            self._send({"op": "stop"})
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def close(self, timeout: float) -> dict:
        """Ask for the final row (unless `stop` did), then make sure the process group is gone."""
        self.stop()
        row = self._wait("result", timeout)
        if self.ended is None:
            try:
                self.proc.wait(timeout=max(1.0, timeout))
            except subprocess.TimeoutExpired:
                self.kill()
            if self.proc.returncode:
                row = {**row, "status": self._death_status()}
            self.ended = str(row.get("status", "ok"))
        self.kill()
        return row

    def kill(self) -> None:
        kill_group(self.proc)


def start_side_by_side(spawns: list, timeout: float, threads: int = 0) -> Iterator[tuple]:
    """(key, ready row) for each (key, spawn) as it is ready, as many set up at once as the cores
    hold workers of `threads` threads (0: torch's default, every core, so one at a time).

    For workers whose set-up nothing reports (a mode's or system's later workers: compile
    seconds and first passes are the first worker's), and which are timed only once all are
    ready, so they need not take turns. A set-up runs the step on its threads, and OpenMP
    threads of two processes sharing cores wait on each other, so workers that would
    oversubscribe the cores take turns. A worker ready early frees its core for the next at
    once (a third `dynamic` worker sets up in half a second's time). `spawn()` returns a
    LiveWorker its caller has already registered, so an interrupt kills it.
    """
    cores = os.cpu_count() or 1
    at_once = max(1, cores // (threads or cores))
    pending, running = list(spawns), []
    while pending or running:
        while pending and len(running) < at_once:
            key, spawn = pending.pop(0)
            running.append((key, spawn(), time.monotonic() + timeout))
        key, worker, deadline = running.pop(first_answered(running))
        yield key, worker.start(max(0.0, deadline - time.monotonic()))


def first_answered(running: list[tuple], poll_s: float = 0.02) -> int:
    """The index of the first (key, worker, deadline) whose worker has answered or ended, or
    whose deadline has passed (its `start` then times out at once)."""
    while True:
        for i, (_, worker, deadline) in enumerate(running):
            if worker.answered() or time.monotonic() >= deadline:
                return i
        time.sleep(poll_s)


def run_fresh(
    module: str,
    spec: dict,
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    on_progress: Callable[[dict], None] | None = None,
    python: str = "",
) -> dict:
    """The spec, no requests, the final row: one measurement in one fresh process (under
    `python`, "" this interpreter)."""
    worker = LiveWorker(module, spec, env=env, on_progress=on_progress, python=python)
    try:
        return worker.close(timeout)
    except BaseException:
        worker.kill()
        raise


def own_group() -> dict:
    """Popen's arguments that put a worker in its own process group (`kill_group` kills it and
    whatever it spawned) inside this session.

    Not a session of its own: Linux's autogroup schedules each session as one group, and two
    workers setting up side by side, each its own session, ran their OpenMP steps about 3
    times slower (a warm `dynamic` set-up, spawn to ready, 18 s against 11.4 alone; the same
    pair in one session 11.4 s each). Python 3.10 has no `process_group` and keeps a session
    per worker.
    """
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"start_new_session": True}


def kill_group(proc: subprocess.Popen) -> None:
    """The worker and anything it spawned (Inductor's compile workers) go together."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def emit(event: dict) -> None:
    sys.stdout.write(EVENT + json.dumps(event, default=str) + "\n")
    sys.stdout.flush()


def pin_this_thread(core: int | None) -> None:
    """The calling thread (the one that times a window) on `core`, where a request names one.

    Linux's sched_setaffinity on pid 0 moves the calling thread only: the threads OpenMP
    started during set-up keep every core, so a worker of several threads still uses them.
    """
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core)})


def serve_main(open_session: Callable[[dict, Callable[[dict], None]], object]) -> None:
    """The worker side: the spec, the session's ready row, a reply per request, the final row.

    `open_session(spec, progress)` returns an object with a `ready` row, `serve(request)` and
    `finish()`. Any exception ends the worker with one line on stderr and exit 1.
    """
    end_with_parent()  # before the session spawns anything (Inductor's compile workers)
    spec = json.loads(sys.stdin.readline())
    started = time.perf_counter()
    try:
        session = open_session(spec, lambda event: emit({"event": "progress", **event}))
        emit({"event": "ready", "row": session.ready})
        for line in sys.stdin:
            request = json.loads(line)
            if request.get("op") == "stop":
                break
            pin_this_thread(request.get("pin"))
            emit({"event": "reply", "row": session.serve(request)})
        row = session.finish()
    except BaseException as e:
        traceback.print_exc()
        first = str(e).splitlines()[0] if str(e) else ""
        # A failed measurement names itself ("non-finite logits at step 3"); anything else is a
        # bug whose type is the first clue.
        line = first if isinstance(e, MeasurementFailed) else f"{type(e).__name__}: {first}"
        sys.stderr.write(f"nanobench-worker: {line}\n")
        sys.stderr.flush()
        sys.exit(1)
    row.setdefault("status", "ok")
    row["worker_s"] = round(time.perf_counter() - started, 3)
    emit({"event": "result", "row": row})
    exit_now()


def exit_now() -> None:
    """Exit 0 once the final row is out, running what exit runs (the atexit handlers: logging's
    flush, Inductor's worker pool) but not the interpreter's teardown: freeing torch's modules
    and tensors took a worker about a second, and a fleet's nine closing at once on two cores
    about 9 s of the run. `_run_exitfuncs` is private, and what `sys.exit` itself calls."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
