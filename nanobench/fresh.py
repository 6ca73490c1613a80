"""Fresh processes: run one measurement per spawned interpreter and keep whatever it returns.

What it is: `run_fresh(module, spec, timeout)`, which spawns `python -m module`, sends the spec
as JSON on stdin, relays the worker's progress events, and returns its result row; and
`worker_main(fn)`, the worker side of the same protocol (JSON lines on stdout).
What it is not: a scheduler. One worker at a time, in order; the caller decides what to run.
Invariant: a worker that crashes, is killed or passes its timeout still yields a row, with a
`status` of `crashed`, `timeout` or `error: <one line>`; nothing it measured before is lost.
Dynamo's counters and recompile budget are per code object per process, so a fresh process
per mode is the only sweep whose rows are independent of each other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable

from nanobench.errors import MeasurementFailed

EVENT = "@@nanobench "


def run_fresh(
    module: str,
    spec: dict,
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    on_progress: Callable[[dict], None] | None = None,
) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    result: dict = {}
    stderr_tail: list[str] = []

    def read_stdout() -> None:
        for line in proc.stdout:
            if not line.startswith(EVENT):
                continue
            event = json.loads(line[len(EVENT) :])
            if event.get("event") == "result":
                result.update(event["row"])
            elif on_progress is not None:
                on_progress(event)

    def read_stderr() -> None:
        for line in proc.stderr:
            if line.strip():
                stderr_tail.append(line.rstrip())
                del stderr_tail[:-40]

    readers = [threading.Thread(target=read_stdout), threading.Thread(target=read_stderr)]
    for t in readers:
        t.daemon = True
        t.start()
    proc.stdin.write(json.dumps(spec))
    proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return {**result, "status": "timeout"}
    except BaseException:
        kill_group(proc)
        raise
    finally:
        for t in readers:
            t.join(timeout=5)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return {**result, "status": f"crashed: {name}"}
    if proc.returncode != 0 or "status" not in result:
        last = next(
            (ln for ln in reversed(stderr_tail) if ln.startswith("nanobench-worker:")), None
        )
        detail = (last or (stderr_tail[-1] if stderr_tail else f"exit {proc.returncode}")).replace(
            "nanobench-worker: ", ""
        )
        return {**result, "status": f"error: {detail[:300]}"}
    return result


def kill_group(proc: subprocess.Popen) -> None:
    """The worker and anything it spawned (Inductor's compile workers) go together."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def emit(event: dict) -> None:
    sys.stdout.write(EVENT + json.dumps(event, default=str) + "\n")
    sys.stdout.flush()


def worker_main(fn: Callable[[dict, Callable[[dict], None]], dict]) -> None:
    """Read the spec, run fn(spec, progress), print the result row; one line on failure."""
    spec = json.loads(sys.stdin.read())
    started = time.perf_counter()
    try:
        row = fn(spec, lambda event: emit({"event": "progress", **event}))
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
