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
    "ms_per_step",  # median over repeats of each repeat's median decode step (prefill excluded)
    "tokens_per_s",  # rows * 1000 / ms_per_step
    "prefill_ms",  # from the generate call to the first token on the host, median of repeats
    "compile_s",  # dynamo's ledger (entire_frame_compile_time_s) during the warm-up
    "ratio_vs_hf_eager",  # ms_per_step / hf-eager's, same sweep
    "ratio_vs_hf_compiled",  # ms_per_step / hf-static-compiled's, same sweep
    "floor_ms",  # step_bytes / bandwidth_gbs
    "ratio_vs_floor",
    "peak_rss_mb",  # the worker's ru_maxrss
    "mean_ms_per_step",  # decode wall time / decode steps, median of repeats
    "cpu_ms_per_step",  # thread CPU time per decode step, median of repeats
    "ms_per_step_repeats",
    "bandwidth_gbs",  # the probe: fastest full read of a weight-sized tensor
    "bandwidth_median_gbs",
    "step_bytes",  # weight_bytes + kv_bytes
    "weight_bytes",  # every matrix once (a tied head counted once)
    "kv_bytes",  # K and V attended over, mean across the decode steps
    "warmup_s",  # the untimed first generation (where compiling happens)
    "build_s",  # loading the model (and capturing, for engine-captured)
    "capture_s",  # engine-captured: recording the capture list up front
    "frames_compiled",
    "builds_measured",  # frames compiled during the timed repeats: 0, or the times include it
    "recorded_mid_run",  # engine-captured: graphs recorded on a real step
    "recorder",
    "deterministic",  # the warm-up and every repeat made the same tokens
    "tokens_digest",
    "sample",  # row 0's generated tokens as text (a checkpoint with a tokenizer)
    "attention",
    "linear_layout",  # engine rows: packed (oneDNN-blocked GEMM weights) or dense
    "rows",
    "prompt_len",
    "steps",
    "repeat",
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


def ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def render_decode(console, rows: list[dict], gates, title: str, probe: dict | None) -> None:
    table = Table(title=title)
    table.add_column("system", no_wrap=True)
    # Ratios are this row's ms/step over the named row's, measured in the same sweep.
    for col in (
        "status",
        "tokens match",
        "ms/step",
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
            fmt(r.get("ms_per_step"), ".2f"),
            fmt(r.get("tokens_per_s"), ",.0f"),
            fmt(r.get("prefill_ms"), ".1f"),
            fmt(
                r.get("compile_s") if r.get("compile_s") is not None else r.get("capture_s"), ".2f"
            ),
            ratio(r.get("ratio_vs_hf_eager")),
            ratio(r.get("ratio_vs_hf_compiled")),
            ratio(r.get("ratio_vs_floor")),
            fmt(r.get("cpu_ms_per_step"), ".2f"),
            fmt(r.get("peak_rss_mb"), ",.0f"),
        )
    console.print(table)
    measured = next((r for r in rows if r.get("floor_ms")), None)
    if measured is not None:
        console.print(
            f"floor: {measured['step_bytes'] / 1e6:.1f} MB per step (weights "
            f"{measured['weight_bytes'] / 1e6:.1f} MB + K/V {measured['kv_bytes'] / 1e6:.2f} MB) "
            f"/ {measured['bandwidth_gbs']:.1f} GB/s (fastest of the probe's reads; median "
            f"{measured.get('bandwidth_median_gbs') or 0:.1f}) = {measured['floor_ms']:.2f} ms",
            markup=False,
        )
    elif probe is not None and probe.get("status") not in (None, "ok"):
        console.print(f"floor: the bandwidth probe failed ({probe.get('status')})", markup=False)
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
        console.print(f"{'pass' if g.passed else 'FAIL'} {g.name}: {g.detail}", markup=False)


def draw_decode(rows: list[dict], path: Path) -> Path:
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
    bars = ax.bar(names, [r["ms_per_step"] for r in timed], color=colors)
    for bar, r in zip(bars, timed):
        label = ratio(r.get("ratio_vs_hf_eager")) + " hf-eager"
        ax.annotate(
            label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom"
        )
    floor = next((r["floor_ms"] for r in timed if r.get("floor_ms")), None)
    if floor:
        ax.axhline(floor, color="black", linestyle="--", label=f"floor {floor:.2f} ms")
        ax.legend(fontsize=8)
    ax.set_title("median decode step (ms), prefill excluded")
    ax.set_ylabel("ms per step")
    ax.tick_params(axis="x", rotation=20)

    ax = axes[1]
    ax.bar(names, [r.get("tokens_per_s") or 0 for r in timed], color=colors)
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
    first = timed[0] if timed else {}
    fig.suptitle(
        f"decode: {first.get('rows', '?')} rows, {first.get('prompt_len', '?')}-token prompts, "
        f"{first.get('steps', '?')} steps, {first.get('threads', '?')} threads "
        "(red: tokens differ from the reference)"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    plt.close(fig)
    return path
