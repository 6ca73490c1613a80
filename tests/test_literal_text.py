"""What a user typed prints as typed: rich markup and emoji codes in a string are text.

A target spec `my_step.py:factory` holds the emoji code `:factory:` (a factory emoji, once) and
a path may hold `[red]`, rich's markup. Every report prints on `stdout_console()` (and errors,
progress on `stderr_console()`), which read neither; the block-per-row layout of a table too
wide for the terminal (`reports.style.fit_table`) keeps its title and cells literal too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.cli.console import stderr_console, stdout_console

CORPUS = Path(__file__).parent / "corpus"
WRITTEN = "x.py:factory: [red]y[/red] [bold]z[/bold]"
EMOJI = "\N{FACTORY}"


def test_a_table_cell_title_and_line_print_literally(capsys):
    console = stdout_console()
    table = Table(title=WRITTEN)
    table.add_column("spec")
    table.add_row(WRITTEN)
    console.print(table)
    console.print(WRITTEN)
    out = capsys.readouterr().out
    assert out.count(WRITTEN) == 3, out
    assert EMOJI not in out


def test_errors_and_progress_print_literally(capsys):
    stderr_console().print(WRITTEN)
    err = capsys.readouterr().err
    assert WRITTEN in err and EMOJI not in err


def test_a_table_too_wide_prints_blocks_that_keep_the_text(capsys):
    table = Table(title=WRITTEN)
    for n in range(12):
        table.add_column(f"[dim]column {n}[/dim] :factory:")
    table.add_row("a:factory: [red]y[/red]", *[f"[red]{'9' * 12}[/red]"] * 11)
    stdout_console().print(table)
    out = capsys.readouterr().out
    assert "column 0" in out and "spec" not in out  # the blocks, not rich's squeezed table
    assert out.splitlines()[0].strip() == WRITTEN
    assert "[dim]column 0[/dim] :factory:: a:factory: [red]y[/red]" in out
    assert f"[red]{'9' * 12}[/red]" in out and EMOJI not in out


@pytest.fixture(scope="module")
def marked_step(tmp_path_factory) -> str:
    """The corpus's static-cache step, copied under a folder whose name is rich markup."""
    where = tmp_path_factory.mktemp("steps") / "[bold]w"
    where.mkdir()
    for name in ("static_kv.py", "gptfast.py"):
        shutil.copy(CORPUS / name, where / ("my_step.py" if name == "static_kv.py" else name))
    return f"{where / 'my_step.py'}:factory"


@pytest.mark.parametrize(
    "args",
    [
        ["pool-budget", "--capture-sizes", "1,2", "--max-model-len", "64"],
        ["explain", "--rows", "2", "--prompt-len", "4"],
    ],
    ids=["pool-budget", "explain"],
)
def test_a_target_spec_titles_its_table_as_typed(marked_step, args, tmp_path):
    result = CliRunner().invoke(app, [*args, "--target", marked_step, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "/[bold]w/my_step.py:factory" in result.stdout, result.stdout
    assert EMOJI not in result.stdout
