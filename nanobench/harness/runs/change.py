"""Before and after: what changed between two versions of a decode step, column by column.

What it is: `Change` (one column of one member, before and after: a count's difference, a
timing's after / before ratio with its interval and verdict), `count_change`, `timing_change`,
`value_change` and the gates a comparison can be held to in CI:
`no_more_gates` (`--no-more graphs,breaks`) and `no_slower_gates` (`--no-slower step_ms`), with
`check_columns` refusing a column a command does not measure.
What it is not: a measurement (`--vs` runs both sides through one fleet, `compare` reads two
saved runs), an interval's arithmetic (`stats`, `t_intervals`: two runs taken apart are
`t_intervals.apart_interval`) or a table (`reports.change`).
Invariant: a count's change is exact (dynamo's counters, no interval); a timing's verdict comes
from its interval alone: "faster" or "slower" only when the interval excludes 1, else "can't
tell"; a timing with no interval is never faster or slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nanobench.harness.errors import BadInput
from nanobench.harness.runs.gates import Gate, ratio_gate

if TYPE_CHECKING:  # the statistics load numpy, which the CLI must not pay for at start
    from nanobench.harness.statistics.stats import Interval

FASTER, SLOWER, CANT_TELL = "faster", "slower", "can't tell"
# A side with no figure at all (warm seconds over one process): nothing measured to tell about.
NOT_MEASURED = "not measured"
FEWER, MORE, SAME, CHANGED = "fewer", "more", "same", "changed"
# Timings where a larger after / before ratio is better: a speedup; a step time is the other way.
HIGHER_IS_BETTER = ("speedup",)


@dataclass(frozen=True)
class Change:
    """One column of one member (a mode, a system, a depth), before and after.

    `change` is after - before for a count, after / before for a timing (with `low`, `high` its
    interval at `level`); `verdict` is fewer / more / same, faster / slower / can't tell, or
    changed / same for a value, and "not measured" where a side has no figure at all (can't
    tell is for what was measured and stayed undecided); `note` says why a timing has no
    interval.
    """

    member: str
    column: str
    kind: str  # count | timing | value
    before: float | int | str | None
    after: float | int | str | None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    level: float | None = None
    df: float | None = None
    verdict: str = SAME
    note: str = ""
    rounds: int | None = None  # the rounds (or processes, runs apart) the interval came from
    variance: str = ""  # where the interval's variance came from (`Interval.variance_from`)


def count_change(member: str, column: str, before, after) -> Change:
    """A count (graphs, breaks, builds; fell back as 0/1): after - before, fewer / more / same."""
    if before is None or after is None:
        return Change(member, column, "count", before, after, None, verdict=NOT_MEASURED,
                      note="not measured on both sides")  # fmt: skip
    diff = int(after) - int(before)
    verdict = FEWER if diff < 0 else MORE if diff > 0 else SAME
    return Change(member, column, "count", before, after, diff, verdict=verdict)


def timing_change(
    member: str, column: str, before, after, interval: Interval | None, note: str = ""
) -> Change:
    """A timing: after / before with its interval; faster / slower only when it excludes 1."""
    ratio = after / before if before and after is not None else None
    if before == after == 0:  # nothing on either side (off's compile seconds): nothing changed
        return Change(member, column, "timing", before, after, verdict=SAME)
    if interval is None and (before is None or after is None):
        return Change(member, column, "timing", before, after, verdict=NOT_MEASURED,
                      note="not measured on both sides")  # fmt: skip
    if interval is None or not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        why = note or (f"{interval.rounds} paired rounds: no interval yet" if interval else "")
        return Change(member, column, "timing", before, after, _round(ratio), verdict=CANT_TELL,
                      note=why or "no interval", rounds=interval.rounds if interval else None)  # fmt: skip
    higher = column in HIGHER_IS_BETTER
    if interval.low > 1:
        verdict = FASTER if higher else SLOWER
    elif interval.high < 1:
        verdict = SLOWER if higher else FASTER
    else:
        verdict = CANT_TELL
    df = interval.df if math.isfinite(interval.df) else None
    return Change(
        member=member, column=column, kind="timing", before=before, after=after,
        change=_round(interval.estimate), low=_round(interval.low), high=_round(interval.high),
        df=_round(df), verdict=verdict, note=note, rounds=interval.rounds,
        variance=interval.variance_from,
    )  # fmt: skip


def value_change(member: str, column: str, before, after) -> Change:
    """A verdict or a kind (worth compiling, guard kind): the same or changed, nothing measured."""
    return Change(
        member, column, "value", before, after, verdict=SAME if before == after else CHANGED
    )


def with_level(change: Change, level: float) -> Change:
    """The change with the level its interval was read at (a look's, `rounds.look_confidence`)."""
    return replace(change, level=round(level, 4)) if change.low is not None else change


def check_sides(
    vs: str, vs_path: str | None, target: str, gated: bool = False, tried: bool | None = None
) -> None:
    """--vs (a target's before side), --vs-path (the engine's) and a comparison's gates
    (`gated`: --no-more or --no-slower given; `tried`: --try's knobs, sides too, in a command
    that has --try), checked
    against each other, one line each."""
    if vs and vs_path:
        raise BadInput("--vs and --vs-path: give one before side, a target or a --path")
    if vs and not target:
        raise BadInput(
            f"--vs {vs}: the before side of a --target; give --target for the after side "
            "(the engine after a target before is not supported; --vs-path compares the "
            "engine's paths)"
        )
    if vs_path and target:
        raise BadInput(f"--vs-path {vs_path}: the engine's before side, not a target's: give "
                       "--vs SPEC for a target")  # fmt: skip
    if gated and not (vs or vs_path or tried):
        raise BadInput(
            "--no-more and --no-slower compare two sides: give --vs or --vs-path"
            + (" or --try" if tried is not None else "")
        )


def check_columns(option: str, asked, measured: tuple[str, ...]) -> None:
    """One line naming a column this command does not measure, and those it does."""
    for column in asked or ():
        if column not in measured:
            raise BadInput(f"{option} {column}: this command measures {', '.join(measured)}")


def no_more_gates(changes: list[Change], columns) -> list[Gate]:
    """One gate per member and named count: fail when the after side has more."""
    found = []
    for c in changes:
        if c.kind != "count" or c.column not in (columns or ()):
            continue
        name = f"no_more[{c.column} {c.member}]"
        if c.change is None:
            found.append(Gate(name, False, f"{c.column}: {c.note}"))
            continue
        detail = f"{c.column} {c.before} -> {c.after} ({c.verdict})"
        found.append(Gate(name, c.change <= 0, detail))
    return found


def no_slower_gates(changes: list[Change], columns, margin: float) -> list[Gate]:
    """One gate per member and named timing: pass once the after side is known no more than
    `margin` slower, fail once it is known more than that slower, else can't tell (exit 3)."""
    found = []
    for c in changes:
        if c.kind != "timing" or c.column not in (columns or ()):
            continue
        interval = _slowdown(c)
        what = f"{c.member} {c.column}: after's slowdown against before"
        found.append(ratio_gate(f"no_slower[{c.column} {c.member}]", what, interval, 1 + margin))
    return found


def vs_gates(no_more, no_slower, margin: float, found: list[Change]) -> list[Gate]:
    """A comparison's gates: only the columns its user named (`--no-more`, `--no-slower`)."""
    return no_more_gates(found, no_more) + no_slower_gates(found, no_slower, margin)


def comparison_gates(failed: dict[str, str], spec, found: list[Change]) -> list[Gate]:
    """A before-and-after run's gates: each member that failed (`failed[name]`, its status:
    a change with a side missing measured nothing) and the columns its user named."""
    measured = [Gate(f"measured[{name}]", False, status) for name, status in failed.items()]
    return measured + vs_gates(spec.no_more, spec.no_slower, spec.margin, found)


def _slowdown(c: Change) -> Interval:
    """The change as a slowdown (> 1 is slower): after / before of a step time, its inverse for
    a speedup."""
    from nanobench.harness.statistics.stats import Interval

    est, low, high = c.change, c.low, c.high
    if c.column in HIGHER_IS_BETTER:
        est, low, high = (1 / v if v else None for v in (est, high, low))
    return Interval.from_ends(estimate=est, low=low, high=high, rounds=c.rounds)


def _round(value):
    return None if value is None or value != value else round(float(value), 4)
