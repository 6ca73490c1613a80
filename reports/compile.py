"""The compile sweep's outputs: CSV columns, the terminal table and `compiled-decode.png`.

What it is: `render_compile` and `draw_compiled_decode`, over the sweep's typed rows (the CSV's
columns are the row type's fields, `nanobench.compile.rows.CompileRow`, documented there).
What it is not: measurement. Every number drawn here comes from the measured rows.
Invariant: a missing measurement prints as `-` and plots as nothing, never as a made-up value.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.csvio import save_figure
from reports.style import (
    colour,
    counted,
    gate_mark,
    history_lines,
    interval_sources,
    note_lines,
)


def fmt(value, spec: str = "", dash: str = "-") -> str:
    if value is None or value == "":
        return dash
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec) if spec else str(value)


def interval(value, low, high, spec: str = ".2f", unit: str = "") -> str:
    """'0.81x [0.78, 0.84]'; the point alone without an interval; '-' without a value."""
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:{spec}}{unit}"
    return f"{value:{spec}}{unit} [{low:{spec}}, {high:{spec}}]"


def what_would_decide(r) -> str:
    """More processes when theirs disagree past the gap, else about how many more rounds."""
    if r.worth_processes_bind:
        return (
            "; its processes disagree by more than the gap: more --processes "
            "would narrow it, more rounds would not"
        )
    more = r.worth_rounds_to_decide
    return f"; about {more} more rounds would likely decide (--max-rounds)" if more else ""


def render_compile(console, rows: list, gates, title: str, notes=(), *, horizon: int) -> None:
    """The sweep's table, each row's notes (reasons, fall-back, remedies), the run's `notes`
    (what to measure next), the gates; every "worth it" says the `horizon` (steps) behind it."""
    console.print(compile_table(rows, title, horizon))
    row_notes(console, rows, horizon)
    for line in notes:
        console.print(line, markup=False)
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def compile_table(rows: list, title: str, horizon: int) -> Table:
    """One line per mode: builds, reuse, fall-back, compile s, step ms, speedup, breakeven."""
    # Text, not markup: a target spec such as "step.py:factory: cpu" is not an emoji code.
    table = Table(title=Text(title))
    for col in (
        "mode",
        "status",
        "shapes",
        "builds",
        "reuse",
        "fell back",
        "predicted",
        "guard",
        "compile s",
        "step ms (IQR)",
        "speedup [95%]",
        "breakeven [95%]",
        f"worth it at {horizon:,} steps",
    ):
        table.add_column(col, justify="right")
    for r in rows:

        def steps(value) -> str:
            return "never" if value is None else f"{value:,.0f}"

        # A failed row has no derived figures: its breakeven is "-", not "never".
        timed = r.mode != "off" and r.step_ms and r.status == "ok"
        breakeven = (
            f"{steps(r.breakeven_steps)} [{steps(r.breakeven_steps_low)}, "
            f"{steps(r.breakeven_steps_high)}]"
            if timed and r.saving_per_step_ms_low is not None
            else (steps(r.breakeven_steps) if timed else "-")
        )
        step = fmt(r.step_ms, ".2f")
        if r.step_ms_iqr is not None:
            step += f" ({r.step_ms_iqr:.2f})"
        if r.step_kind == "eager-after-fall-back":
            step += " eager-after-fall-back"
        table.add_row(
            fmt(r.mode),
            fmt(r.status),
            fmt(r.shapes),
            fmt(r.builds),
            fmt(r.reuse, ".0%"),
            fmt(r.fell_back),
            fmt(r.predicted_fall_back),
            fmt(r.guard_kind),
            fmt(r.compile_s, ".2f"),
            step,
            interval(r.speedup, r.speedup_low, r.speedup_high, ".2f", "x"),
            breakeven,
            worth(r),
        )
    return table


def worth(r) -> str:
    """'yes', or both starts' answers where they differ: 'no cold / yes warm'."""
    if r.worth_compiling_warm is None or r.worth_compiling_warm == r.worth_compiling:
        return fmt(r.worth_compiling)
    short = {"can't tell at this noise": "can't tell"}
    cold, warm = (short.get(v, v) for v in (r.worth_compiling, r.worth_compiling_warm))
    return f"{cold} cold / {warm} warm"


