"""Every timed step of a run as a row of `<command>-samples.csv`, in long format.

What it is: `sample_rows(windows, label, side)` (each window's steps, one row each: the
member's name under `label`, its side first in a before-and-after run), `SAMPLE_COLUMNS` and
`sample_columns` (the header).
What it is not: the windows themselves (`workers.rounds.Window`) or reading the file back
(`runs.saved`).
Invariant: a row per timed step, the steady ones marked; milliseconds kept to 5 decimals.
"""

from __future__ import annotations

from collections.abc import Iterable

from nanobench.harness.workers.rounds import Window


def sample_rows(windows: Iterable[Window], label: str, side: bool = False) -> list[dict]:
    """Every timed step as a long-format row; `label` names the member's column (system,
    mode), and `side` adds its side's column first (a comparison's)."""
    return [
        {**({"side": s.side} if side else {}), label: s.system, "process": s.process,
         "round": s.round, "step": s.step, "ms": round(s.ms, 5), "built": s.built,
         "steady": s.steady}
        for w in windows
        for s in w.samples()
    ]  # fmt: skip


SAMPLE_COLUMNS = ("process", "round", "step", "ms", "built", "steady")


def sample_columns(label: str, side: bool = False) -> list[str]:
    """`sample_rows`' header."""
    return [*(["side"] if side else []), label, *SAMPLE_COLUMNS]
