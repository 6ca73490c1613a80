"""A sweep's outputs: the tidy `sweep.csv`, the heatmap over its two leading axes, the table.

What it is: `tidy_rows` (every row of every point, with the point's key, status, gate verdict,
axis values as `axis_<name>` and environment record as `env_<name>`), `write_sweep_csv`,
`FIGURES` (each command's main figure: which column, of which rows, best how), `point_figure`,
`draw_sweep` and `render_sweep`.
What it is not: running points (`nanobench.sweep.launchers`) or the grid (`nanobench.sweep.points`).
Invariant: every number drawn or printed comes from a point's own rows; a point without the
figure's column is an empty cell, never a zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from reports.csvio import write_rows
from reports.style import title

SWEEP_COLUMNS = [
    "point_key",  # sha256 of the command and its full options (12 hex digits)
    "point_index",  # position in the grid, first axis slowest
    "command",
    "point_status",  # ok | failed | bad-input | crashed | timeout
    "point_verdict",  # fail if a gate failed, else inconclusive if one was, else pass; "" no gates
    "point_gates",  # {gate name: pass | fail | inconclusive}
    "point_detail",  # the command's last stderr line when it did not end ok
    "point_s",  # wall seconds of the point's process
]


def gate_verdict(gate: dict) -> str:
    """A gate's own `verdict` when it has one, else pass/fail from `passed`."""
    return gate.get("verdict") or ("pass" if gate.get("passed") else "fail")


def point_verdict(gates: list[dict]) -> str:
    verdicts = {gate_verdict(g) for g in gates}
    for worst in ("fail", "inconclusive", "pass"):
        if worst in verdicts:
            return worst
    return ""


def tidy_rows(records) -> list[dict]:
    """One CSV row per command row (one for a point with none), the point's columns first."""
    rows = []
    for r in sorted(records, key=lambda r: (r.command, r.index, r.key)):
        base = {
            "point_key": r.key,
            "point_index": r.index,
            "command": r.command,
            "point_status": r.status,
            "point_verdict": point_verdict(r.gates),
            "point_gates": {g["name"]: gate_verdict(g) for g in r.gates},
            "point_detail": r.detail,
            "point_s": r.wall_s,
            **{f"axis_{k}": v for k, v in r.axes.items()},
            **{f"env_{k}": v for k, v in r.env.items()},
        }
        rows += [{**base, **row} for row in r.rows] or [base]
    return rows


def write_sweep_csv(path: Path, records) -> Path:
    return write_rows(path, tidy_rows(records), SWEEP_COLUMNS)


@dataclass(frozen=True)
class Figure:
    column: str
    label: str
    where: tuple[tuple[str, object], ...] = ()  # only rows with these values count
    exclude: tuple[tuple[str, object], ...] = ()  # rows with these values never count
    best: str = "max"  # which row of a point is its figure: max or min
    scale: float = 1.0  # shown value = column / scale
    unit: str = ""


FIGURES = {
    "buckets": Figure("waste", "worst padding waste of a run", where=(("table", "run"),)),
    "pool-budget": Figure("capture_pool_bytes", "largest capture pool", scale=2**20, unit=" MiB"),
    "capture": Figure(
        "capture_bytes",
        "largest capture (traced pool + shared logits)",
        where=(("table", "pool"),),
        scale=2**20,
        unit=" MiB",
    ),
    "compile": Figure("speedup", "best compiled speedup over off", exclude=(("mode", "off"),)),
    "decode": Figure("ms_per_step", "fastest ms per step", best="min", unit=" ms"),
}


@dataclass(frozen=True)
class PointFigure:
    value: float | None
    low: float | None  # ci_low of the same row, when the rows carry an interval
    high: float | None


def point_figure(record, figure: Figure) -> PointFigure:
    """The point's main figure: the best row's column, with that row's interval."""
    rows = [
        r
        for r in record.rows
        if all(r.get(k) == v for k, v in figure.where)
        and not any(r.get(k) == v for k, v in figure.exclude)
        and _number(r.get(figure.column)) is not None
    ]
    if not rows:
        return PointFigure(None, None, None)
    pick = max if figure.best == "max" else min
    row = pick(rows, key=lambda r: _number(r[figure.column]))
    return PointFigure(
        _number(row[figure.column]), _number(row.get("ci_low")), _number(row.get("ci_high"))
    )


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def shown(figure: Figure, value: float | None) -> str:
    if value is None:
        return "-"
    v = value / figure.scale
    return f"{v:.3g}{figure.unit}" if abs(v) < 1000 else f"{v:,.0f}{figure.unit}"


def figure_text(figure: Figure, pf: PointFigure, sep: str = " ") -> str:
    """The value, and its interval when the row carries one: `1.8 [1.6, 2.0]`."""
    text = shown(figure, pf.value)
    if pf.low is not None and pf.high is not None:
        text += f"{sep}[{shown(figure, pf.low)}, {shown(figure, pf.high)}]"
    return text


