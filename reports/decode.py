"""The decode comparison's outputs: CSV columns, the terminal table and `decode.png`.

What it is: `DECODE_COLUMNS`, `render_decode` and `draw_decode`.
What it is not: measurement. Every number drawn here comes from the measured rows, the floor
included (the bytes a step reads over the bandwidth the probe measured in the same run).
Invariant: a missing measurement prints as `-` and plots as nothing, never as a made-up value;
a row whose tokens differ from the reference's says so in the table, not in a footnote.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from reports.csvio import save_figure

DECODE_COLUMNS = [
    "system",
    "status",  # ok | error: <line> | timeout | crashed: <signal>
    "tokens_match",  # the greedy tokens equal tokens_ref's, every row and step
    "tokens_ref",  # engine-eager, or hf-eager when engine-eager did not run
    "first_mismatch",  # "row r step s: a vs b" where they first differ
    "ms_per_step",  # median of every decode step of every round (prefill excluded)
    "ms_q1",
    "ms_q3",
    "ms_iqr",
    "ms_cv",  # std / mean of the same steps
    "rounds",  # timed generations, interleaved with the other systems in rotating order
    "tokens_per_s",  # rows * 1000 / ms_per_step
    "prefill_ms",  # from the generate call to the first token on the host, median of rounds
    "compile_s",  # dynamo's ledger (entire_frame_compile_time_s) during the warm-up
    "ratio_vs_hf_eager",  # geometric mean over rounds of this round's median / hf-eager's
    "ratio_vs_hf_eager_low",  # 95% bootstrap interval over rounds, paired by round
    "ratio_vs_hf_eager_high",
    "ratio_vs_hf_compiled",  # the same against hf-static-compiled
    "ratio_vs_hf_compiled_low",
    "ratio_vs_hf_compiled_high",
    "floor_ms",  # the roofline: max(step_bytes / bandwidth, step_flops / GEMM rate)
    "floor_bound",  # memory | compute: which of the two the floor is
    "ratio_vs_floor",
    "ratio_vs_floor_low",
    "ratio_vs_floor_high",
    "peak_rss_mb",  # the worker's ru_maxrss
    "mean_ms_per_step",  # decode wall time / decode steps, median of rounds
    "cpu_ms_per_step",  # thread CPU time per decode step, median of rounds
    "bandwidth_gbs",  # the probe: fastest full read of a weight-sized tensor
    "bandwidth_median_gbs",
    "gemm_gflops",  # the probe: the step's own matmuls at its rows, fastest pass
    "step_flops",  # 2 rows matmul_params + attention's scores and values
    "step_bytes",  # weight_bytes + kv_bytes
    "weight_bytes",  # every matrix once (a tied head counted once)
    "kv_bytes",  # K and V attended over, mean across the decode steps
    "warmup_s",  # the untimed first generation (where compiling happens)
    "build_s",  # loading the model (and capturing, for engine-captured)
    "capture_s",  # engine-captured: recording the capture list up front
    "frames_compiled",
    "builds_measured",  # frames compiled during the timed rounds: 0, or the times include it
    "recorded_mid_run",  # engine-captured: graphs recorded on a real step
    "recorder",
    "deterministic",  # the warm-up and every round made the same tokens
    "tokens_digest",
    "sample",  # row 0's generated tokens as text (a checkpoint with a tokenizer)
    "attention",
    "linear_layout",  # engine rows: packed (oneDNN-blocked GEMM weights) or dense
    "rows",
    "prompt_len",
    "steps",
    "threads",
    "dtype",
    "device",
    "model",
    "torch_version",
    "hf_version",
    "worker_s",
]


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


def ratio_cell(row: dict, column: str) -> str:
    return ratio(row.get(column), row.get(f"{column}_low"), row.get(f"{column}_high"))


def ratio_short(row: dict, column: str) -> str:
    """'0.86x ±0.05' (the interval's half-width) for a table cell; the CSV has both ends."""
    value, low, high = (row.get(k) for k in (column, f"{column}_low", f"{column}_high"))
    if value is None or low is None or high is None:
        return ratio(value)
    return f"{value:.2f}x ±{(high - low) / 2:.2f}"


def gate_mark(g) -> str:
    return {"pass": "pass", "fail": "FAIL"}.get(g.verdict, "can't tell")


def render_decode(console, rows: list[dict], gates, title: str, probe: dict | None) -> None:
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
        "RSS MB",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        match = r.get("tokens_match")
        table.add_row(
            fmt(r.get("system")),
            fmt(r.get("status")),
            "[red]NO[/red]" if match is False else fmt(match),
            fmt(r.get("ms_per_step"), ".2f")
            + (f" ({r['ms_iqr']:.2f})" if r.get("ms_iqr") is not None else ""),
            fmt(r.get("tokens_per_s"), ",.0f"),
            fmt(r.get("prefill_ms"), ".1f"),
            fmt(
                r.get("compile_s") if r.get("compile_s") is not None else r.get("capture_s"), ".2f"
            ),
            ratio_short(r, "ratio_vs_hf_eager"),
            ratio_short(r, "ratio_vs_hf_compiled"),
            ratio_short(r, "ratio_vs_floor"),
            fmt(r.get("cpu_ms_per_step"), ".2f"),
            fmt(r.get("peak_rss_mb"), ",.0f"),
        )
    console.print(table)
    measured = next((r for r in rows if r.get("floor_ms")), None)
    if measured is not None:
        memory = measured["step_bytes"] / (measured.get("bandwidth_gbs") or float("inf")) / 1e6
        compute = measured["step_flops"] / (measured.get("gemm_gflops") or float("inf")) / 1e6
        console.print(
            f"floor ({measured.get('floor_bound')}-bound) = {measured['floor_ms']:.2f} ms: the "
            f"larger of {measured['step_bytes'] / 1e6:.1f} MB per step (weights "
            f"{measured['weight_bytes'] / 1e6:.1f} MB + K/V {measured['kv_bytes'] / 1e6:.2f} MB) "
            f"/ {measured.get('bandwidth_gbs') or 0:.1f} GB/s = {memory:.2f} ms and "
            f"{measured['step_flops'] / 1e9:.3f} GFLOP / {measured.get('gemm_gflops') or 0:.1f} "
            f"GFLOP/s (the step's own matmuls) = {compute:.2f} ms, both measured in this run",
            markup=False,
        )
    elif probe is not None and probe.get("status") not in (None, "ok"):
        console.print(f"floor: the roofline probe failed ({probe.get('status')})", markup=False)
    for r in rows:
        if r.get("sample") is not None:
            console.print(f"{r['system']} sample (row 0): {r['sample']!r}", markup=False)
        if r.get("tokens_match") is False:
            console.print(
                f"{r['system']}: tokens differ from {r.get('tokens_ref')} at "
                f"{r.get('first_mismatch')}",
                markup=False,
            )
        if r.get("capture_s") is not None:
            console.print(
                f"{r['system']}: {r.get('captured_shapes')} shapes captured up front in "
                f"{r['capture_s']:.2f} s; {r.get('recorded_mid_run')} recorded mid-run",
                markup=False,
            )
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def draw_decode(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in rows if r.get("status") == "ok" and r.get("ms_per_step")]
    names = [r["system"] for r in timed]
    colors = [
        "tab:red"
        if r.get("tokens_match") is False
        else ("tab:blue" if r["system"].startswith("engine") else "tab:gray")
        for r in timed
    ]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    ax = axes[0]
    # The bar is the median; the whisker spans the quartiles of every round's steps.
    whiskers = [
        [r["ms_per_step"] - (r.get("ms_q1") or r["ms_per_step"]) for r in timed],
        [(r.get("ms_q3") or r["ms_per_step"]) - r["ms_per_step"] for r in timed],
    ]
    bars = ax.bar(names, [r["ms_per_step"] for r in timed], yerr=whiskers, capsize=6, color=colors)
    for bar, r in zip(bars, timed):
        label = ratio_cell(r, "ratio_vs_hf_eager") + "\nx hf-eager"
        top = r.get("ms_q3") or bar.get_height()  # above the whisker, not through it
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, top), ha="center", va="bottom")
    floor = next((r["floor_ms"] for r in timed if r.get("floor_ms")), None)
    if floor:
        bound = next((r.get("floor_bound") for r in timed if r.get("floor_ms")), None)
        ax.axhline(floor, color="black", linestyle="--", label=f"{bound} floor {floor:.2f} ms")
        ax.legend(fontsize=8)
    ax.set_title("median decode step (ms), whisker: IQR; ratio [95% interval]")
    ax.set_ylabel("ms per step")
    ax.tick_params(axis="x", rotation=20)

    ax = axes[1]
    # tokens/s of the quartile step times: a slow quartile step is the low whisker.
    rates = [r.get("tokens_per_s") or 0 for r in timed]
    rate_whiskers = [
        [
            rate - r["rows"] * 1e3 / (r.get("ms_q3") or r["ms_per_step"])
            for rate, r in zip(rates, timed)
        ],
        [
            r["rows"] * 1e3 / (r.get("ms_q1") or r["ms_per_step"]) - rate
            for rate, r in zip(rates, timed)
        ],
    ]
    ax.bar(names, rates, yerr=rate_whiskers, capsize=6, color=colors)
    if floor and timed:
        ax.axhline(
            timed[0]["rows"] * 1e3 / floor,
            color="black",
            linestyle="--",
            label="rows / floor",
        )
        ax.legend(fontsize=8)
    ax.set_title("decode tokens per second (rows / step time)")
    ax.set_ylabel("tokens/s")
    ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"decode: {title} (red: tokens differ from the reference)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    plt.close(fig)
    return path
