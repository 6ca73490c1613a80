"""`startup --vs`: the two sides' starts in one run's order, and what changed between them.

What it is: `interleaved(order)` (each (mode, kind, run) cell as a before start and an after
start one right after the other, the side that goes first alternating run by run),
`paired_ratio(after, before)` (the geometric mean of after / before over paired runs with its t
interval over the runs' log ratios), `changes(rows)` (per mode and start kind, "dynamic warm":
ready, first-token, compile and phase seconds as after / before paired by run; the cache
answers, graphs and kernels built as exact counts) and `vs_gates` (`--no-more`, `--no-slower`).
What it is not: a start (`startup.run`, `startup.session`), the caches each side reads
(`startup.caches`) or the table (`reports.startup.render_changes`).
Invariant: a timing change pairs run i of before with run i of after, two starts taken one
right after the other; a pair where either start failed is left out, never filled in.
"""

from __future__ import annotations

import math
from dataclasses import replace

from nanobench.harness.change import (
    Change,
    count_change,
    no_more_gates,
    no_slower_gates,
    timing_change,
    with_level,
)
from nanobench.harness.gates import Gate
from nanobench.startup.phases import START_PHASES
from nanobench.startup.rows import StartRow, paired_t

SIDES = ("before", "after")
LEVEL = 0.95
# The seconds a change reads, in the table's order, and the counts (exact, no interval).
TIMINGS = ("ready_s", "first_token_s", "compile_s", *(f"{p}_s" for p in START_PHASES))
COUNTS = ("graphs", "fx_hits", "fx_misses", "aot_hits", "aot_misses", "kernels_built")


def interleaved(order: list[tuple[str, str, int]]) -> list[tuple[str, str, str, int]]:
    """(side, mode, kind, run): both sides of a cell back to back, before first in odd runs and
    after first in even ones, so a machine's drift over a cell lands on each side alike."""
    out = []
    for mode, kind, run in order:
        out += [(side, mode, kind, run) for side in (SIDES if run % 2 else SIDES[::-1])]
    return out


def paired_ratio(after: list[float], before: list[float], confidence: float = LEVEL):
    """exp(mean log(after / before)) and exp(its t interval over the pairs): one degree of
    freedom per pair beyond the first, so two runs give t = 12.7 and an honest, wide interval.

    Not `stats.ratio_interval`: its bootstrap needs 5 pairs (`MIN_ROUNDS`) and a start run has
    2 by default; the t interval over runs is startup's own rule (`saved s`, `--max-warm-s`).
    """
    from nanobench.harness.stats import Interval

    logs = [math.log(a / b) for a, b in zip(after, before)]
    mean, low, high = paired_t(logs, confidence)
    ends = [math.exp(v) if v == v else math.nan for v in (low, high)]
    return Interval(math.exp(mean), ends[0], ends[1], len(logs), 1, 1.0, len(logs) - 1.0,
                    "runs paired")  # fmt: skip


def timing(member: str, column: str, pairs: list[tuple[StartRow, StartRow]]) -> Change:
    """One timing's change: means a side, the ratio paired by run."""
    b = [getattr(x, column) for x, _ in pairs]
    a = [getattr(y, column) for _, y in pairs]
    before, after = _mean(b), _mean(a)
    if any(v is None or v <= 0 for v in (*b, *a)):
        # A phase at 0 s (a warm start builds nothing) has no ratio: the means say what changed.
        note = "a run at 0 s on one side: no ratio interval"
        return timing_change(member, column, before, after, None, note)
    interval = paired_ratio(a, b)
    note = "" if len(pairs) > 1 else "1 run a side: an interval needs --runs 2"
    return with_level(timing_change(member, column, before, after, interval, note), LEVEL)


def count(member: str, column: str, pairs: list[tuple[StartRow, StartRow]]) -> Change:
    """One count's change: exact when every run of a side agrees, else its largest, said so."""
    b = {getattr(x, column) for x, _ in pairs}
    a = {getattr(y, column) for _, y in pairs}
    found = count_change(member, column, _largest(b), _largest(a))
    if len(b) > 1 or len(a) > 1:
        note = f"runs differ: before {sorted(b)}, after {sorted(a)}; the largest compared"
        return replace(found, note=note)
    return found


def changes(rows: list[StartRow]) -> list[Change]:
    """Every mode and start kind both sides started: its timings and counts, after against
    before, over the runs where both sides' starts are ok."""
    ok = {(r.side, r.mode, r.kind, r.run): r for r in rows if r.status == "ok"}
    found: list[Change] = []
    for mode, kind in dict.fromkeys((r.mode, r.kind) for r in rows):
        runs = sorted({r.run for r in rows if (r.mode, r.kind) == (mode, kind)})
        pairs = [
            (ok[("before", mode, kind, run)], ok[("after", mode, kind, run)])
            for run in runs
            if ("before", mode, kind, run) in ok and ("after", mode, kind, run) in ok
        ]
        if not pairs:
            continue
        member = f"{mode} {kind}"
        found += [timing(member, c, pairs) for c in TIMINGS]
        found += [count(member, c, pairs) for c in COUNTS]
    return found


def vs_gates(no_more, no_slower, margin: float, found: list[Change]) -> list[Gate]:
    """The comparison's gates: only the columns the user named."""
    return no_more_gates(found, no_more) + no_slower_gates(found, no_slower, margin)


def _mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def _largest(values: set):
    known = [v for v in values if v is not None]
    return max(known) if known else None