def cell_text(figure: Figure, pf: PointFigure, verdict: str, status: str) -> str:
    if status not in ("ok", "failed"):
        return status
    return f"{figure_text(figure, pf, sep=chr(10))}\ngates: {verdict or 'none'}"


def best_point(group: list, figure: Figure):
    """The point whose figure is best; a point without one only when none has it."""
    scored = [r for r in group if point_figure(r, figure).value is not None]
    if not scored:
        return group[0]
    pick = max if figure.best == "max" else min
    return pick(scored, key=lambda r: point_figure(r, figure).value)


def run_of(points) -> dict[str, str]:
    """The model, device and dtype the points ran: the one value, "varies", or "-" (no such option)."""
    found = {}
    for name in ("model", "device", "dtype"):
        values = {str(dict(p.options)[name]) for p in points if name in dict(p.options)}
        found[name] = values.pop() if len(values) == 1 else ("varies" if values else "-")
    return found


COLOUR_BAR_PT = 72  # the colour bar, its ticks and its label, beside the heatmap


def draw_sweep(
    records, axes: list[tuple[str, tuple]], figure: Figure, command: str, run: dict[str, str]
):
    """Heatmap of the figure over the two leading axes; later axes keep each cell's best point.

    `run` is `run_of(points)`: the title names the model, device and dtype the points ran.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib import patheffects

    from reports.figure_text import fit_ticks, fit_title

    lead = list(axes[:2])
    while len(lead) < 2:
        lead.insert(0, ("", ("",)))
    (y_name, y_values), (x_name, x_values) = lead
    values, texts = heatmap_cells(records, lead, figure)
    # Constrained layout gives a wrapped title its lines even in a one-row grid's short figure.
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(x_values), 1.4 + 1.0 * len(y_values)),
                           layout="constrained")  # fmt: skip
    # A point without the figure (crashed, timed out) is a grey cell, not a colour.
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, aspect="auto")
    for y in range(len(y_values)):
        for x in range(len(x_values)):
            # A dark outline keeps white text readable on the light end of the colour map.
            ax.text(
                x,
                y,
                texts[y][x],
                ha="center",
                va="center",
                fontsize=8,
                color="white",
                path_effects=[patheffects.withStroke(linewidth=2, foreground="black")],
            )
    # A target's path is a long tick label: wrapped to its column, never into its neighbour's.
    fit_ticks(ax, x_values, beside_pt=COLOUR_BAR_PT)
    fit_ticks(ax, y_values, axis="y")
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    more = f"; best point over {', '.join(n for n, _ in axes[2:])}" if len(axes) > 2 else ""
    fig.colorbar(image, ax=ax, label=f"{figure.column}{figure.unit}")
    # Wrapped to what the colour bar leaves: a small grid's title is wider than its figure.
    text = title(f"nanobench sweep {command}, {figure.label}{more}", **run)
    fit_title(ax, text, fontsize=9, beside_pt=COLOUR_BAR_PT)
    return fig


def heatmap_cells(records, lead: list[tuple[str, tuple]], figure: Figure):
    """Each cell's value (scaled, NaN without one) and text, from its best point over later axes."""
    import numpy as np

    (y_name, y_values), (x_name, x_values) = lead
    cells: dict[tuple[int, int], list] = {}
    for record in records:
        y = y_values.index(record.axes[y_name]) if y_name else 0
        x = x_values.index(record.axes[x_name]) if x_name else 0
        cells.setdefault((y, x), []).append(record)
    values = np.full((len(y_values), len(x_values)), np.nan)
    texts = [["" for _ in x_values] for _ in y_values]
    for (y, x), group in cells.items():
        record = best_point(group, figure)
        pf = point_figure(record, figure)
        if pf.value is not None:
            values[y, x] = pf.value / figure.scale
        texts[y][x] = cell_text(figure, pf, point_verdict(record.gates), record.status)
    return values, texts


def render_sweep(console, records, axes, figure: Figure, outputs: dict, ran: int) -> None:
    table = Table(title=f"sweep: {figure.label}, {ran} of {len(records)} points run now")
    for column in ["point", *(n for n, _ in axes), "status", "verdict", figure.column, "detail"]:
        table.add_column(column)
    for record in records:
        pf = point_figure(record, figure)
        table.add_row(
            record.key,
            *(str(record.axes[n]) for n, _ in axes),
            record.status,
            point_verdict(record.gates) or "-",
            figure_text(figure, pf),
            record.detail or "",
        )
    console.print(table)
    for name, path in outputs.items():
        console.print(f"{name}: {path}")


def dry_run_rows(points) -> list[dict]:
    return [
        {"point_key": p.key, "point_index": p.index, **{f"axis_{k}": v for k, v in p.axes}}
        for p in points
    ]


def render_dry_run(console, points, argv_of) -> None:
    table = Table(title=f"sweep: {len(points)} points (dry run, nothing runs)")
    for column in ("point", "command line"):
        table.add_column(column)
    for p in points:
        table.add_row(p.key, "nanobench " + " ".join(argv_of(p)))
    console.print(table)
