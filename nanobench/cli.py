"""The nanobench command line: this file only registers commands.

Each command lives in its own `cmd_*.py` module: it validates, calls the library, prints.
"""

from __future__ import annotations

from typing import Annotated

import typer

from nanobench import __version__
from nanobench.buckets.command import buckets
from nanobench.capture.command import capture
from nanobench.compile.command import compile_command
from nanobench.decode.command import decode_command
from nanobench.explain.command import explain
from nanobench.pool_budget.command import pool_budget
from nanobench.sweep.command import sweep
from nanobench.harness.console import OneLineErrors

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


app.command("explain")(explain)
app.command("compile")(compile_command)
app.command("compilebench", hidden=True)(compile_command)
app.command("buckets")(buckets)
app.command("bucketbench", hidden=True)(buckets)

app.command("capture")(capture)
app.command("capturebench", hidden=True)(capture)
app.command("pool-budget")(pool_budget)
app.command("decode")(decode_command)
app.command("sweep")(sweep)

if __name__ == "__main__":
    app()
