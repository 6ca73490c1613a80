"""Before and after: the change table and `compare.png`, for `--vs` runs and `compare`.

What it is: `render_changes(console, changes, gates, title, notes)` (one block of three lines
per member: before, after and the change, a column per measured quantity; each count's change
fewer / more / same, each timing's after / before with its interval and faster / slower /
can't tell) and `draw_compare(rows, path, title)` (per mode, the two sides' step ms and
speedups side by side, with their whiskers). Both are handed typed rows (`Change`, the
command's rows) or their dicts: they read fields, never compute a statistic.
What it is not: the comparison (`nanobench.harness.runs.change` and each command's own) or a
measurement.
Invariant: every figure and cell is a measured row's; a change without an interval says so, and
never reads as faster or slower.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.csvio import save_figure
from reports.style import colour, gate_mark, note_lines

SIDES = ("before", "after")  # the change table's two sides, as a comparison names them
# The change table's columns, in order, with their headers.
HEADERS = {
    "graphs": "graphs",
    "breaks": "breaks",
    "break_sites": "break sites",
    "ops": "ops",
    "guards": "guards",
    "value_guards": "value guards",
    "builds": "builds",
    "recompiles": "recompiles",
    "fell_back": "fell back",
    "shapes": "shapes",
    "compile_s": "compile s",
    "compile_warm_s": "warm s",
    "step_ms": "step ms",
    "speedup": "speedup",
    "breakeven_steps": "breakeven",
    "worth_compiling": "worth it",
    "worth_compiling_warm": "worth it warm",
    "tokens_per_s": "tok/s",
    "prefill_ms": "prefill ms",
    "ratio_vs_floor": "x floor",
    "peak_rss_mb": "peak RSS MiB",
    "tokens_match": "tokens match",
}
DECODE_PANELS = (
    ("ms_per_step", ("ms_q1", "ms_q3"), "median ms per step, whisker: IQR"),
    ("ratio_vs_floor", ("ratio_vs_floor_low", "ratio_vs_floor_high"),
     "step time over the roofline floor, whisker: its interval"),
)  # fmt: skip
# compare.png's panels by default (compile): (the rows' value, its whisker's ends, the title).
COMPILE_PANELS = (
    ("step_ms", ("step_ms_q1", "step_ms_q3"), "median steady step (ms), whisker: IQR"),
    ("speedup", ("speedup_low", "speedup_high"), "speedup against off, whisker: its interval"),
)


def field(c, name: str):
    return c[name] if isinstance(c, dict) else getattr(c, name)


def value(v, column: str = "") -> str:
    """A side's cell: a speedup as '0.63x', steps as whole numbers, a verdict's first words."""
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if column == "speedup":
        return f"{v:.2f}x"
    if column == "breakeven_steps":
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 1e4 else f"{v:,.0f}"
    # "can't tell at this noise": the table's note says which noise; the cell keeps the verdict.
    return str(v).removesuffix(" at this noise")


def changed(c) -> str:
    """'-12 fewer', '0.52x [0.45, 0.60] faster', '1.31x can't tell (no interval)', 'same'."""
    kind, verdict, change = field(c, "kind"), field(c, "verdict"), field(c, "change")
    if kind == "count":
        return verdict if change in (None, 0) else f"{change:+d} {verdict}"
    if kind == "value":
        return verdict
    if change is None:
        return verdict
    low, high = field(c, "low"), field(c, "high")
    if low is None or high is None:
        return f"{change:.2f}x (no CI)"
    return f"{change:.2f}x [{low:.2f}, {high:.2f}] {verdict}"


def change_table(changes: list, title: str, sides=SIDES) -> Table:
    """A row per member and measure: before, after, change (`sides` names the two: plain and
    knob for --try). Measures run down, not across, so the table keeps five columns however
    many a command measures (the counts alone are seven)."""
    members = list(dict.fromkeys(field(c, "member") for c in changes))
    table = Table(title=Text(title))
    for col in ("", "measure", *sides, "change"):
        table.add_column(col, justify="left" if col in ("", "measure") else "right")
    for m in members:
        by = {field(c, "column"): c for c in changes if field(c, "member") == m}
        for i, k in enumerate(k for k in HEADERS if k in by):
            table.add_row(m if i == 0 else "", HEADERS[k], _before(by[k]), _after(by[k]),
                          changed(by[k]))  # fmt: skip
        table.add_section()
    return table


