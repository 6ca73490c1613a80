"""`--trace`: where each worker's TORCH_TRACE goes, and tlparse's report over it.

What it is: `trace_root(out)` (`<out>/trace`; the sweep gives each mode's worker
`TORCH_TRACE=<out>/trace/<mode>`), `tlparse_path()` (the `tlparse` executable of the optional
extra `nanobench[trace]`, or None) and `render_trace(mode_dir)`, which runs it and returns the
`index.html` a row links to.
What it is not: a log parser. tlparse reads dynamo's structured trace; nanobench only runs it.
Invariant: without tlparse the raw traces are still written and the row says where; a tlparse
that fails leaves the row's status alone (the measurement stands) and says so in the row.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def trace_root(out: Path) -> Path:
    return out / "trace"


def tlparse_path() -> str | None:
    """tlparse on PATH, or beside this interpreter (a venv that is not activated)."""
    beside = Path(sys.executable).parent / "tlparse"
    return shutil.which("tlparse") or (str(beside) if beside.is_file() else None)


def render_trace(mode_dir: Path, timeout_s: float = 300.0) -> dict:
    """{"trace_dir", "trace_index"}: the raw trace, and tlparse's index.html when it ran."""
    row = {"trace_dir": str(mode_dir), "trace_index": None}
    logs = sorted(mode_dir.glob("*.log")) if mode_dir.is_dir() else []
    tool = tlparse_path()
    if not logs or tool is None:
        return row
    report = mode_dir / "tlparse"
    try:
        done = subprocess.run(
            # One log per process; should a mode's directory hold more, the largest is its run.
            [tool, str(max(logs, key=lambda p: p.stat().st_size)), "-o", str(report)]
            + ["--overwrite", "--no-browser"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        row["trace_index"] = f"tlparse failed: {type(e).__name__}"
        return row
    index = report / "index.html"
    if done.returncode != 0 or not index.is_file():
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        row["trace_index"] = f"tlparse failed: {tail[:200]}"
        return row
    row["trace_index"] = str(index)
    return row
