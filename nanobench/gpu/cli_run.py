"""One `nanobench` command run by the GPU check in a child process, its `--json` read back.

What it is: `run_json(args, seconds_left)`: `python -m nanobench.cli ARGS --json --quiet` in the
checkout, with the parent's lifeline environment, cut at the seconds the check's budget has
left; the parsed document, or the reason there is none (the budget, or the child's last line).
What it is not: a check (`gpu.check` and `gpu.profile_check` word the rows).
Invariant: a child the budget stopped is said as such (`CUT`), never as a failure of the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nanobench.harness.cli.lifeline import parent_env

REPO = Path(__file__).resolve().parents[2]  # nanobench/gpu/cli_run.py -> the checkout
CUT = "cut by the budget"


def run_json(args: list[str], seconds_left: Callable[[], float]) -> dict | str:
    """The command's `--json` document, or why there is none: CUT, or its last line of stderr."""
    command = [sys.executable, "-m", "nanobench.cli", *args, "--json", "--quiet"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=max(1.0, seconds_left()),
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **parent_env()},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return CUT
    if not done.stdout.strip().startswith("{"):
        return ((done.stderr.strip().splitlines() or ["no output"])[-1])[:300]
    return json.loads(done.stdout)