def counts_line(r, name: str) -> str:
    """'dynamic: one call: 3 graphs, 2 breaks, 1 break site (f.py:12, 2 hits); the run: 2
    builds, 1 recompile (limit 8)': every count under the name `explain` and `--vs` give it."""
    call = ""
    if r.graphs_per_call is not None:
        sites = ", ".join(
            f"{Path(line).name}, {counted(n, 'hit')}"
            for line, n in zip(r.break_lines or [], r.break_hits or [])
        )
        call = (
            f"one call: {counted(r.graphs_per_call, 'graph')}, "
            f"{counted(r.breaks_per_call, 'break')}, {counted(r.break_sites, 'break site')}"
            + (f" ({sites})" if sites else "")
            + "; "
        )
    return (
        f"{name}: {call}the run: {counted(r.builds, 'build')}, "
        f"{counted(r.recompiles or 0, 'recompile')} (limit {r.recompile_limit})"
    )


def why(r) -> list[str]:
    """Why a mode measured what it did, a line each: its counts, its recompiles and their
    guards, the fall-back and the guard that sent it there, the remedies. Named by side where
    the row has one, so a before/after run (`--vs`, `compare`) says each side's why."""
    name = f"{r.side} {r.mode}" if getattr(r, "side", "") else r.mode
    lines = []
    if r.builds is not None and r.mode != "off":
        lines.append(counts_line(r, name))
    reasons = r.recompile_reasons or []
    if reasons:
        # one guard failing every time is said once, not as its own first and last
        which = (f"first: {reasons[0]}; last: {reasons[-1]}" if len(set(reasons)) > 1
                 else f"{'each' if len(reasons) > 1 else 'the'} failed guard: {reasons[0]}")  # fmt: skip
        lines.append(
            f"{name}: {counted(len(reasons), 'recompile')} ({r.guard_kind} guards); {which}"
        )
    if r.fell_back:
        lines.append(
            f"{name}: dynamo hit recompile_limit ({r.recompile_limit}) and runs this frame "
            "eagerly from then on, silently; its step time is eager-after-fall-back (each call "
            f"still checks {r.guard_sets_checked} cached guard sets), never a compiled speed"
            + (f"; the guard that sent it there: {reasons[-1]}" if reasons else "")
        )
    if getattr(r, "predicted_by", None) and r.predicted_fall_back is not None:
        said = "yes" if r.predicted_fall_back else "no"
        lines.append(f"{name}: fall-back predicted {said} by {r.predicted_by}")
    lines += [f"{name}: remedy {remedy}" for remedy in r.remedies or ()]
    return lines


def row_notes(console, rows: list, horizon: int) -> None:
    """What each row says beyond its cells, one line each, in the order of the rows."""
    for r in rows:
        for line in why(r):
            console.print(note_lines(line), markup=False)
        if r.worth_compiling == "can't tell at this noise":
            console.print(
                f"{r.mode}: can't tell whether compiling pays off within {horizon:,} steps "
                "at this noise" + what_would_decide(r),
                markup=False,
            )
        if r.worth_compiling_warm is not None and r.compile_warm_s is not None:
            console.print(
                f"{r.mode}: warm start (a later process over the caches the first filled): "
                f"compile {r.compile_warm_s:.2f} s, breakeven "
                + (
                    "never"
                    if r.breakeven_steps_warm is None
                    else f"{r.breakeven_steps_warm:,.0f} steps"
                )
                + f", worth compiling at {horizon:,} steps {r.worth_compiling_warm}",
                markup=False,
            )
        if r.suspect:
            console.print(f"{r.mode}: suspect: {r.suspect}", markup=False)
        if r.cudagraph_skips is not None:
            console.print(
                f"{r.mode}: CUDA graph skips {r.cudagraph_skips}, "
                f"re-records {r.cudagraph_rerecords} (torch's own counts)",
                markup=False,
            )
        if r.trace_index or r.trace_dir:
            console.print(f"{r.mode}: trace {r.trace_index or r.trace_dir}", markup=False)
    for source in interval_sources((r.speedup_variance, r.speedup_df) for r in rows):
        console.print(f"speedup intervals: process variance {source}", markup=False)
    for line in history_lines((r.mode, r.history) for r in rows):
        console.print(line, markup=False)
    note = next((r.load_note for r in rows if r.load_note), None)
    if note:
        console.print(f"every row: {note}", markup=False)


