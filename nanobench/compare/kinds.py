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


def readable() -> tuple[str, ...]:
    """The commands whose saved runs compare reads, in the CLI's order: known without importing
    any kind (a bad path is said before torch loads)."""
    return tuple(c.name for c in COMMANDS if c.comparable)


def comparer(command: str) -> type:
    """The command's kind, imported now; a command compare does not read, refused by name."""
    if command not in readable():
        *most, last = readable()
        raise BadInput(f"compare reads {', '.join(most)} and {last} runs, not "
                       f"{article(command)} run")  # fmt: skip
    return next(c.kind() for c in COMMANDS if c.name == command)


def why_lines(kind: type, old, new) -> list[str]:
    """Each side's rows' lines, named old and new as the title names them (a --try run's row
    keeps its side: "old cpp-wrapper dynamic")."""
    return [line for side, run in (("old", old), ("new", new)) for r in run.rows
            for line in kind.why(replace(r, side=f"{side} {r.side}".strip()))]  # fmt: skip
