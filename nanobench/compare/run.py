"""One `nanobench compare` run: load both saved runs, find what changed, write and print it.

What it is: `run_compare(old, new, ...)`, the command's work once its arguments parsed: the two
runs loaded and checked to be of one command, their changes and what is on one side only (the
command's own kind, `kinds.comparer`), the drift notes, the gates the user named, then
`compare.csv`, `compare.png` (compile, decode), the table and the exit code.
What it is not: the reading of saved runs (`runs.py`, `harness.runs.saved`) or the table
(`reports.change`).
Invariant: nothing is measured; every figure printed is a saved row's or sample's.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.compare.kinds import comparer, why_lines
from nanobench.compare.runs import check_comparable, drift_notes, load
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.change import check_columns, no_more_gates, no_slower_gates
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts, columns
from reports.change import draw_compare, render_changes
from reports.csvio import write_rows


def run_compare(old_path: str, new_path: str, *, no_more, no_slower, margin: float, out: str,
                json_mode: bool, check: bool) -> int:  # fmt: skip
    """Both runs, their changes and notes, the gates named; the gates' exit code."""
    old, new = load(old_path), load(new_path)
    check_comparable(old, new)
    kind = comparer(old.command)
    check_columns("--no-more", no_more, kind.counts)
    check_columns("--no-slower", no_slower, kind.timings)
    found, differences = kind.saved_changes(old, new)
    gates = no_more_gates(found, no_more) + no_slower_gates(found, no_slower, margin)
    notes = drift_notes(old, new)
    where = out_dir(out)
    from nanobench.harness.runs.change import Change

    outputs = {"csv": str(write_rows(where / "compare.csv", as_dicts(found), columns(Change)))}
    title = f"{old.command}: {old.where} (old) vs {new.where} (new)"
    if kind.panels is not None:
        both = [
            replace(r, side=s) for s, run in (("before", old), ("after", new)) for r in run.rows
        ]
        png = draw_compare(as_dicts(both), where / "compare.png", title, kind.panels)
        outputs["png"] = str(png)
    lines = [*notes, *difference_lines(differences), *why_lines(kind, old, new)]
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


def difference_lines(differences: dict) -> list[str]:
    """What one side has and the other lacks: each break explain found with its source line, each
    value guard; a member (a race's configuration) one run has and the other lacks."""
    lines = []
    for key, what in (("breaks_gone", "break gone"), ("breaks_new", "break new")):
        for b in differences.get(key, ()):
            lines.append(f"{what} ({b['member']}): {b['reason']} at {b['frame']}: {b['source']}")
    for key, what in (("value_guards_gone", "value guard gone"),
                      ("value_guards_new", "value guard new")):  # fmt: skip
        for g in differences.get(key, ()):
            lines.append(f"{what} ({g['member']}): {g['guard']}")
    for key, what in (("only_old", "only in old"), ("only_new", "only in new")):
        lines += [f"{what}: {name}" for name in differences.get(key, ())]
    return lines
