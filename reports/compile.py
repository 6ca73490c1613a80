"""The compile sweep's outputs: CSV columns, the terminal table and `compiled-decode.png`.

What it is: `COMPILE_COLUMNS` (a superset of PyTorch's dynamo harness columns where they mean
the same thing, plus nanobench's), `render_compile` and `draw_compiled_decode`.
What it is not: measurement. Every number drawn here comes from the measured rows.
Invariant: a missing measurement prints as `-` and plots as nothing, never as a made-up value.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from reports.csvio import save_figure

COMPILE_COLUMNS = [
    # PyTorch's benchmarks/dynamo harness columns, same meaning
    "speedup",
    "abs_latency",
    "compilation_latency",
    "calls_captured",
    "unique_graphs",
    "graph_breaks",
    "fallbacks_to_eager",
    # nanobench's
    "mode",
    "status",
    "shapes",
    "predicted_shapes",
    "builds",
    "reuse",
    "fell_back",
    "predicted_fall_back",
    "guard_kind",
    "predicted_guard_kind",
    "recompile_reasons",
    "recompile_limit",
    "compile_s",
    "inductor_s",
    "build_steps_s",
    "step_ms",  # median of the steady steps of every round's window
    "step_ms_q1",
    "step_ms_q3",
    "step_ms_iqr",
    "step_ms_cv",  # std / mean of the same samples
    "steady_steps",
    "rounds",  # timed windows this mode ran (interleaved with the other modes)
    "step_kind",  # eager | compiled | eager-after-fall-back (the open static arm past the limit)
    "guard_sets_checked",  # after a fall-back: cached guard sets dynamo still checks each call
    "speedup_low",  # 95% bootstrap interval over rounds, paired by round
    "speedup_high",
    "saving_per_step_ms",  # mean over rounds of off's window median minus this mode's
    "saving_per_step_ms_low",
    "saving_per_step_ms_high",
    "saving_needed_ms",  # compile_s / horizon: what a step must save to repay compiling
    "breakeven_steps",
    "breakeven_steps_low",
    "breakeven_steps_high",
    "worth_compiling",  # yes | no | can't tell at this noise
    "worth_rounds_to_decide",  # more rounds likely to decide a can't tell
    "builds_in_windows",  # frames built during the timed windows: 0, or a window built
    "cache",
    "fxgraph_cache_hit",
    "fxgraph_cache_miss",
    "backend",
    "bucketed",
    "torch_version",
    "device",
    "threads",
    "builds_per_step",
    "step_ms_all",
    # --target, reduce-overhead, remedies and --trace
    "target",
    "cudagraph_skips",
    "cudagraph_rerecords",
    "remedies",
    "trace_index",
]


def harness_aliases(row: dict) -> dict:
    """Fill the harness's names from ours: abs_latency is ms, compilation_latency seconds."""
    row["abs_latency"] = row.get("step_ms")
    row["compilation_latency"] = row.get("compile_s")
    return row


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


def gate_mark(g) -> str:
    return {"pass": "pass", "fail": "FAIL"}.get(g.verdict, "can't tell")


