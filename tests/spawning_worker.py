"""A stand-in worker for nanobench.harness.workers.fresh's fault tests: it spawns a grandchild, then hangs.

What it is: `python -m tests.spawning_worker`, run by `run_fresh`; it starts one sleeping
grandchild (in the worker's process group, as Inductor's compile workers are), reports both
pids as a progress event, and sleeps for the spec's `sleep_s`.
What it is not: a measurement; it exists so a test can watch a whole process group die.
Invariant: the progress event with both pids is sent before the sleep starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from nanobench.harness.workers.fresh import serve_main


class Hang:
    """A worker session whose opening spawns a grandchild and sleeps (serve_main's protocol)."""

    def __init__(self, spec: dict, progress: Callable[[dict], None]) -> None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        progress({"worker": os.getpid(), "grandchild": child.pid, "group": os.getpgid(0)})
        time.sleep(spec["sleep_s"])
        self.ready = {"slept_s": spec["sleep_s"]}

    def serve(self, request: dict) -> dict:
        return {}

    def finish(self) -> dict:
        return dict(self.ready)


if __name__ == "__main__":
    serve_main(Hang)
