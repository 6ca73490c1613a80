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

from dataclasses import replace

from nanobench.compile.rows import CompileRow
from nanobench.harness.runs.change import (
    Change,
    count_change,
    timing_change,
    value_change,
    with_level,
)
from nanobench.harness.runs.saved import NO_SAMPLES, per_process, speedups
from nanobench.harness.runs.sides import Sides
from nanobench.harness.statistics.stats import each_level, ratio_interval
from nanobench.harness.statistics.t_intervals import apart_interval
from nanobench.harness.step.knobs import PLAIN
from nanobench.harness.step.output_check import output_change
from nanobench.harness.workers.member import Member
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


def sped(sides: Sides, other: str, mode: str) -> bool:
    """A compiled mode's speedup changes where the other side times its own off: a side that
    borrows its base's off (a knob's) has the step change inverted, not a speedup change."""
    return mode != "off" and "off" not in sides[other].borrows


def changes(rows: list[CompileRow], windows: list[Window], level: float,
            sides: Sides) -> list[Change]:  # fmt: skip
    """Every mode both sides of each pair ran: its counts, timings and verdicts, the base side
    (before, plain) against the other (after, a knob), named as `Sides.change_name` names it
    ("dynamic"; "cpp-wrapper dynamic")."""
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    by = {(r.side, r.mode): r for r in rows}
    paired = [(b, o, r.mode) for b, o in sides.pairs for r in rows
              if r.side == b and (o, r.mode) in by]  # fmt: skip
    # Every mode's step change and every compiled mode's speedup change hold together at level.
    speedups = [m for b, o, m in paired if sped(sides, o, m)]
    level = each_level(level, len(paired) + len(speedups))
    found: list[Change] = []
    for base, other, mode in paired:
        before, after = by[(base, mode)], by[(other, mode)]
        name = sides.change_name(other, mode)
        timings = [step_change(name, Member(other, mode), Member(base, mode), before, after,
                               timed, level)]  # fmt: skip
        if sped(sides, other, mode):
            timings.append(speedup_change(Member(base, mode), Member(other, mode), name, before,
                                          after, timed, level))  # fmt: skip
        found += mode_changes(name, before, after, timings, ONE_COMPILE)
    return found


def mode_changes(name: str, before: CompileRow, after: CompileRow, timings: list[Change],
                 one_compile: str) -> list[Change]:  # fmt: skip
    """One mode's changes, the base row against the other, in one run (`changes`, its timings
    paired by round) or two saved (`saved_changes`, runs apart) alike: the counts exact, the
    timings handed in, compile seconds (one a side: no interval), breakeven and the verdict."""
    found = [count_change(name, column, _count(before, field), _count(after, field))
             for column, field in count_columns(before.mode).items()]  # fmt: skip
    found += timings
    for column in ("compile_s", "compile_warm_s"):
        b, a = getattr(before, column), getattr(after, column)
        found.append(timing_change(name, column, b, a, None, one_compile))
    for column in ("breakeven_steps", "worth_compiling"):
        found.append(value_change(name, column, getattr(before, column), getattr(after, column)))
    return found


def step_change(name: str, a: Member, b: Member, before: CompileRow, after: CompileRow, timed,
                level: float) -> Change:  # fmt: skip
    """The other side's step time over the base's, paired by round (the run's process pool
    lent, as the stop rule read it)."""
    interval = intervals(timed, [Comparison("change", a, b)], level)["change"]
    return with_level(
        timing_change(name, "step_ms", before.step_ms, after.step_ms, interval), level
    )


def speedup_change(base: Member, other: Member, name: str, before: CompileRow, after: CompileRow,
                   timed, level: float) -> Change:  # fmt: skip
    """The other side's speedup over the base's, round by round: (off_a / m_a) / (off_b / m_b)
    in each round all four windows ran, as one paired ratio of products."""
    names = [Member(s, m) for s in (other.side, base.side) for m in ("off", base.name)]
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
    found = timing_change(name, "speedup", before.speedup, after.speedup, interval)
    return with_level(found, level)