def _before(c) -> str:
    return value(field(c, "before"), field(c, "column"))


def _after(c) -> str:
    return value(field(c, "after"), field(c, "column"))


def render_changes(console, changes: list, gates, title: str, notes=(), sides=SIDES) -> None:
    """The change table, what its intervals are, the notes (the drift of runs apart), the gates."""
    if not changes:
        console.print("no member ran on both sides: nothing to compare", markup=False)
    else:
        console.print(change_table(changes, title, sides))
    timed = [c for c in changes if field(c, "kind") == "timing" and field(c, "low") is not None]
    if timed:
        levels = {field(c, "level") for c in timed if field(c, "level")}
        at = f"{max(levels):.1%}".replace(".0%", "%") if levels else "95%"
        together = f" ({len(timed)} of them, held together)" if len(timed) > 1 else ""
        console.print(
            f"timing changes: {sides[1]} / {sides[0]}, {at} intervals{together}; faster or "
            "slower only "
            "when the interval excludes 1",
            markup=False,
        )
    lacking = {field(c, "note") for c in changes if field(c, "kind") == "timing"
               and field(c, "low") is None and field(c, "note")}  # fmt: skip
    for note in sorted(lacking):
        console.print(f"no CI: {note}", markup=False)
    for note in notes:
        console.print(note_lines(note), markup=False)
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def draw_compare(rows: list, path: Path, title: str, panels=COMPILE_PANELS) -> Path:
    """Per mode (or system), before and after side by side, one panel per (value, whisker
    ends, title) in `panels`: compile's step ms (IQR) and speedup (its interval) by default.
    `rows` are the two sides' rows (dicts with side, mode or system, and the panels' fields)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle, fit_ticks, fit_title

    ok = [r for r in rows if r.get("status") == "ok"]
    names = list(dict.fromkeys(_name(r) for r in ok))
    # Constrained layout makes room for wrapped titles and labels; tight_layout clips them.
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False,
                             layout="constrained")  # fmt: skip
    sides = list(dict.fromkeys(r.get("side") for r in ok)) or list(SIDES)
    for ax, (key, ends, heading) in zip(axes[0], panels):
        for i, side in enumerate(sides):
            by = {_name(r): r for r in ok if r.get("side") == side}
            _bars(ax, names, by, (i, len(sides)), side, key, ends)
        fit_title(ax, heading, fontsize=9)
        if key in ("speedup", "ratio_vs_floor"):
            ax.axhline(1.0, color="black", linewidth=0.8)
        fit_ticks(ax, names, fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fit_suptitle(fig, title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


FELL_BACK = "fell back to eager"
HATCHES = (None, "//", "..", "\\\\", "--", "++")  # a side's bars: before plain, after hatched


def _name(row: dict) -> str:
    return row.get("mode") or row.get("system") or ""


def _bars(ax, modes, by: dict, at: tuple[int, int], side: str, key: str,
          ends: tuple[str, str]) -> None:  # fmt: skip
    """Side i of n's bars (`at`), left to right in the sides' order (before, after; plain, each
    knob), each side hatched its own way; a mode that fell back to eager past dynamo's
    recompile limit (its row's `fell_back`) cross-hatched and outlined in red, named once in
    the legend: its bar is eager's time, not the compiled one's."""
    (i, n), width = at, 0.8 / at[1]
    xs, heights, lows, highs, colours, fell = [], [], [], [], [], []
    for x, m in enumerate(modes):
        r = by.get(m)
        if r is None or r.get(key) is None:
            continue
        low, high = (r.get(e) if r.get(e) is not None else r[key] for e in ends)
        xs.append(x + (i - (n - 1) / 2) * width)
        heights.append(r[key])
        lows.append(r[key] - low)
        highs.append(high - r[key])
        colours.append(colour(m))
        fell.append(bool(r.get("fell_back")))
    if not xs:
        return
    bars = ax.bar(xs, heights, width=width * 0.95, yerr=[lows, highs], capsize=4,
                  color=colours, hatch=HATCHES[i % len(HATCHES)], edgecolor="black",
                  label=side)  # fmt: skip
    for bar, eager in zip(bars, fell):
        if eager:
            bar.set_hatch("xx")
            bar.set_edgecolor("tab:red")
            bar.set_linewidth(1.5)
            if FELL_BACK not in ax.get_legend_handles_labels()[1]:
                bar.set_label(FELL_BACK)
