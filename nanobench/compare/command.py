"""`nanobench compare OLD NEW`: two saved runs of one command, before and after.

What it is: the command: two saved runs (output directories or `--json` documents) and the
comparison's gates and output options, handed to `compare/run.py`.
What it is not: the reading of saved runs or the changes (`compare/runs.py`), or `--vs` (both
sides in one interleaved run, which this is no substitute for, and says so).
Invariant: importing this loads no torch; nothing is measured, only read.
"""

from __future__ import annotations

import typer

from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command


def compare_command(
    old: o.OldRun,
    new: o.NewRun,
    no_more: o.NoMore = None,
    no_slower: o.NoSlower = None,
    margin: o.Margin = 0.05,
    out: o.Out = "nanobench-out",
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Compare two saved runs of compile, explain, decode or profile: before, after and the change per column.

    Counts (graphs, breaks, builds, fell back) change exactly; step ms and speedup change by
    new / old with an interval from each run's per-process means, and the table says that two
    runs taken apart carry the machine's drift, naming every env fact that differs. For a
    paired answer, run both sides at once: compile --vs.

    Example: nanobench compare old-out new-out
    Example: nanobench compare old-out new-out --check --no-more graphs,breaks --no-slower step_ms
    Example: nanobench compare old.json new.json --json
    """
    with run_command(quiet):
        from nanobench.compare.run import run_compare

        code = run_compare(
            old, new, no_more=no_more, no_slower=no_slower, margin=margin, out=out,
            json_mode=json_mode, check=check,
        )  # fmt: skip
    raise typer.Exit(code)