def _count(row: CompileRow, field: str):
    # A row that failed after its first pass (a knob's changed output) keeps the counts it
    # measured; one that failed before has none.
    value = getattr(row, field)
    if value is None:
        return None
    return value if isinstance(value, bool) else int(value)  # fell back prints as yes / no


# -- two saved runs, taken apart (`compare`) ----------------------------------------------


def saved_timings(old, new, mode: str, before, after, off: str = "off"
            ) -> list[Change]:  # fmt: skip
    """A mode's step ms and (compiled) speedup over `off` (a --try run's: plain's), with their
    runs-apart intervals; `mode` is the member's name in the samples."""
    timed = old.windows and new.windows
    why = "" if timed else NO_SAMPLES
    step = apart_interval(per_process(old.windows, mode), per_process(new.windows, mode))
    found = [timing_change(mode, "step_ms", before.step_ms, after.step_ms,
                           step if timed else None, why)]  # fmt: skip
    if before.mode != "off":
        gain = apart_interval(speedups(old.windows, mode, off), speedups(new.windows, mode, off))
        found.append(timing_change(mode, "speedup", before.speedup, after.speedup,
                                   gain if timed else None, why))  # fmt: skip
    return found


def tried_names(old, new) -> tuple[dict, dict, list[list[Window]], str]:
    """Each run's rows by member name, its windows so named, and off's name: a --try run's
    members are "plain dynamic", "cpp-wrapper dynamic"; a plain run beside one is its plain."""
    tried = any(r.side for r in (*old.rows, *new.rows))
    if not tried:
        return {r.mode: r for r in old.rows}, {r.mode: r for r in new.rows}, [
            old.windows, new.windows], "off"  # fmt: skip
    named, windows = [], []
    for run in (old, new):
        own = any(r.side for r in run.rows)  # a --try run's rows keep their sides
        named.append({f"{r.side or PLAIN} {r.mode}": r for r in run.rows})
        windows.append(run.windows if own else [replace(w, system=f"{PLAIN} {w.system}")
                                                  for w in run.windows])  # fmt: skip
    return named[0], named[1], windows, f"{PLAIN} off"


def compile_timings(old, new) -> list[Change]:
    """Per mode both runs timed: step ms and speedup (a profile's rows carry both too)."""
    a, b = {r.mode: r for r in old.rows}, {r.mode: r for r in new.rows}
    return [c for mode in a if mode in b for c in saved_timings(old, new, mode, a[mode], b[mode])]


def saved_changes(old, new) -> tuple[list[Change], dict]:
    """Two saved runs (`compare.runs.SavedRun`), per mode both measured: `mode_changes` with the
    timings' runs-apart intervals; nothing is on one side only."""
    a, b, (old_w, new_w), off = tried_names(old, new)
    old, new = replace(old, windows=old_w), replace(new, windows=new_w)
    found: list[Change] = []
    for mode in [m for m in a if m in b]:
        before, after = a[mode], b[mode]
        timings = saved_timings(old, new, mode, before, after, off)
        found += mode_changes(mode, before, after, timings, "one compile a run")
    return found, {}


def held_to_base(rows: list[CompileRow], sides: Sides, dtype: str) -> list[CompileRow]:
    """Each row of a side that runs the same step as another (a knob's, plain; another
    environment's, before) with its first pass's output held against that side's in the same
    mode: beyond the dtype's tolerance, the row fails saying so (`output_check`)."""
    by = {(r.side, r.mode): r for r in rows}
    out = []
    for r in rows:
        held_to = sides[r.side].held_to
        base = by.get((held_to, r.mode)) if held_to else None
        said = ""
        if r.status == "ok" and base is not None and base.status == "ok":
            said = output_change(base.outputs, r.outputs, dtype, held_to)
        out.append(replace(r, status=f"{said} against {held_to} {r.mode}") if said else r)
    return out
