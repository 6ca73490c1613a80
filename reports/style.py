"""One look for every report: byte units, a colour per mode and per system, figure titles.

What it is: `binary_bytes(n)` (the one byte formatter: powers of 1024, named KiB/MiB/GiB),
`colour(name)` (a fixed colour for each compile mode, decode system and kernel, the same in
every panel of every figure), `title(what, model=, device=, dtype=, **shape)` (a figure
title that names the run it was drawn from) and `fit_table(console, table)` (a table too wide
for the terminal as one block per row, never cells cut to an ellipsis) and
`interval_sources(pairs)` (where a table's intervals took their process variance from).
What it is not: a theme. Matplotlib's defaults stand; only what must agree across figures is here.
Invariant: the same name is drawn in the same colour everywhere; a byte count is never printed
in decimal megabytes beside a binary one; a table's cell is printed whole at any width.
"""

from __future__ import annotations

import io
import re
import textwrap

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
# A remedy printed fits an 80-column terminal; the files (CSV, --json) keep its long form.
NOTE_COLUMNS = 80
INSTALLED = re.compile(r"[^\s\[\](]*site-packages/")  # an installed package's path, up to its name

# Modes, systems and kernels that can share a figure get distinct colours (tab10).
COLOURS = {
    "off": "tab:gray",
    "dynamic": "tab:blue",
    "static": "tab:orange",
    "reduce-overhead": "tab:purple",
    "engine-eager": "tab:gray",
    "engine-compiled": "tab:blue",
    "engine-captured": "tab:green",
    "hf-eager": "tab:brown",
    "hf-static-compiled": "tab:red",
    "vllm-eager": "tab:pink",
    "vllm-compiled": "tab:cyan",
    "reference": "tab:blue",
    "triton": "tab:green",
}


def binary_bytes(n: int | float | None) -> str:
    """`1536` -> "1.5 KiB"; a size in powers of 1024 with one decimal ("-" for None)."""
    if n is None:
        return "-"
    value = float(n)
    unit = UNITS[0]
    for unit in UNITS:
        if abs(value) < 1024 or unit == UNITS[-1]:
            break
        value /= 1024
    return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"


def colour(name: str) -> str:
    """The colour `name` (a mode, a system or a kernel) has in every figure."""
    return COLOURS.get(name, "tab:olive")


def title(what: str, *, model: str | None, device: str, dtype: str, **shape) -> str:
    """`what` and the run it measured: "compiled decode: tiny, cpu float32, rows 4, steps 16";
    model None (a run that loads no model, such as a user's own target) names none."""
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in shape.items() if v is not None]
    named = [] if model is None else [str(model)]
    return f"{what}: {', '.join([*named, f'{device} {dtype}', *parts])}"


def interval_sources(pairs) -> list[str]:
    """'pooled: 3 systems x 3 processes, 15 to 27 df' for each source of process variance
    among (source, df) pairs, the degrees of freedom as a range where they differ."""
    by: dict[str, list[float]] = {}
    for source, df in pairs:
        if source:
            by.setdefault(source, []).extend([df] if df is not None else [])
    lines = []
    for source, dfs in sorted(by.items()):
        low, high = (min(dfs), max(dfs)) if dfs else (None, None)
        span = (
            "" if low is None else f", {low:g} df" if low == high else f", {low:g} to {high:g} df"
        )
        lines.append(source + span)
    return lines


def counted(n: int, noun: str, plural: str = "") -> str:
    """'1 process', '3 processes', '1 run': a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + ('es' if noun.endswith('s') else 's')}"


def article(word: str) -> str:
    """'an explain', 'a compile': the indefinite article a word takes (by its first letter)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def history_lines(pairs) -> list[str]:
    """'history of dynamic, static: none yet for this code': each distinct history note among
    (name, note) pairs, once, with the names it holds for."""
    by: dict[str, list[str]] = {}
    for name, note in pairs:
        if note:
            by.setdefault(note, []).append(name)
    return [f"history of {', '.join(names)}: {note}" for note, names in by.items()]


def gate_mark(g) -> str:
    """How a gate's verdict reads in every table: pass, FAIL or can't tell."""
    return {"pass": "pass", "fail": "FAIL", "inconclusive": "can't tell"}[g.verdict]


def fit_table(console, table: Table):
    """`table` when rich prints it at the console's width with every cell whole (`cuts_cells`);
    else one block per row, its first cell the block's title and each other column a
    `header  value` line.

    Rich squeezes a table wider than the terminal by cutting cells to an ellipsis ("mo…", "0.…"),
    which leaves nothing to read; a block per row keeps every figure whole at 80 columns.
    """
    if not cuts_cells(console, table):
        return table
    headers = [literal(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    blocks = [literal(table.title)] if table.title else []
    for i in range(table.row_count):
        name = Text.assemble(headers[0], ": ", str(cells[0][i]))
        block = Table(box=None, show_header=False, title=name, title_justify="left")
        block.add_column(style="bold", no_wrap=True)
        block.add_column(overflow="fold")
        for header, column in zip(headers[1:], cells[1:]):
            block.add_row(header, column[i])
        blocks += [block, Text("")]
    return Group(*blocks)


def cuts_cells(console, table: Table) -> bool:
    """Whether rich, printing `table` at the console's width, cuts a cell to an ellipsis.

    Neither of rich's measures says so: a no_wrap cell is measured by its longest word ("0.72x"
    of "0.72x ±0.04"), and a table too wide collapses its widest wrapping columns first, below
    their longest word ("eager-after-f…"). So the table is laid out once, off screen, and read.
    """
    own = [table.title, *(c.header for c in table.columns)]
    own += [cell for c in table.columns for cell in c.cells]
    already = sum(str(t).count("…") for t in own if t is not None)
    off = Console(width=console.width, file=io.StringIO(), markup=False, emoji=False)
    with off.capture() as captured:
        off.print(table)
    return captured.get().count("…") > already


def literal(text) -> Text:
    """A header or title as written (a user's spec in a title is text, never markup or an emoji
    code); a multi-line header on one line."""
    return Text(text.replace("\n", " ")) if isinstance(text, str) else text


def note_lines(text: str, width: int = NOTE_COLUMNS) -> str:
    """A long note (a remedy) as lines of at most `width` columns, each after the first indented
    four, an installed package's path cut to the package (`.../site-packages/vllm/x.py:5`
    reads `vllm/x.py:5`); a word longer than a line is broken, so every line fits."""
    short = INSTALLED.sub("", text)
    return "\n".join(textwrap.wrap(short, width, subsequent_indent="    ", break_on_hyphens=False))
