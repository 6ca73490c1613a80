"""One `nanobench compare` run: load both saved runs, find what changed, write and print it.

What it is: `run_compare(old, new, ...)`, the command's work once its arguments parsed: the two
runs loaded and checked to be of one command, their changes (`runs.compile_changes`, or
explain's counts and the breaks and value guards on one side only), the drift notes, the
gates the user named, then `compare.csv`, `compare.png` (compile), the table and the exit code.
What it is not: the reading of saved runs (`runs.py`, `harness.saved`) or the table
(`reports.change`).
Invariant: nothing is measured; every figure printed is a saved row's or sample's.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.compare.runs import (
    check_comparable,
    compile_changes,
    decode_changes,
    drift_notes,
    load,
)
from nanobench.harness.change import check_columns, no_more_gates, no_slower_gates
from nanobench.harness.console import stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.output import finish
from nanobench.harness.rows import as_dicts, columns
from nanobench.harness.validate import out_dir
from reports.change import COMPILE_PANELS, DECODE_PANELS, draw_compare, render_changes
from reports.compile import why
from reports.csvio import write_rows

PANELS = {"compile": COMPILE_PANELS, "decode": DECODE_PANELS}  # compare.png's, by command


def explain_changes(old, new) -> tuple[list, dict]:
    """explain's counts per member, and what is on one side only; members must match."""
    from nanobench.explain.before_after import Sides, changes, differences, member

    ours, theirs = [member(r) for r in old.rows], [member(r) for r in new.rows]
    if ours != theirs:
        raise BadInput(f"{old.where} explained {', '.join(ours)} and {new.where} "
                       f"{', '.join(theirs)}: compare needs the same depths or steps")  # fmt: skip
    sides = Sides(old.where, new.where, old.rows, new.rows)
    return changes(sides), differences(sides)


def run_compare(old_path: str, new_path: str, *, no_more, no_slower, margin: float, out: str,
                json_mode: bool, check: bool) -> int:  # fmt: skip
    """Both runs, their changes and notes, the gates named; the gates' exit code."""
    old, new = load(old_path), load(new_path)
    check_comparable(old, new)
    from nanobench.compile.vs import COUNTS
    from nanobench.explain.before_after import COLUMNS

    counts = {"compile": tuple(COUNTS), "explain": tuple(COLUMNS), "decode": ("builds",)}
    timings = {"compile": ("step_ms", "speedup"), "explain": (), "decode": ("step_ms",)}
    check_columns("--no-more", no_more, counts[old.command])
    check_columns("--no-slower", no_slower, timings[old.command])
    differences: dict = {}
    if old.command == "compile":
        found = compile_changes(old, new)
    elif old.command == "decode":
        found = decode_changes(old, new)
    else:
        found, differences = explain_changes(old, new)
    gates = no_more_gates(found, no_more) + no_slower_gates(found, no_slower, margin)
    notes = drift_notes(old, new)
    where = out_dir(out)
    from nanobench.harness.change import Change

    outputs = {"csv": str(write_rows(where / "compare.csv", as_dicts(found), columns(Change)))}
    title = f"{old.command}: {old.where} (old) vs {new.where} (new)"
    if old.command in PANELS:
        sided = [
            replace(r, side=s) for s, run in (("before", old), ("after", new)) for r in run.rows
        ]
        png = draw_compare(as_dicts(sided), where / "compare.png", title, PANELS[old.command])
        outputs["png"] = str(png)
    lines = [*notes, *difference_lines(differences), *sides_why(old, new)]
    return finish(
        "compare",
        as_dicts(found),
        gates,
        outputs,
        json_mode=json_mode,
        check=check,
        render=lambda: render_changes(stdout_console(), found, gates, title, lines),
        extra={"old": old.where, "new": new.where, "notes": notes, **differences},
    )


def sides_why(old, new) -> list[str]:
    """Each compile run's why (`reports.compile.why`), named old and new as the title names them."""
    if old.command != "compile":
        return []
    return [
        line
        for side, run in (("old", old), ("new", new))
        for r in run.rows
        for line in why(replace(r, side=side))
    ]


def difference_lines(differences: dict) -> list[str]:
    """What explain found on one side only: each break with its source line, each value guard."""
    lines = []
    for key, what in (("breaks_gone", "break gone"), ("breaks_new", "break new")):
        for b in differences.get(key, ()):
            lines.append(f"{what} ({b['member']}): {b['reason']} at {b['frame']}: {b['source']}")
    for key, what in (("value_guards_gone", "value guard gone"),
                      ("value_guards_new", "value guard new")):  # fmt: skip
        for g in differences.get(key, ()):
            lines.append(f"{what} ({g['member']}): {g['guard']}")
    return lines
