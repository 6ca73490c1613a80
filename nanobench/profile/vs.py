"""What changed between two profiles: each mode's timing, and each category's ms a step.

What it is: `category_changes(before, after)` (per mode both sides profiled, each category's ms a
step before and after: one profiled pass a side, so a ratio without an interval, told from a
run's other changes by its column, `by_category`, and the category that moved most named by
`moved_most`; `calls_changed` names the categories whose
events a step changed in number), `compare_changes(old, new)` (two saved runs,
for `compare`: compile's timing changes with their runs-apart intervals, then the categories read
back from each run's `profile-categories.csv`) and `why` (a saved row's words, under compare's
table).
What it is not: the timing changes' arithmetic (compile's, `compare.runs.compile_changes`) or
the table.
Invariant: a category change is read from both sides' profiled rows; a category one side lacks
is "not measured", never a zero.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nanobench.compile.vs import compile_timings
from nanobench.harness.runs.change import Change, timing_change
from nanobench.harness.runs.saved import read_rows
from nanobench.harness.runs.sides import Sides
from nanobench.profile.rows import CATEGORIES, CategoryRow

COUNTS = ("builds",)
NO_INTERVAL = "one profiled pass a side: no interval"
CATEGORY_COLUMNS = frozenset(f"{name} ms" for name in CATEGORIES)  # a category change's column


def category_changes(before: list[CategoryRow], after: list[CategoryRow]) -> list[Change]:
    """Per mode both sides profiled, each category's ms a step, after over before."""
    mine = {(c.mode, c.category): c.ms_per_step for c in before}
    theirs = {(c.mode, c.category): c.ms_per_step for c in after}
    both = {m for m, _ in mine} & {m for m, _ in theirs}
    keys = dict.fromkeys(k for k in [*mine, *theirs] if k[0] in both)
    return [timing_change(mode, f"{name} ms", mine.get((mode, name)), theirs.get((mode, name)),
                          None, NO_INTERVAL) for mode, name in keys]  # fmt: skip


def by_category(changes: list[Change]) -> tuple[list[Change], list[Change]]:
    """A run's changes split: compile's (timings, counts), then the categories' (by column)."""
    return ([c for c in changes if c.column not in CATEGORY_COLUMNS],
            [c for c in changes if c.column in CATEGORY_COLUMNS])  # fmt: skip


def moved_most(changes: list[Change]) -> list[str]:
    """Per mode, the category whose ms a step moved the most (of `category_changes`), in ms."""
    lines, by = [], {}
    for c in changes:
        # unattributed is what no event covered: not a place the step's time went
        if c.column != "unattributed ms" and c.before is not None and c.after is not None:
            by.setdefault(c.member, []).append(c)
    for mode, found in by.items():
        top = max(found, key=lambda c: abs(c.after - c.before))
        delta = top.after - top.before
        lines.append(f"{mode}: {top.column[:-3]} moved most, {top.before:.3f} -> "
                     f"{top.after:.3f} ms a step ({delta:+.3f})")  # fmt: skip
    return lines


def calls_changed(before: list[CategoryRow], after: list[CategoryRow]) -> list[str]:
    """Per mode both sides profiled, the categories whose events a step changed in number:
    the structure that moved (a break's second compiled region, its guards), which one profiled
    pass a side says exactly where its times are noisy."""
    mine = {(c.mode, c.category): c.calls_per_step for c in before}
    theirs = {(c.mode, c.category): c.calls_per_step for c in after}
    lines: dict[str, list[str]] = {}
    for (mode, name), calls in theirs.items():
        was = mine.get((mode, name))
        if was is not None and round(was, 2) != round(calls, 2) and name != "unattributed":
            lines.setdefault(mode, []).append(f"{name} {was:g} -> {calls:g}")
    return [f"{mode}: calls a step changed: {', '.join(found)}" for mode, found in lines.items()]


def side_categories(rows: list, side: str, named_by: str, sides: Sides) -> list[CategoryRow]:
    """A side's categories, each mode named as a change of `named_by` names it
    (`Sides.change_name`: its mode before and after, the knob and mode in a knob run)."""
    found = [c for r in rows if r.side == side for c in r.category_rows]
    return [replace(c, mode=sides.change_name(named_by, c.mode)) for c in found]


def paired(rows: list, sides: Sides) -> list[tuple[list[CategoryRow], list[CategoryRow]]]:
    """Per pair of sides compared, the base side's categories of the modes the other side
    profiled, and the other's."""
    found = []
    for base, other in sides.pairs:
        theirs = side_categories(rows, other, other, sides)
        modes = {c.mode for c in theirs}
        found.append(([c for c in side_categories(rows, base, other, sides) if c.mode in modes],
                      theirs))  # fmt: skip
    return found


def saved_categories(where: str) -> list[CategoryRow]:
    """A saved run's categories (its `profile-categories.csv`); none for a --json document."""
    path = Path(where) / "profile-categories.csv"
    return read_rows(path, CategoryRow) if path.is_file() else []


def compare_changes(old, new) -> tuple[list[Change], dict]:
    """Two saved profiles: compile's timing changes per mode, then each category's."""
    found = compile_timings(old, new)
    return found + category_changes(saved_categories(old.where), saved_categories(new.where)), {}


def why(row) -> list[str]:
    """A saved row's words, under compare's table."""
    return [f"{row.side}: {row.words}"] if row.words else []
