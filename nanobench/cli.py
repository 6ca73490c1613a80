"""The nanobench command line: this file only registers commands.

Each command lives in its own package (`nanobench/<command>/command.py`): it validates, calls
the library, prints. The list of commands is `nanobench.commands`; nothing here imports torch,
so `nanobench --help` and shell completion answer at once.
"""

from __future__ import annotations

from typing import Annotated

import typer

from nanobench import __version__
from nanobench.commands import COMMANDS, Command, help_of
from nanobench.compare.command import compare_command
from nanobench.harness.cli.console import OneLineErrors
from nanobench.history.command import history_command
from nanobench.sweep.command import SWEEP

app = typer.Typer(
    name="nanobench",
    cls=OneLineErrors,
    help="Does torch.compile or a recorded CUDA graph pay off for your LLM decode step? "
    "And if not, exactly why not.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"nanobench {__version__}")
        raise typer.Exit()


VersionOpt = Annotated[
    bool,
    typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version."),
]


@app.callback()
def main(version: VersionOpt = False) -> None:
    """nanobench: measured answers about compiling and capturing a paged-KV decode step."""


# compare reads saved runs and measures nothing, so it is no sweep's command: registered here.
COMPARE = Command("compare", compare_command, doc="docs/measuring.md")
# history reads and clears earlier runs' records and measures nothing: registered here too.
HISTORY = Command("history", history_command, doc="docs/measuring.md")

for _c in (*COMMANDS, SWEEP, COMPARE, HISTORY):
    app.command(_c.name, help=help_of(_c))(_c.run)
    for _alias in _c.aliases:
        app.command(_alias, hidden=True, help=help_of(_c))(_c.run)

if __name__ == "__main__":
    app()