def render_compile(console, rows: list[dict], gates, title: str) -> None:
    table = Table(title=title)
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
        "worth it",
    ):
        table.add_column(col, justify="right")
    for r in rows:

        def steps(value) -> str:
            return "never" if value is None else f"{value:,.0f}"

        timed = r.get("mode") != "off" and r.get("step_ms")
        breakeven = (
            f"{steps(r.get('breakeven_steps'))} [{steps(r.get('breakeven_steps_low'))}, "
            f"{steps(r.get('breakeven_steps_high'))}]"
            if timed and r.get("saving_per_step_ms_low") is not None
            else (steps(r.get("breakeven_steps")) if timed else "-")
        )
        step = fmt(r.get("step_ms"), ".2f")
        if r.get("step_ms_iqr") is not None:
            step += f" ({r['step_ms_iqr']:.2f})"
        if r.get("step_kind") == "eager-after-fall-back":
            step += " eager-after-fall-back"
        table.add_row(
            fmt(r.get("mode")),
            fmt(r.get("status")),
            fmt(r.get("shapes")),
            fmt(r.get("builds")),
            fmt(r.get("reuse"), ".0%"),
            fmt(r.get("fell_back")),
            fmt(r.get("predicted_fall_back")),
            fmt(r.get("guard_kind")),
            fmt(r.get("compile_s"), ".2f"),
            step,
            interval(r.get("speedup"), r.get("speedup_low"), r.get("speedup_high"), ".2f", "x"),
            breakeven,
            fmt(r.get("worth_compiling")),
        )
    console.print(table)
    for r in rows:
        reasons = r.get("recompile_reasons") or []
        if reasons:
            console.print(
                f"{r['mode']}: {len(reasons)} recompiles ({r.get('guard_kind')} guards); "
                f"first: {reasons[0]}; last: {reasons[-1]}",
                markup=False,
            )
        if r.get("fell_back"):
            console.print(
                f"{r['mode']}: dynamo hit recompile_limit ({r.get('recompile_limit')}) and runs "
                "this frame eagerly from then on, silently; its step time is eager-after-fall-back "
                f"(each call still checks {r.get('guard_sets_checked')} cached guard sets), "
                "never a compiled speed",
                markup=False,
            )
        if r.get("worth_compiling") == "can't tell at this noise":
            more = r.get("worth_rounds_to_decide")
            console.print(
                f"{r['mode']}: can't tell whether compiling pays off at this noise"
                + (
                    f"; about {more} more rounds would likely decide (--max-rounds)" if more else ""
                ),
                markup=False,
            )
        if r.get("cudagraph_skips") is not None:
            console.print(
                f"{r['mode']}: CUDA graph skips {r['cudagraph_skips']}, "
                f"re-records {r.get('cudagraph_rerecords')} (torch's own counts)",
                markup=False,
            )
        for remedy in r.get("remedies") or ():
            console.print(f"{r['mode']}: remedy {remedy}", markup=False)
        if r.get("trace_index") or r.get("trace_dir"):
            console.print(
                f"{r['mode']}: trace {r.get('trace_index') or r.get('trace_dir')}", markup=False
            )
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def draw_compiled_decode(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r.get("status") == "ok"]
    modes = [r["mode"] for r in measured]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax = axes[0][0]
    builds = [r.get("builds") or 0 for r in measured]
    bars = ax.bar(modes, builds, color="tab:orange")
    for bar, r in zip(bars, measured):
        ax.annotate(
            f"reuse {r.get('reuse', 0):.0%}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    ax.set_title("builds (frames compiled) per mode")
    ax.set_ylabel("builds")

    ax = axes[0][1]
    for r in measured:
        per_step = r.get("builds_per_step") or []
        total, xs, ys = 0, [], []
        for i, b in enumerate(per_step):
            total += b
            xs.append(i + 1)
            ys.append(total)
        if xs:
            ax.step(xs, ys, where="post", label=f"{r['mode']} ({r.get('guard_kind')})")
    limits = {r.get("recompile_limit") for r in measured if r.get("recompile_limit")}
    for limit in limits:
        ax.axhline(limit, color="red", linestyle="--", label=f"recompile_limit {limit}")
    first_reason = next(
        (r["recompile_reasons"][0] for r in measured if r.get("recompile_reasons")), ""
    )
    ax.set_title(
        "cumulative builds per decode step"
        + (f"\nfirst recompile: {first_reason[:60]}" if first_reason else ""),
        fontsize=9,
    )
    ax.set_xlabel("decode step")
    ax.set_ylabel("builds so far")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    timed = [r for r in measured if r.get("step_ms")]
    # The bar is the median; the whisker spans the quartiles of every round's steady steps.
    whiskers = [
        [r["step_ms"] - (r.get("step_ms_q1") or r["step_ms"]) for r in timed],
        [(r.get("step_ms_q3") or r["step_ms"]) - r["step_ms"] for r in timed],
    ]
    labels = [
        r["mode"] + ("\n(eager after fall-back)" if r.get("fell_back") else "") for r in timed
    ]
    ax.bar(labels, [r["step_ms"] for r in timed], yerr=whiskers, capsize=6, color="tab:blue")
    for label, r in zip(labels, timed):
        if r.get("speedup"):
            text = interval(r["speedup"], r.get("speedup_low"), r.get("speedup_high"), ".2f", "x")
            ax.annotate(
                text, (label, r.get("step_ms_q3") or r["step_ms"]), ha="center", va="bottom"
            )
    ax.set_title("median steady step (ms), whisker: IQR; speedup vs off [95% interval]")
    ax.set_ylabel("ms")

    ax = axes[1][1]
    horizon = max(
        [r.get("breakeven_steps") or 0 for r in measured]
        + [len(r.get("builds_per_step") or []) * 100 for r in measured]
        + [100]
    )
    for r in measured:
        if r.get("mode") == "off" or r.get("saving_per_step_ms") is None:
            continue
        xs = [0, horizon]
        saving_s = r["saving_per_step_ms"] / 1e3
        ys = [-(r.get("compile_s") or 0.0), horizon * saving_s - (r.get("compile_s") or 0.0)]
        ax.plot(xs, ys, label=f"{r['mode']} (compile {r.get('compile_s', 0):.1f}s)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("net saving (s) against decode steps served")
    ax.set_xlabel("steps served")
    ax.set_ylabel("net saving (s)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.suptitle(f"compiled decode: {title}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    plt.close(fig)
    return path
