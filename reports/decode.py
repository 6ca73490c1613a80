"""The decode comparison's outputs: the terminal table and `decode.png`.

What it is: `render_decode` and `draw_decode`, over rows with the fields of
`nanobench.decode.rows.DecodeRow` (read as attributes; that type's fields are the CSV's columns).
What it is not: measurement. Every number drawn here comes from the measured rows, the floor
included (the bytes a step reads over the bandwidth the probe measured in the same run).
Invariant: a missing measurement prints as `-` and plots as nothing, never as a made-up value;
a row whose tokens differ from the reference's says so in the table, not in a footnote.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.csvio import save_figure
from reports.style import binary_bytes, colour, gate_mark, history_lines, interval_sources


def fmt(value, spec: str = "", dash: str = "-") -> str:
    if value is None or value == "":
        return dash
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return format(value, spec) if spec else str(value)


def ratio(value, low=None, high=None) -> str:
    """'0.81x [0.78, 0.84]': the estimate and its 95% interval when there is one."""
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:.2f}x"
    return f"{value:.2f}x [{low:.2f}, {high:.2f}]"


def ends(row, column: str) -> tuple:
    """A ratio column's estimate and its interval's ends."""
    return tuple(getattr(row, k) for k in (column, f"{column}_low", f"{column}_high"))


def ratio_cell(row, column: str) -> str:
    return ratio(*ends(row, column))


def ratio_short(row, column: str) -> str:
    """'0.86x ±0.05' (the interval's half-width) for a table cell; the CSV has both ends."""
    value, low, high = ends(row, column)
    if value is None or low is None or high is None:
        return ratio(value)
    return f"{value:.2f}x ±{(high - low) / 2:.2f}"


def render_decode(console, rows: list, gates, title: str, probe) -> None:
    """The table, then the floor, each row's notes, the interval sources, history and gates."""
    console.print(decode_table(rows, title))
    print_floor(console, rows, probe)
    for r in rows:
        if r.sample is not None:
            console.print(f"{r.system} sample (row 0): {r.sample!r}", markup=False)
        if r.tokens_match is False:
            console.print(
                f"{r.system}: tokens differ from {r.tokens_ref} at {r.first_mismatch}",
                markup=False,
            )
        if r.capture_s is not None:
            console.print(
                f"{r.system}: {r.captured_shapes} shapes captured up front in "
                f"{r.capture_s:.2f} s; {r.recorded_mid_run} recorded mid-run",
                markup=False,
            )
    columns = ("ratio_vs_hf_eager", "ratio_vs_hf_compiled", "ratio_vs_floor")
    pairs = [(getattr(r, f"{c}_variance"), getattr(r, f"{c}_df")) for r in rows for c in columns]
    for source in interval_sources(pairs):
        console.print(f"ratio intervals: process variance {source}", markup=False)
    for line in history_lines((r.system, r.history) for r in rows):
        console.print(line, markup=False)
    note = next((r.load_note for r in rows if r.load_note), None)
    if note:
        console.print(f"every row: {note}", markup=False)
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def decode_table(rows: list, title: str) -> Table:
    """A line per system: status, tokens, step time, rates, its ratios, CPU time and peak RSS."""
    table = Table(title=title)
    table.add_column("system", no_wrap=True)
    # Ratios: this row over the named row, geometric mean of paired rounds, ± the 95% half-width.
    for col in (
        "status",
        "tokens match",
        "ms/step (IQR)",
        "tok/s",
        "prefill ms",
        "compile s",
        "x hf-eager",
        "x hf-comp",
        "x floor",
        "cpu ms/step",
        "peak RSS",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            fmt(r.system),
            fmt(r.status),
            Text("NO", style="red") if r.tokens_match is False else fmt(r.tokens_match),
            fmt(r.ms_per_step, ".2f") + (f" ({r.ms_iqr:.2f})" if r.ms_iqr is not None else ""),
            fmt(r.tokens_per_s, ",.0f"),
            fmt(r.prefill_ms, ".1f"),
            fmt(r.compile_s if r.compile_s is not None else r.capture_s, ".2f"),
            ratio_short(r, "ratio_vs_hf_eager"),
            ratio_short(r, "ratio_vs_hf_compiled"),
            ratio_short(r, "ratio_vs_floor"),
            fmt(r.cpu_ms_per_step, ".2f"),
            binary_bytes(r.peak_rss_bytes),
        )
    return table


def print_floor(console, rows: list, probe) -> None:
    """How the first floored row's floor was reached, or why the roofline probe gave none."""
    m = next((r for r in rows if r.floor_ms), None)
    if m is not None:
        memory = m.step_bytes / (m.bandwidth_gbs or float("inf")) / 1e6
        compute = m.step_flops / (m.gemm_gflops or float("inf")) / 1e6
        console.print(
            f"floor ({m.floor_bound}-bound) = {m.floor_ms:.2f} ms: the geometric mean of each "
            "round's floor, the larger of its bytes over that round's bandwidth peak and its "
            "flops over that round's GEMM peak; at the median of the rounds' peaks, "
            f"{binary_bytes(m.step_bytes)} per step (weights {binary_bytes(m.weight_bytes)} + "
            f"K/V {binary_bytes(m.kv_bytes)}) / {m.bandwidth_gbs or 0:.1f} GB/s = {memory:.2f} ms "
            f"and {m.step_flops / 1e9:.3f} GFLOP / {m.gemm_gflops or 0:.1f} GFLOP/s (a large "
            f"square GEMM) = {compute:.2f} ms",
            markup=False,
        )
        if m.floor_probe and m.floor_probe != "ok":
            console.print(f"floor: the probe {m.floor_probe}", markup=False)
    elif probe is not None and probe.status != "ok":
        console.print(f"floor: the roofline probe failed ({probe.status})", markup=False)


def draw_decode(rows: list, path: Path, title: str) -> Path:
    """Step time and tokens/s per system, each in its own colour; a mismatching row hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle

    timed = [r for r in rows if r.status == "ok" and r.ms_per_step]
    floored = next((r for r in timed if r.floor_ms), None)
    # Constrained layout makes room for wrapped titles and labels; tight_layout clips them.
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    step_time_panel(axes[0], timed, floored)
    rate_panel(axes[1], timed, floored)
    fit_suptitle(fig, f"{title} (hatched: tokens differ from the reference)")
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


def system_bars(ax, timed: list, heights: list, whiskers: list) -> list:
    """A bar per system in its own colour, with whiskers; a row whose tokens differ hatched."""
    colors = [colour(r.system) for r in timed]
    bars = ax.bar([r.system for r in timed], heights, yerr=whiskers, capsize=6, color=colors)
    for bar, r in zip(bars, timed):
        bar.set_hatch("//" if r.tokens_match is False else "")
    return bars


def step_time_panel(ax, timed: list, floored) -> None:
    """Left: the median step time per system, its IQR, its ratio to hf-eager and the floor."""
    from reports.figure_text import bar_labels

    # The bar is the median; the whisker spans the quartiles of every round's steps.
    whiskers = [
        [r.ms_per_step - (r.ms_q1 or r.ms_per_step) for r in timed],
        [(r.ms_q3 or r.ms_per_step) - r.ms_per_step for r in timed],
    ]
    system_bars(ax, timed, [r.ms_per_step for r in timed], whiskers)
    # Above the whisker, not through it, and inside the axes: never in the title's space.
    labels = [ratio_cell(r, "ratio_vs_hf_eager") + "\nx hf-eager" for r in timed]
    tops = [r.ms_q3 or r.ms_per_step for r in timed]
    bar_labels(ax, range(len(timed)), tops, labels, slots=len(timed))
    if floored is not None:
        ax.axhline(
            floored.floor_ms,
            color="black",
            linestyle="--",
            label=f"{floored.floor_bound} floor {floored.floor_ms:.2f} ms",
        )
        ax.legend(fontsize=8)
    ax.set_title("median decode step (ms), whisker: IQR; ratio [95% interval]")
    ax.set_ylabel("ms per step")
    ax.tick_params(axis="x", rotation=20)


def rate_panel(ax, timed: list, floored) -> None:
    """Right: tokens/s per system, whiskers from the quartile step times, rows over the floor."""
    # tokens/s of the quartile step times: a slow quartile step is the low whisker. The rate is
    # rounded in the row, so a whisker over a single step's spread can come out a hair below 0.
    rates = [r.tokens_per_s or 0 for r in timed]
    rate_whiskers = [
        [
            max(0.0, rate - r.rows * 1e3 / (r.ms_q3 or r.ms_per_step))
            for rate, r in zip(rates, timed)
        ],
        [
            max(0.0, r.rows * 1e3 / (r.ms_q1 or r.ms_per_step) - rate)
            for rate, r in zip(rates, timed)
        ],
    ]
    system_bars(ax, timed, rates, rate_whiskers)
    if floored is not None:
        ax.axhline(
            floored.rows * 1e3 / floored.floor_ms,
            color="black",
            linestyle="--",
            label="rows / floor",
        )
        ax.legend(fontsize=8)
    ax.set_title("decode tokens per second (rows / step time)")
    ax.set_ylabel("tokens/s")
    ax.tick_params(axis="x", rotation=20)
