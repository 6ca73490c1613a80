"""A stand-in member for nanobench.harness.workers.fleet's tests: windows of a fixed time, no torch.

What it is: `python -m tests.fleet_worker`, handed {"ms": float, "fail_at": int, "at_exit": path}
(a file its atexit handler writes); its ready row
names its pid, each window request is answered with three steps of `ms` (stamped with the
round), and its final row counts the windows it served and names the cores its windows ran on. A window at round `fail_at` ends the
process, as a crashed worker would.
What it is not: a measurement; it exists so a test can watch the fleet deal, close and kill.
Invariant: a window's steps are the spec's `ms`, so a test knows every member's ratio.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable

from nanobench.harness.workers.fresh import serve_main


class Fixed:
    def __init__(self, spec: dict, progress: Callable[[dict], None]) -> None:
        self.spec, self.served = spec, 0
        if spec.get("at_exit"):
            atexit.register(lambda: open(spec["at_exit"], "w").write("ran"))
        self.ready = {"status": "ok", "pid": os.getpid()}

    def serve(self, request: dict) -> dict:
        if request["round"] == self.spec.get("fail_at"):
            os._exit(3)
        self.served += 1
        self.cores = sorted(os.sched_getaffinity(0))  # the timing thread's, as a window sees it
        ms = self.spec["ms"]
        return {"round": request["round"], "status": "ok", "ms": [ms] * 3, "built": [0] * 3,
                "steady": [True] * 3}  # fmt: skip

    def finish(self) -> dict:
        return {"status": "ok", "served": self.served, "cores": getattr(self, "cores", None)}


if __name__ == "__main__":
    serve_main(Fixed)
