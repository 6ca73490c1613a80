"""`nanobench history`: list, show and clear the runs this machine's intervals borrow from.

What it is: the command: no argument lists every key (`--target` only a target's); a KEY shows
its runs; `--of OUT` says which earlier runs a saved run read and whether each interval was
lent; `--clear` removes a KEY's, a `--target`'s or (`--all`) every key's runs.
What it is not: the listing (`listing.py`), the tables (`reports/history.py`) or the files
(`harness.runs.history_store`).
Invariant: importing this loads no torch; nothing is measured; `--clear` removes only what was
selected, and a selection that is missing or ambiguous is one line and exit 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import typer

from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command
from nanobench.harness.errors import BadInput


def history_command(
    key: o.HistoryKey = None,
    of: o.HistoryOf = None,
    target: o.HistoryTarget = None,
    clear: o.ClearOpt = False,
    every: o.AllOpt = False,
    json_mode: o.JsonOpt = False,
) -> None:
    """The earlier runs on this machine that compile's and decode's intervals borrow from.

    A key is one comparison (a mode's speedup, a system's ratio) of one code (the target's
    sources, the model, nanobench's and the engine's) under one set of settings on this machine.

    Example: nanobench history
    Example: nanobench history 3f2a9c
    Example: nanobench history --of nanobench-out
    Example: nanobench history --target step.py:factory --clear
    """
    with run_command(quiet=True):
        from nanobench.harness.runs.history_store import RunHistory

        validate(key, of, target, clear, every)
        store = RunHistory()
        doc = run_history(store, key, of, target, clear, every, json_mode)
        if json_mode:
            sys.stdout.write(json.dumps(doc, default=str) + "\n")
    raise typer.Exit(0)


def validate(key, of, target, clear: bool, every: bool) -> None:
    """The options that go together, before anything is read."""
    if every and not clear:
        raise BadInput("--all goes with --clear: nanobench history --clear --all")
    if clear and not (key or target or every):
        raise BadInput("--clear needs what to clear: a KEY, --target SPEC or --all")
    if of and (key or target or clear):
        raise BadInput("--of reads a saved run: give it alone")
    if key and target:
        raise BadInput("a KEY names one key already: give KEY or --target, not both")


def run_history(store, key, of, target, clear: bool, every: bool, json_mode: bool) -> dict:
    """Do what the options ask; print the table unless --json; the JSON document."""
    from nanobench.harness.cli.console import stdout_console
    from nanobench.history import listing
    from reports.history import render_borrowed, render_keys, render_runs

    console = stdout_console()
    if of:
        used, rows = listing.borrowed_rows(of)
        ratios = f"{used.recorded} ratio{'s' if used.recorded != 1 else ''}"
        said = (f"this run recorded {ratios} in {used.root}" if not used.not_recorded
                else f"this run was not recorded: {used.not_recorded}")  # fmt: skip
        if not json_mode:
            render_borrowed(console, rows, f"history read by the run in {of}", said)
        return {"of": of, "recorded": used.recorded, "not_recorded": used.not_recorded,
                "read": [asdict(r) for r in rows]}  # fmt: skip
    if clear:
        from reports.style import counted

        keys = listing.select(store, key, target)
        runs = listing.clear(store, keys)
        if not json_mode:
            said = f"cleared {counted(len(keys), 'key')} ({counted(runs, 'run')})"
            console.print(f"{said} from {store.root}", markup=False)
        return {"cleared": keys, "runs": runs, "root": str(store.root)}
    if key:
        found = listing.find_key(store, key)
        rows = listing.run_rows(store, found)
        if not json_mode:
            render_runs(console, rows, f"history key {found} in {store.root}")
        return {"key": found, "runs": [asdict(r) for r in rows]}
    rows = listing.key_rows(store, target)
    if not json_mode:
        render_keys(console, rows, f"history in {store.root}")
    return {"root": str(store.root), "keys": [asdict(r) for r in rows]}