def draw_compiled_decode(rows: list, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle

    measured = [r for r in rows if r.status == "ok"]
    # Constrained layout makes room for wrapped titles and labels; tight_layout clips them.
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), layout="constrained")
    builds_panel(axes[0][0], measured)
    cumulative_panel(axes[0][1], measured)
    step_panel(axes[1][0], measured)
    saving_panel(axes[1][1], measured)
    fit_suptitle(fig, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


def builds_panel(ax, measured: list) -> None:
    """Builds (frames compiled) per mode, each bar labelled with its reuse."""
    from reports.figure_text import bar_labels, fit_ticks

    modes = [r.mode for r in measured]
    builds = [r.builds or 0 for r in measured]
    xs = range(len(measured))
    ax.bar(xs, builds, color=[colour(m) for m in modes])
    fit_ticks(ax, modes)
    reuse = [f"reuse {(r.reuse or 0):.0%}" for r in measured]
    bar_labels(ax, xs, builds, reuse, slots=len(measured), fontsize="medium")
    ax.set_title("builds (frames compiled) per mode")
    ax.set_ylabel("builds")


def cumulative_panel(ax, measured: list) -> None:
    """Cumulative builds per decode step, against the recompile limit."""
    from reports.figure_text import fit_title

    for r in measured:
        per_step = r.builds_per_step or []
        total, xs, ys = 0, [], []
        for i, b in enumerate(per_step):
            total += b
            xs.append(i + 1)
            ys.append(total)
        if xs:
            ax.step(xs, ys, where="post", color=colour(r.mode), label=f"{r.mode} ({r.guard_kind})")
    limits = {r.recompile_limit for r in measured if r.recompile_limit}
    for limit in limits:
        ax.axhline(limit, color="red", linestyle="--", label=f"recompile_limit {limit}")
    first_reason = next((r.recompile_reasons[0] for r in measured if r.recompile_reasons), "")
    # The reason whole, wrapped to the panel: its tail (expected, actual) is what it says.
    fit_title(
        ax,
        "cumulative builds per decode step"
        + (f"\nfirst recompile: {first_reason}" if first_reason else ""),
        fontsize=9,
    )
    ax.set_xlabel("decode step")
    ax.set_ylabel("builds so far")
    ax.legend(fontsize=8)


def step_panel(ax, measured: list) -> None:
    """Median steady step per mode, IQR whiskers, speedup against off with its interval."""
    from reports.figure_text import bar_labels, fit_ticks, fit_title

    timed = [r for r in measured if r.step_ms]
    # The bar is the median; the whisker spans the quartiles of every round's steady steps.
    whiskers = [
        [r.step_ms - (r.step_ms_q1 or r.step_ms) for r in timed],
        [(r.step_ms_q3 or r.step_ms) - r.step_ms for r in timed],
    ]
    labels = [r.mode + (" (eager after fall-back)" if r.fell_back else "") for r in timed]
    xs = range(len(timed))
    ax.bar(xs, [r.step_ms for r in timed], yerr=whiskers, capsize=6,
           color=[colour(r.mode) for r in timed])  # fmt: skip
    fit_ticks(ax, labels)
    # Above the whisker, inside the axes: a label over the top bar never reaches the title.
    said = [
        interval(r.speedup, r.speedup_low, r.speedup_high, ".2f", "x") if r.speedup else ""
        for r in timed
    ]
    bar_labels(ax, xs, [r.step_ms_q3 or r.step_ms for r in timed], said, slots=len(timed))
    fit_title(ax, "median steady step (ms), whisker: IQR; speedup vs off [95% interval]")
    ax.set_ylabel("ms")


def saving_panel(ax, measured: list) -> None:
    """Net saving against decode steps served: each mode's line from minus its compile seconds."""
    horizon = max(
        [r.breakeven_steps or 0 for r in measured]
        + [len(r.builds_per_step or []) * 100 for r in measured]
        + [100]
    )
    for r in measured:
        if r.mode == "off" or r.saving_per_step_ms is None:
            continue
        xs = [0, horizon]
        saving_s = r.saving_per_step_ms / 1e3
        ys = [-(r.compile_s or 0.0), horizon * saving_s - (r.compile_s or 0.0)]
        ax.plot(xs, ys, color=colour(r.mode), label=f"{r.mode} (compile {(r.compile_s or 0):.1f}s)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("net saving (s) against decode steps served")
    ax.set_xlabel("steps served")
    ax.set_ylabel("net saving (s)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
