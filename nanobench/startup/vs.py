"""`startup --vs`: the two sides' starts in one run's order, and what changed between them.

What it is: `interleaved(order, sides)` (each (mode, kind, run) cell as a before start and an after
start one right after the other, the side that goes first alternating run by run),
`ratio_intervals(members, column, level)` (each start's geometric mean of after / before over
paired runs with its t interval over the runs' log ratios, their variance pooled over the
starts, every mode and kind, whose variances agree: `t_intervals.pooled_t_intervals`) and
`changes(rows)` (per mode and start kind, "dynamic warm": ready and compile seconds and the
compile phases as after / before paired by run; the cache answers, graphs and kernels built as
exact counts).
What it is not: a start (`startup.run`, `startup.session`), the caches each side reads
(`startup.caches`), an interval's arithmetic (`harness.statistics.t_intervals`), the gates
(`harness.runs.change.vs_gates`) or the table (`reports.startup.render_changes`).
Invariant: a timing change pairs run i of before with run i of after, two starts taken one
right after the other; a pair where either start failed is left out, never filled in; a run's
timing changes hold together at 95% (`harness.statistics.stats.each_level`), so an A/A run says faster or
slower anywhere in it at most one time in twenty.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nanobench.harness.runs.change import Change, count_change, timing_change, with_level
from nanobench.harness.statistics.stats import each_level
from nanobench.startup.rows import StartRow

if TYPE_CHECKING:  # the statistics load numpy and scipy
    from nanobench.harness.statistics.stats import Interval

LEVEL = 0.95
# The seconds a change reads, in the table's order: ready, the ledger's compile seconds and the
# compile phases a version of a step moves. Both sides import the same torch in the same way, so
# the interpreter, import and bookkeeping phases would only widen every interval held together.
TIMINGS = ("ready_s", "compile_s", "trace_s", "aot_s", "lowering_s", "codegen_s", "build_s",
           "cache_load_s")  # fmt: skip
# and the counts (exact, no interval).
COUNTS = ("graphs", "fx_hits", "fx_misses", "aot_hits", "aot_misses", "kernels_built")


def interleaved(order: list[tuple[str, str, int]], sides: tuple[str, ...]
                ) -> list[tuple[str, str, str, int]]:  # fmt: skip
    """(side, mode, kind, run): every side of a cell back to back, in the sides' order in odd
    runs and the reverse in even ones, so a machine's drift over a cell lands on each side
    alike (a plain run's one side, "", once a cell)."""
    out = []
    for mode, kind, run in order:
        out += [(side, mode, kind, run) for side in (sides if run % 2 else sides[::-1])]
    return out


def ratio_intervals(members: dict[str, list], column: str, level: float) -> dict[str, Interval]:
    """Each start's exp(mean log(after / before)) over its paired runs and its t interval, the
    log ratios' variance pooled over the starts that agree (modes and kinds alike: a ratio has
    no unit), where a start's own two runs would leave it one degree of freedom (t = 12.7).

    Not `stats.ratio_interval`: its bootstrap needs 5 pairs (`MIN_ROUNDS`) and a start run has
    2 by default; the t interval over runs is startup's own rule (`saved s`, `--max-warm-s`).
    """
    from nanobench.harness.statistics.t_intervals import pooled_t_intervals

    ratios = {
        member: {y.run: getattr(y, column) / getattr(x, column) for x, y in pairs}
        for member, pairs in members.items()
        if ratioed(column, pairs)
    }
    return pooled_t_intervals(ratios, level, unit="starts", log=True)


def ratioed(column: str, pairs: list[tuple[StartRow, StartRow]]) -> bool:
    """Whether the timing has a ratio in every pair: a phase at 0 s (a warm start builds
    nothing) or a negative unattributed has none."""
    values = [getattr(r, column) for pair in pairs for r in pair]
    return all(v is not None and v > 0 for v in values)


def timing(member: str, column: str, pairs: list, interval: Interval | None, level) -> Change:
    """One timing's change: means a side, the ratio paired by run with its interval at `level`
    (`ratio_intervals`; None where a run has no ratio)."""
    before = _mean([getattr(x, column) for x, _ in pairs])
    after = _mean([getattr(y, column) for _, y in pairs])
    if interval is None:
        note = "a run at 0 s on one side: no ratio interval"
        return timing_change(member, column, before, after, None, note)
    note = "" if len(pairs) > 1 else "1 run a side: an interval needs --runs 2"
    return with_level(timing_change(member, column, before, after, interval, note), level)


def count(member: str, column: str, pairs: list[tuple[StartRow, StartRow]]) -> Change:
    """One count's change: exact when every run of a side agrees, else its largest, said so."""
    b = {getattr(x, column) for x, _ in pairs}
    a = {getattr(y, column) for _, y in pairs}
    found = count_change(member, column, _largest(b), _largest(a))
    if len(b) > 1 or len(a) > 1:
        note = f"runs differ: before {sorted(b)}, after {sorted(a)}; the largest compared"
        return replace(found, note=note)
    return found


def changes(rows: list[StartRow], windows, level, sides) -> list[Change]:
    """Each compared pair of sides (`harness.runs.sides.Sides`; a startup run has no windows:
    its level is its own, `LEVEL`), each change named as the sides name it ("dynamic warm";
    "cpp-wrapper dynamic warm")."""
    return [replace(c, member=sides.change_name(other, c.member))
            for base, other in sides.pairs for c in pair_changes(rows, (base, other))]  # fmt: skip


def pair_changes(rows: list[StartRow], pair: tuple[str, str]) -> list[Change]:
    """Every mode and start kind both sides of `pair` started: its timings and counts, the
    other against the base, over the runs where both sides' starts are ok."""
    members = paired(rows, pair)
    # Every timing with an interval, of every member, holds together: m of them at 1 - 0.05 / m.
    m = sum(ratioed(c, pairs) and len(pairs) > 1 for pairs in members.values() for c in TIMINGS)
    level = each_level(LEVEL, m)
    intervals = {c: ratio_intervals(members, c, level) for c in TIMINGS}
    found: list[Change] = []
    for member, pairs in members.items():
        found += [timing(member, c, pairs, intervals[c].get(member), level) for c in TIMINGS]
        found += [count(member, c, pairs) for c in COUNTS]
    return found


def paired(rows: list[StartRow], pair: tuple[str, str]
           ) -> dict[str, list[tuple[StartRow, StartRow]]]:  # fmt: skip
    """ "mode kind" -> its (base, other) rows, run by run, where both started ok."""
    base, other = pair
    ok = {(r.side, r.mode, r.kind, r.run): r for r in rows if r.status == "ok"}
    out = {}
    for mode, kind in dict.fromkeys((r.mode, r.kind) for r in rows):
        runs = sorted({r.run for r in rows if (r.mode, r.kind) == (mode, kind)})
        pairs = [(ok[(base, mode, kind, n)], ok[(other, mode, kind, n)]) for n in runs
                 if (base, mode, kind, n) in ok and (other, mode, kind, n) in ok]  # fmt: skip
        if pairs:
            out[f"{mode} {kind}"] = pairs
    return out


def _mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def _largest(values: set):
    known = [v for v in values if v is not None]
    return max(known) if known else None
