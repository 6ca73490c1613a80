"""`nanobench history`'s tables: the machine's keys, one key's runs, what a saved run borrowed.

What it is: `render_keys`, `render_runs` and `render_borrowed`, each handed the rows
`nanobench.history.listing` read (KeyRow, RunRow, BorrowedRow) and a title line.
What it is not: the reading of the files or any statistic: every cell is a row's field.
Invariant: an empty listing says so in words, never prints an empty table.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from reports.style import fit_table


def _table(title: str, columns: tuple[str, ...], left: int) -> Table:
    """Names on the left (the first `left` columns), figures on the right."""
    table = Table(title=Text(title), title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i < left else "right")
    return table


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_keys(console, rows: list, title: str) -> None:
    """A line per key: what it compares, the code, its backend and what tells it from a key
    that reads alike, its runs in band, their spread and dates."""
    if not rows:
        console.print(f"{title}: no runs recorded yet", markup=False)
        return
    table = _table(title, ("key", "command", "comparison", "code", "model", "settings", "runs",
                           "kept out", "ratio", "spread", "first", "last"), left=6)  # fmt: skip
    for r in rows:
        kept = str(r.kept_out) + (f" (+{r.skipped} unreadable)" if r.skipped else "")
        table.add_row(r.key[:12], r.command, r.comparison, r.code, r.model, r.settings or "-",
                      str(r.runs), kept,
                      _num(r.ratio, ".3f"), _num(r.spread_pct, ".1f") + ("%" if r.spread_pct
                      is not None else ""), r.first or "-", r.last or "-")  # fmt: skip
    console.print(fit_table(console, table))


def render_runs(console, rows: list, title: str) -> None:
    """A line per recorded run of one key: when, its ratio, its own noise, in band or not."""
    table = _table(title, ("finished", "band", "ratio", "within (sd)", "rounds"), left=2)
    for r in rows:
        table.add_row(r.at.replace("T", " ").rstrip("Z"), r.band, f"{r.ratio:.4f}",
                      f"{r.within_pct:.2f}%", str(r.rounds))  # fmt: skip
    console.print(fit_table(console, table))
    out = sum(r.band == "out" for r in rows)
    if out:
        runs = "run is" if out == 1 else "runs are"
        console.print(f"{out} {runs} out of band: kept out of the spread lent to later runs",
                      markup=False)  # fmt: skip


def render_borrowed(console, rows: list, title: str, recorded: str) -> None:
    """A line per key the saved run read: lent or not, how many runs, from when to when."""
    columns = ("key", "comparison", "lent", "runs", "since", "until", "kept out")
    table = _table(title, columns, left=3)
    for r in rows:
        kept = str(r.kept_out) + (f" (+{r.skipped} unreadable)" if r.skipped else "")
        table.add_row(r.key[:12], r.comparison, "yes" if r.lent else "no", str(r.runs),
                      r.since or "-", r.until or "-", kept)  # fmt: skip
    console.print(fit_table(console, table))
    console.print(recorded, markup=False)
