"""The registry of the measuring commands: each name, its function, its hidden aliases, its doc.

What it is: `COMMANDS`, read by `cli.py` (which registers them, and `sweep`, with Typer) and by
the sweep (which reads a command's options off its function), so the sweep never imports the
CLI; `Command`, the record `sweep` registers itself with; and `help_of`, a command's help with
each paragraph on one line.
What it is not: the commands (each lives in its own package's `command.py`) or the CLI.
Invariant: importing this imports no torch: a command module's top level is options, spec and
validation; what measures is imported when the command runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from nanobench.buckets.command import buckets
from nanobench.capture.command import capture
from nanobench.compile.command import compile_command
from nanobench.decode.command import decode_command
from nanobench.explain.command import explain
from nanobench.pool_budget.command import pool_budget
from nanobench.profile.command import profile_command
from nanobench.startup.command import startup_command


@dataclass(frozen=True)
class Command:
    name: str
    run: Callable
    aliases: tuple[str, ...] = ()
    doc: str = ""  # the page under docs/ that explains what this command measures


COMMANDS = (
    Command("explain", explain, doc="docs/measuring.md"),
    Command("compile", compile_command, ("compilebench",), "docs/measuring.md"),
    Command("buckets", buckets, ("bucketbench",), "docs/capture-lists.md"),
    Command("capture", capture, ("capturebench",), "docs/capture-lists.md"),
    Command("pool-budget", pool_budget, doc="docs/memory.md"),
    Command("decode", decode_command, doc="docs/measuring.md"),
    Command("startup", startup_command, doc="docs/startup.md"),
    Command("profile", profile_command, doc="docs/profile.md"),
)


def command(name: str) -> Command:
    """The command registered under `name` or one of its aliases."""
    for c in COMMANDS:
        if name == c.name or name in c.aliases:
            return c
    raise KeyError(name)


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
