"""`compile --vs` and `--try`: the sides of one interleaved run, and what changed between them.

What it is: `changes(rows, windows, level)` (per mode, before and after: graphs, breaks and
break sites of one call, builds, recompiles, fell back, shapes as exact counts; step ms and speedup as after / before with
intervals paired by round, the same rounds the fleet interleaved; compile seconds, breakeven
and worth compiling beside them) and `vs_gates` (`--no-more`, `--no-slower`).
Each pair of sides compares the same way: before and after (--vs, --vs-path), or plain and a
knob (--try), where a knob's change is named "cpp-wrapper dynamic" and has no speedup change.
What it is not: the fleet (`compile.bench` runs both sides as members of one) or the table
(`reports.change`).
Invariant: every timing change is paired by round: round r of "after dynamic" against round r
of "before dynamic", both timed in process slot (r - 1) mod N + 1; a speedup's change is the
ratio of the two sides' speedups round by round, never of two medians.
"""

from __future__ import annotations

from nanobench.compile.rows import CompileRow
from nanobench.harness.runs.change import (
    Change,
    count_change,
    timing_change,
    value_change,
    with_level,
)
from nanobench.harness.statistics.stats import each_level, ratio_interval
from nanobench.harness.workers.member import AFTER, BEFORE, Member
from nanobench.harness.workers.rounds import Comparison, Window, intervals

# Change column -> the row's field, each count under the one name every command gives it
# (docs/measuring.md, "The counts"): graphs, breaks and break sites of one call, as `explain`
# counts them (eager `off` has none), then builds and recompiles over the run.
PER_CALL = {"graphs": "graphs_per_call", "breaks": "breaks_per_call", "break_sites": "break_sites"}
COUNTS = {
    **PER_CALL,
    "builds": "builds",
    "recompiles": "recompiles",
    "fell_back": "fell_back",
    "shapes": "shapes",
}


def count_columns(mode: str) -> dict[str, str]:
    """The counts a mode has: eager `off` traces no call, so it has no per-call counts."""
    return {c: f for c, f in COUNTS.items() if not (mode == "off" and c in PER_CALL)}


ONE_COMPILE = "one compile a side: no interval (nanobench startup times starts in runs)"


def changes(rows: list[CompileRow], windows: list[Window], level: float,
            pairs=((BEFORE, AFTER),)) -> list[Change]:  # fmt: skip
    """Every mode both sides of each pair ran: its counts, timings and verdicts, the base side
    (before, plain) against the other (after, a knob). A before-and-after change is named by
    its mode; a knob's by the knob and mode ("cpp-wrapper dynamic"), and it has no speedup
    change: both sides' speedups are over plain's off, so it is the step change inverted."""
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    by = {(r.side, r.mode): r for r in rows}
    compared = [(b, o, r.mode) for b, o in pairs for r in rows if r.side == b and (o, r.mode) in by]
    # Every mode's step change and every compiled mode's speedup change hold together at level.
    sped = [m for b, o, m in compared if m != "off" and o == AFTER]
    level = each_level(level, len(compared) + len(sped))
    found: list[Change] = []
    for base, other, mode in compared:
        before, after = by[(base, mode)], by[(other, mode)]
        name = mode if other == AFTER else str(Member(other, mode))
        for column, field in count_columns(mode).items():
            found.append(count_change(name, column, _count(before, field), _count(after, field)))
        found.append(step_change(name, Member(other, mode), Member(base, mode), before, after,
                                 timed, level))  # fmt: skip
        if mode != "off" and other == AFTER:
            found.append(speedup_change(mode, before, after, timed, level))
        for column in ("compile_s", "compile_warm_s"):
            b, a = getattr(before, column), getattr(after, column)
            found.append(timing_change(name, column, b, a, None, ONE_COMPILE))
        for column in ("breakeven_steps", "worth_compiling"):
            found.append(
                value_change(name, column, getattr(before, column), getattr(after, column))
            )
    return found


def step_change(name: str, a: Member, b: Member, before: CompileRow, after: CompileRow, timed,
                level: float) -> Change:  # fmt: skip
    """The other side's step time over the base's, paired by round (the run's process pool
    lent, as the stop rule read it)."""
    interval = intervals(timed, [Comparison("change", a, b)], level)["change"]
    return with_level(
        timing_change(name, "step_ms", before.step_ms, after.step_ms, interval), level
    )


def speedup_change(mode: str, before: CompileRow, after: CompileRow, timed, level: float) -> Change:
    """After's speedup over before's, round by round: (off_a / m_a) / (off_b / m_b) in each
    round all four windows ran, as one paired ratio of products."""
    names = [Member(s, m) for s in (AFTER, BEFORE) for m in ("off", mode)]
    medians: dict[tuple[Member, int], tuple[float, int]] = {}
    for w in timed:
        median = w.median_ms()
        if w.member in names and median:
            medians[(w.member, w.round)] = (median, w.process)
    rounds = sorted(r for r in {r for _, r in medians} if all((n, r) in medians for n in names))
    off_a, m_a, off_b, m_b = ([medians[(n, r)][0] for r in rounds] for n in names)
    num = [x * y for x, y in zip(off_a, m_b)]
    den = [x * y for x, y in zip(m_a, off_b)]
    slots = [str(medians[(names[0], r)][1]) for r in rounds]
    interval = ratio_interval(num, den, slots, level) if rounds else None
    found = timing_change(mode, "speedup", before.speedup, after.speedup, interval)
    return with_level(found, level)


def _count(row: CompileRow, field: str):
    # A row that failed after its first pass (a knob's changed output) keeps the counts it
    # measured; one that failed before has none.
    value = getattr(row, field)
    if value is None:
        return None
    return value if isinstance(value, bool) else int(value)  # fell back prints as yes / no
