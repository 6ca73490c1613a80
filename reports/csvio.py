"""Atomic CSV output: rows reach disk whole or not at all.

What it is: `write_rows(path, rows, columns)`, writing to a temporary file in the same
directory and renaming it over the target, so a reader (or a killed parent) never sees half a file.
What it is not: a schema. Each report module owns its columns.
Invariant: after any call returns or is interrupted, `path` is either absent, the previous
complete file, or the new complete file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd


def cell(value):
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


def write_rows(path: Path, rows: list[dict], columns: list[str]) -> Path:
    extra = [k for r in rows for k in r if k not in columns]
    cols = columns + sorted(set(extra), key=extra.index)
    # object dtype keeps an int column with a missing cell as ints, not 8.0
    frame = pd.DataFrame(
        [{k: cell(r.get(k)) for k in cols} for r in rows], columns=cols, dtype=object
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            frame.to_csv(f, index=False)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the results from other users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_figure(fig, path: Path) -> Path:
    """Same promise for a diagram: render to a temporary file, then rename; the figure is closed
    either way, so a process drawing many (a sweep) holds none of them afterwards."""
    import matplotlib.pyplot as plt  # the caller has pyplot loaded already; Agg is its business

    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path
