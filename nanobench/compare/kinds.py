"""What `compare` reads of each command: the command's own kind, from the one registry.

What it is: `comparer(command)` (the command's kind, `nanobench.commands.kinds`, where it
reads saved runs: its CSV, member column, row type, the counts and timings the gates may name,
its changes between two saved runs, compare.png's panels and what a row says; every other
command refused by name), `readable()` (the commands compare reads) and `why_lines` (each
side's rows' lines, named old and new).
What it is not: the reading of a saved run (`runs.load`) or the changes' arithmetic.
Invariant: importing this loads no torch and no command's rows: a kind is imported when compare
asks for it; no command is named here.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.commands import COMMANDS
from nanobench.harness.errors import BadInput
from reports.style import article


def readable() -> dict[str, type]:
    """The kinds of the commands whose saved runs compare reads, by name, in the CLI's order."""
    found = {c.name: c.kind() for c in COMMANDS if c.kind is not None}
    return {name: kind for name, kind in found.items() if kind.saved_changes is not None}


def comparer(command: str) -> type:
    kinds = readable()
    if command not in kinds:
        *most, last = kinds
        raise BadInput(f"compare reads {', '.join(most)} and {last} runs, not "
                       f"{article(command)} run")  # fmt: skip
    return kinds[command]


def why_lines(kind: type, old, new) -> list[str]:
    """Each side's rows' lines, named old and new as the title names them (a --try run's row
    keeps its side: "old cpp-wrapper dynamic")."""
    return [line for side, run in (("old", old), ("new", new)) for r in run.rows
            for line in kind.why(replace(r, side=f"{side} {r.side}".strip()))]  # fmt: skip
