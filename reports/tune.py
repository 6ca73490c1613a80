"""`nanobench tune`'s table and figure: the race's configurations, its decision, its rounds.

What it is: `render_tune(console, rows, lines, title)` (a line per configuration: outcome, step
ms, the ratio to eager and to the best with intervals, compile seconds, breakeven, a start's
cost; then the lines the command words: the space, why the race stopped, the decision, the
lines to paste, each reason) and `draw_race(rounds, path, title)` (each configuration's ratio
to the best at every look, its interval narrowing, a dropped one marked where it dropped).
What it is not: the race or its statistics: every cell and point is a plain row's field.
Invariant: handed plain dicts (`ConfigRow`, `RoundRow` as written), never imports nanobench.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.compile import fmt, interval
from reports.style import fit_table


def _ratio(r: dict, name: str) -> str:
    """'0.38x [0.33, 0.52]'; the best's own 1.00x without its degenerate interval."""
    low, high = r.get(f"{name}_low"), r.get(f"{name}_high")
    same = low is not None and low == high
    return interval(r.get(name), None if same else low, None if same else high, unit="x")


def _compile(r: dict) -> str:
    """'28.3 / 17.6'; a capture list's recording, which every start pays, added: '+ 1.2 rec'."""
    cold, warm, record = r.get("compile_s"), r.get("compile_warm_s"), r.get("record_s")
    if r.get("mode") == "off" or cold is None:
        return "-"
    recorded = f" + {record:.1f} rec" if record is not None else ""
    return (f"{cold:.1f} / {warm:.1f}" if warm is not None else f"{cold:.1f} / -") + recorded


def render_tune(console, rows: list[dict], lines: list[str], title: str) -> None:
    """The configurations, best first among the survivors, then the lines under the table."""
    table = Table(title=Text(title), title_justify="left")
    for col, justify in (("configuration", "left"), ("outcome", "left"), ("step ms", "right"),
                         ("vs eager [95%]", "right"), ("vs best [95%]", "right"),
                         ("compile s cold / warm", "right"), ("breakeven steps", "right"),
                         ("a start s", "right")):  # fmt: skip
        table.add_column(col, justify=justify)
    for r in rows:
        outcome = r["outcome"] + (f" (round {r['dropped_round']})"
                                  if r.get("dropped_round") else "")  # fmt: skip
        unsafe = " (unsafe)" if "unsafe (" in (r.get("unsafe") or "") else ""
        table.add_row(r["config"] + unsafe, outcome, fmt(r.get("step_ms"), ".3f"), _ratio(r, "vs_off"),
                      _ratio(r, "vs_best"), _compile(r), fmt(r.get("breakeven_steps"), ",.0f"),
                      fmt(r.get("cost_per_start_s"), ",.1f"))  # fmt: skip
    console.print(fit_table(console, table))
    for line in lines:
        console.print(line, markup=False)


def draw_race(rounds: list[dict], path: Path, title: str) -> Path | None:
    """Each configuration's ratio to the best at every look, its interval as a band; a
    dropped configuration's last point marked with an x. None, and no file, where no look
    measured a ratio (every compiled configuration out before the first test)."""
    if not any(r.get("vs_best") is not None for r in rounds):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_title

    fig, ax = plt.subplots(figsize=(9, 5))
    for name in dict.fromkeys(r["config"] for r in rounds):
        seen = [r for r in rounds if r["config"] == name and r.get("vs_best") is not None]
        if not seen:
            continue
        x = [r["round"] for r in seen]
        (line,) = ax.plot(x, [r["vs_best"] for r in seen], marker=".", label=name)
        ax.fill_between(x, [r["vs_best_low"] for r in seen], [r["vs_best_high"] for r in seen],
                        color=line.get_color(), alpha=0.15)  # fmt: skip
        if not seen[-1]["alive"]:
            ax.plot([x[-1]], [seen[-1]["vs_best"]], marker="x", markersize=12,
                    color=line.get_color())  # fmt: skip
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2f}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.2f}x"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round (a look after each; x: dropped there)")
    ax.set_ylabel("step time / the best survivor's [interval]")
    ax.legend(fontsize="small")
    fit_title(ax, title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
