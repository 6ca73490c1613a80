"""A report's table at any terminal width: whole when it fits, a block per row when it does not.

rich fits a table to the console by cutting cells to an ellipsis; at 80 columns compile's 13
columns read "mo…", "st…", "0.…". The witness here is rich's own rendering of the same table
on a console wide enough for it.
"""

from __future__ import annotations

import io
import sys

from rich.console import Console
from rich.table import Table

from nanobench.harness.cli.console import FitTables, stdout_console

HEADERS = ["mode", "status", "shapes", "builds", "reuse", "fell back", "predicted", "guards"]
HEADERS += ["compile s", "step ms\n(IQR)", "speedup [95%]", "breakeven [95%]", "worth it"]
ROWS = [
    ["off", "ok", "16", "0", "100%", "no", "no", "none", "0.00", "2.31 (0.05)", "1.00x", "-", "-"],
    ["dynamic", "ok", "16", "1", "94%", "no", "no", "none", "23.55", "1.23 (0.01)"]
    + ["1.19x [0.97, 1.48]", "73,928 [21,462, never]", "no"],
]


def wide_table() -> Table:
    table = Table(title="compile: tiny, cpu float32")
    for header in HEADERS:
        table.add_column(header, justify="right")
    for row in ROWS:
        table.add_row(*row)
    return table


def rendered(width: int, hooked: bool = True) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    if hooked:
        console.push_render_hook(FitTables(console))
    console.print(wide_table())
    return console.export_text()


def test_rich_alone_cuts_the_cells_at_80_columns():
    """The defect this guards against, shown on rich itself."""
    assert "…" in rendered(80, hooked=False)


def test_a_table_too_wide_prints_each_row_as_a_block_with_every_cell_whole():
    text = rendered(80)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "compile: tiny, cpu float32"
    for row in ROWS:
        start = lines.index(f"mode: {row[0]}")
        block = lines[start + 1 : start + len(HEADERS)]
        expected = [f"{h.replace(chr(10), ' ')} {v}" for h, v in zip(HEADERS[1:], row[1:])]
        assert [" ".join(line.split()) for line in block] == expected


def test_a_table_that_fits_is_printed_as_rich_prints_it():
    assert rendered(200) == rendered(200, hooked=False)
    assert "┃" in rendered(200)


def test_piped_output_is_160_columns_whatever_columns_says(monkeypatch):
    """pytest-xdist sets COLUMNS=80 in its workers; a log is 160 columns all the same."""
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # piped, whatever runs the suite
    monkeypatch.setenv("COLUMNS", "80")
    assert stdout_console().width == 160


def unwrapped_table() -> Table:
    """decode's table: every column no_wrap, so a cell that does not fit is cut, not folded."""
    table = Table(title="decode: tiny, cpu float32")
    for header in ("system", "ms/step (IQR)", "x hf-eager", "x hf-comp", "x floor"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_row("engine-eager", "1.95 (0.16)", "0.72x ±0.03", "0.90x ±0.04", "6.25x ±0.21")
    table.add_row("hf-eager", "2.71 (0.19)", "1.00x ±0.00", "1.25x ±0.03", "8.66x ±0.29")
    return table


def test_a_no_wrap_column_narrower_than_its_widest_cell_prints_blocks_not_an_ellipsis():
    """rich measures a no_wrap cell by its longest word, so its minimum fits where the cells
    do not: a width just under the table's whole one is where rich alone cuts them."""
    whole = Console(width=500, record=True, file=io.StringIO())
    whole.print(unwrapped_table())
    width = max(len(line.rstrip()) for line in whole.export_text().splitlines()) - 2
    bare = Console(width=width, record=True, file=io.StringIO())
    bare.print(unwrapped_table())
    assert "…" in bare.export_text()  # the defect, on rich alone
    hooked = Console(width=width, record=True, file=io.StringIO())
    hooked.push_render_hook(FitTables(hooked))
    hooked.print(unwrapped_table())
    text = hooked.export_text()
    assert "…" not in text
    for cell in ("0.72x ±0.03", "6.25x ±0.21", "8.66x ±0.29", "1.95 (0.16)"):
        assert cell in text


def test_a_word_wider_than_its_collapsed_column_prints_blocks_not_an_ellipsis():
    """compile's table at 160 columns: rich collapses the widest wrapping columns first, below
    their longest word, so static's "eager-after-fall-back" read "eager-after-f…" in the
    step column although the table's minimum width fit."""
    table = wide_table()
    table.add_row(
        "static", "ok", "16", "8", "50%", "yes", "yes", "shape", "51.86",
        "2.11 (0.18) eager-after-fall-back", "0.93x [0.88, 0.97]", "never [never, never]", "no",
    )  # fmt: skip
    bare = Console(width=160, record=True, file=io.StringIO())
    bare.print(table)
    cut = bare.export_text()
    assert "…" in cut and "eager-after-fall-back" not in cut  # the defect, on rich alone
    hooked = Console(width=160, record=True, file=io.StringIO())
    hooked.push_render_hook(FitTables(hooked))
    hooked.print(table)
    text = hooked.export_text()
    assert "…" not in text and "eager-after-fall-back" in text
