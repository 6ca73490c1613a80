"""`decode --vs-model / --vs-dtype` and `--try`: the sides of one interleaved run, and what changed.

What it is: `changes(rows, windows, level)`: per system both sides ran, its step time as after /
before with the interval paired by round (the same rounds the fleet interleaved, the run's
process pool lent as the stop rule read it), frames compiled as an exact count, compile
seconds (one warm-up a side: no interval) and tokens/s, prefill, the floor ratio, peak RSS
and token agreement beside them; and `member_name`, a row's name in the fleet.
What it is not: the fleet (`decode.bench.sweep_sides`) or the table (`reports.change`).
Invariant: a timing change pairs round r of "after hf-eager" with round r of "before hf-eager",
never two medians; a side's tokens are checked against its own side's reference.
"""

from __future__ import annotations

from nanobench.decode.rows import DecodeRow
from nanobench.harness.runs.change import (
    Change,
    count_change,
    timing_change,
    value_change,
    with_level,
)
from nanobench.harness.runs.saved import NO_SAMPLES, per_process
from nanobench.harness.runs.sides import Sides
from nanobench.harness.statistics.stats import each_level
from nanobench.harness.statistics.t_intervals import apart_interval
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Comparison, Window, intervals

ONE_WARMUP = "one warm-up a side: no interval"
VALUES = ("tokens_per_s", "prefill_ms", "ratio_vs_floor", "peak_rss_mb", "tokens_match")


def changes(rows: list[DecodeRow], windows: list[Window], level: float,
            sides: Sides) -> list[Change]:  # fmt: skip
    """Every system both sides of each pair ran (before and after; plain and a knob, named
    "cpp-wrapper engine-compiled"): its step time, frames, compile seconds and the rest."""
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    by = {(r.side, r.system): r for r in rows}
    found: list[Change] = []
    paired = [(b, o, r.system) for b, o in sides.pairs for r in rows
              if r.side == b and (o, r.system) in by]  # fmt: skip
    level = each_level(level, len(paired))  # every system's change holds together at level
    for base, other, system in paired:
        before, after = by[(base, system)], by[(other, system)]
        comparison = Comparison("change", Member(other, system), Member(base, system))
        interval = intervals(timed, [comparison], level)["change"]
        name = sides.change_name(other, system)
        step = timing_change(name, "step_ms", before.ms_per_step, after.ms_per_step, interval)
        found += system_changes(name, before, after, with_level(step, level), ONE_WARMUP)
    return found


def system_changes(name: str, before: DecodeRow, after: DecodeRow, step: Change,
                   one_warmup: str | None) -> list[Change]:  # fmt: skip
    """One system's changes, the base row against the other, in one run (`changes`, its step
    paired by round) or two saved (`saved_changes`, runs apart) alike: the step handed in,
    frames compiled, compile seconds where `one_warmup` says why they have no interval (a saved
    run's are not compared), and the rest beside them."""
    found = [step]
    if before.frames_compiled is not None or after.frames_compiled is not None:
        found.append(count_change(name, "builds", before.frames_compiled, after.frames_compiled))
    if one_warmup and (before.compile_s is not None or after.compile_s is not None):
        found.append(timing_change(name, "compile_s", before.compile_s, after.compile_s, None,
                                   one_warmup))  # fmt: skip
    for column in VALUES:
        found.append(value_change(name, column, getattr(before, column), getattr(after, column)))
    return found


def saved_changes(old, new) -> tuple[list[Change], dict]:
    """Per system both runs measured: step ms with its runs-apart interval, frames compiled,
    compile seconds, and the rest beside them; nothing is on one side only."""
    a = {r.system: r for r in old.rows}
    b = {r.system: r for r in new.rows}
    timed = old.windows and new.windows
    found: list[Change] = []
    for system in [s for s in a if s in b]:
        before, after = a[system], b[system]
        step = apart_interval(per_process(old.windows, system), per_process(new.windows, system))
        why = "" if timed else NO_SAMPLES
        step = timing_change(system, "step_ms", before.ms_per_step, after.ms_per_step,
                             step if timed else None, why)  # fmt: skip
        found += system_changes(system, before, after, step, None)
    return found, {}
