"""The registry of the measuring commands: each name, its function, its hidden aliases, its doc.

What it is: `COMMANDS`, each command's `COMMAND` (`harness.cli.registry.Command`) in one list,
read by `cli.py` (which registers them, and `sweep`, with Typer), the sweep (a command's options
off its function, and how its points run), `compare` (each command's kind, `kinds`) and the
layout test, so none of them keeps a list of its own; `command(name)`; and `help_of`, a
command's help with each paragraph on one line.
What it is not: the commands (each lives in its own package's `command.py`) or the CLI.
Invariant: importing this imports no torch: a command module's top level is options, spec and
validation; what measures is imported when the command runs.
"""

from __future__ import annotations

import inspect

from nanobench.buckets import command as buckets
from nanobench.capture import command as capture
from nanobench.compile import command as compile_
from nanobench.decode import command as decode
from nanobench.explain import command as explain
from nanobench.harness.cli.registry import Command
from nanobench.pool_budget import command as pool_budget
from nanobench.profile import command as profile
from nanobench.startup import command as startup
from nanobench.tune import command as tune

# Each command declares itself (`<package>/command.py`'s `COMMAND`); this is their one list, in
# the order the CLI shows them.
COMMANDS = tuple(
    m.COMMAND
    for m in (explain, compile_, buckets, capture, pool_budget, decode, startup, profile, tune)
)
__all__ = ["COMMANDS", "Command", "command", "help_of", "kinds"]


def command(name: str) -> Command:
    """The command registered under `name` or one of its aliases."""
    for c in COMMANDS:
        if name == c.name or name in c.aliases:
            return c
    raise KeyError(name)


def kinds() -> dict[str, type]:
    """Every command's kind by its name, imported now: the measured commands' `RunKind`s and
    explain's saved-run kind."""
    return {c.name: c.kind() for c in COMMANDS if c.kind is not None}


def help_of(c: Command) -> str:
    """The docstring with each paragraph joined onto one line, so the terminal wraps it.

    Typer keeps a docstring's hard line breaks, which at a narrower width than the source's
    leave orphaned fragments; a paragraph on one line wraps cleanly at any width. An
    `Example:` line is a paragraph of its own.
    """
    paragraphs = []
    for block in inspect.cleandoc(c.run.__doc__ or "").split("\n\n"):
        current: list[str] = []
        for line in block.splitlines():
            if line.startswith("Example:") and current:
                paragraphs.append(" ".join(current))
                current = []
            current.append(line.strip())
        paragraphs.append(" ".join(current))
    text = "\n\n".join(paragraphs)
    return f"{text}\n\nMore: {c.doc} in the nanobench repository." if c.doc else text
