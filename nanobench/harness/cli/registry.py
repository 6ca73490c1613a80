"""A command as one entry: its name, its function, how the sweep runs it and its kind.

What it is: `Command` (the frozen record each command's `command.py` declares as `COMMAND`:
its name, the Typer function, hidden aliases, the page that explains it, how a sweep runs its
points, `TIMED` or `COUNTED`, and `kind`, a function that imports its kind when asked: the
`RunKind` of a measured command, with its estimate, export and the reading of its saved runs
for `compare`; explain's saved-run kind) and whether `compare` reads its saved runs, known
without importing the kind. `nanobench/commands.py` lists them; the CLI, the
sweep, `compare` and the layout test read that one list.
What it is not: the list itself (`nanobench.commands`) or a command.
Invariant: declaring a command imports no torch: its kind is imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

TIMED = "timed"  # a sweep's points that time must never share a machine
COUNTED = "counted"  # a sweep's points that only count: any number at once


@dataclass(frozen=True)
class Command:
    name: str
    run: Callable
    aliases: tuple[str, ...] = ()
    doc: str = ""  # the page under docs/ that explains what this command measures
    sweep: str = ""  # TIMED, COUNTED, or "": a sweep does not run it
    kind: Callable[[], type] | None = None  # its kind, imported when asked; None: none
    comparable: bool = False  # `compare` reads its saved runs (`<name>.csv`), through its kind
