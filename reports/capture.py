"""Tables and the diagram for `nanobench capture`: runs, the pool table, what a step holds.

What it is: the CSV columns of `capture.csv` (one file, a `table` column naming which of the
five tables a row belongs to: `run`, `record`, `pool`, `workspace`, `held`), the terminal
tables, and `captured-decode-replay.png`.
What it is not: a measurement; it formats the rows it is handed and never imports the engine.
Invariant: the diagram is drawn from the rows, never from constants; byte counts print in binary
units (reports.style.binary_bytes) next to exact bytes where the seed log does.

Columns (run): steps, captures_open (shapes an unbucketed run presents: one per step),
captures_closed (graphs the bucketed run went through), predicted_closed (from the bucket
arithmetic), recorded_mid_run (graphs recorded on a real step, in front of a request),
replays, reuse (1 - recorded_mid_run / steps), run_ms_eager / run_ms_replayed (one run's
decode steps, median over the timed rounds), step_ms_eager / step_ms_replayed with _q1, _q3,
_iqr (median and quartiles of every timed decode step of every round; both engines fed the same
tokens, interleaved in rounds with rotating order), ratio_vs_eager (replayed / eager step
time, geometric mean over rounds of the two window medians) with ratio_vs_eager_low / _high (its
95% bootstrap interval, paired by round; empty under 5 rounds), replay_not_slower (pass, fail or
inconclusive: ratio_vs_eager at most 1.0 on that interval; a gate on CUDA, informational on a
CPU), rounds (paired rounds), max_abs_diff (replayed against eager logits over every step of
the untimed correctness drive), mode, captured_up_front, capture_s (the up-front walk's wall
seconds: each shape's gates, synthetic batch and recording), capture_pool_bytes (CUDA: the
pool's reserved growth over the up-front walk), graphs_recorded, record_s_total (the recorder
calls' seconds summed over the run's graphs), record_s_per_graph (their mean), recorder
(whose seconds: cuda_graph_recorder, or eager_recorder on a CPU). Every timed step is in
`capture-samples.csv` (run_length, system = eager | replayed, process, round, step, ms, built,
steady).
Columns (record): steps, mode, rows, width (the graph's shape), record_s (wall seconds of
its recorder's call, the device synchronised before and after), recorder, kernel, device, and
on CUDA pool_growth_bytes, peak_bytes, library_bytes (what a library took outside every
graph's pool meanwhile, already taken off the other two).
Columns (pool): kernel, width_multiple, shapes, shared_pool_bytes (the largest workspace),
private_pools_bytes (their sum), sharing_ratio (these three are the score-rectangle
formula), traced_shared_pool_bytes (the largest traced workspace of the list),
traced_private_pools_bytes (their sum), graph_outputs_bytes (the logits of every graph, had
each kept its own), shared_output_pool_bytes (the largest traced peak, logits counted: the pool
when every graph copies its logits out), shared_output_bytes (the one logits buffer every graph
writes), capture_bytes (their sum: what the engine's capture holds), per_graph_capture_bytes
(traced shared pool + graph outputs: a capture keeping each graph's logits), and on CUDA *_measured_bytes and *_diff_pct (against the formula).
Columns (workspace): kernel, rows, width, traced_bytes (peak of the decode forward's
intermediates, traced under fake tensors), formula_bytes (the score rectangle), difference_bytes
(traced - formula: what the formula leaves out), outputs_bytes (the graph's logits buffer),
peak_bytes (intermediates and output together), heads, dtype.
Columns (held): item, reference_bytes, triton_bytes.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from reports.csvio import save_figure, write_rows
from reports.style import binary_bytes, colour, gate_mark

MIB = 2**20


def pct(value) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def write_capture_csv(path: Path, rows: list[dict], columns: list[str]) -> Path:
    return write_rows(path, rows, columns)


def render_capture(console, rows: list, gates, notes: list[str] = ()) -> None:
    runs = [r for r in rows if r.table == "run"]
    records = [r for r in rows if r.table == "record"]
    pools = [r for r in rows if r.table == "pool"]
    held = [r for r in rows if r.table == "held"]
    workspace = [r for r in rows if r.table == "workspace"]
    if runs:
        console.print(run_table(runs))
    if records:
        console.print(record_table(records))
    for note in notes:
        console.print(note, markup=False)
    if pools:
        console.print(pool_table(pools))
    if workspace:
        console.print(workspace_table(workspace))
    if held:
        console.print(held_table(held))
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def step_cell(median: float | None, iqr: float | None) -> str:
    """'0.412 (0.021)': the median ms per decode step and its IQR."""
    return "-" if median is None else f"{median:.3f} ({iqr:.3f})"


def ratio_cell(r) -> str:
    """'1.012 [0.998, 1.027]', or the estimate alone before there are enough rounds."""
    if r.ratio_vs_eager is None:
        return "-"
    if r.ratio_vs_eager_low is None:
        return f"{r.ratio_vs_eager:.3f} [no CI yet]"
    return f"{r.ratio_vs_eager:.3f} [{r.ratio_vs_eager_low:.3f}, {r.ratio_vs_eager_high:.3f}]"


def run_table(runs: list) -> Table:
    first = runs[0]
    up_front = first.mode == "up-front"
    table = Table(
        title=(
            f"captured decode, {first.mode}: {first.rows} rows, {first.prompt_len}-token "
            f"prompt, width multiple {first.width_multiple}, {first.kernel} on "
            f"{first.device}"
        )
    )
    # Two-line headers: with the timing columns the table still fits 160 columns (piped).
    cols = ["steps", "captures open", "captures\nclosed", "recorded\nmid-run", "replays", "reuse"]
    cols += ["eager ms\n(IQR)", "replayed ms\n(IQR)", "replayed/eager\n[95% CI]"]
    cols += ["rounds", "max\n|diff|"]
    if up_front:
        cols += ["up-front\nshapes", "up-front\ns"]
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for r in runs:
        cells = [
            str(r.steps),
            str(r.captures_open),
            str(r.captures_closed),
            str(r.recorded_mid_run),
            str(r.replays),
            f"{r.reuse:.0%}",
            step_cell(r.step_ms_eager, r.step_ms_eager_iqr),
            step_cell(r.step_ms_replayed, r.step_ms_replayed_iqr),
            ratio_cell(r),
            str(r.rounds),
            f"{r.max_abs_diff:.3g}",
        ]
        if up_front:
            cells += [str(r.captured_up_front), f"{r.capture_s:.3f}"]
        table.add_row(*cells)
    return table


def record_table(records: list) -> Table:
    """One line per recorded graph: its run, shape and record seconds; on CUDA its memory."""
    measured = any(r.pool_growth_bytes is not None for r in records)
    table = Table(
        title="each graph recorded: wall seconds of its recorder's call, device synchronised"
    )
    cols = ["steps", "mode", "graph (rows x width)", "record s", "recorder"]
    if measured:
        cols += ["pool growth", "peak", "library"]
    for col in cols:
        table.add_column(col, justify="right")
    for r in records:
        cells = [str(r.steps), r.mode, f"{r.rows} x {r.width}", f"{r.record_s:.4f}", r.recorder]
        if measured:
            cells += [binary_bytes(v) for v in (r.pool_growth_bytes, r.peak_bytes, r.library_bytes)]
        table.add_row(*cells)
    return table


def pool_table(pools: list) -> Table:
    first = pools[0]
    measured = any(r.shared_pool_measured_bytes is not None for r in pools)
    table = Table(
        title=(
            f"the capture pool at {first.capture_rows} rows x {first.capture_tokens} tokens, "
            f"{first.heads} heads, fp32 scores"
        )
    )
    traced = any(r.traced_shared_pool_bytes is not None for r in pools)
    cols = ["kernel", "width multiple", "shapes", "shared pool", "private pools", "ratio"]
    if traced:
        cols += ["traced shared", "traced private", "graph outputs", "engine holds", "per-graph"]
    if measured:
        cols += ["shared measured", "diff", "private measured", "diff"]
    for col in cols:
        table.add_column(col, justify="right")
    for r in pools:
        ratio = "-" if r.sharing_ratio is None else f"{r.sharing_ratio:.1f}x"
        cells = [
            r.kernel,
            "-" if r.width_multiple is None else str(r.width_multiple),
            f"{r.shapes:,}",
            binary_bytes(r.shared_pool_bytes),
            binary_bytes(r.private_pools_bytes),
            ratio,
        ]
        if traced:
            cells += [
                binary_bytes(r.traced_shared_pool_bytes),
                binary_bytes(r.traced_private_pools_bytes),
                binary_bytes(r.graph_outputs_bytes),
                binary_bytes(r.capture_bytes),
                binary_bytes(r.per_graph_capture_bytes),
            ]
        if measured:
            cells += [
                binary_bytes(r.shared_pool_measured_bytes),
                pct(r.shared_pool_diff_pct),
                binary_bytes(r.private_pools_measured_bytes),
                pct(r.private_pools_diff_pct),
            ]
        table.add_row(*cells)
    return table


def workspace_table(rows: list) -> Table:
    first = rows[0]
    table = Table(
        title=(
            f"what one recorded graph holds, traced from the forward at width {first.width}, "
            f"{first.heads} heads, {first.dtype} (formula: the fp32 score rectangle)"
        )
    )
    cols = ["kernel", "rows", "traced workspace", "formula", "traced - formula", "outputs kept"]
    for col in cols:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r.kernel,
            str(r.rows),
            binary_bytes(r.traced_bytes),
            binary_bytes(r.formula_bytes),
            binary_bytes(r.difference_bytes),
            binary_bytes(r.outputs_bytes),
        )
    return table


def held_table(held: list) -> Table:
    table = Table(title="what a decode step holds at the top of the list")
    for col in ("item", "reference bytes", "triton bytes"):
        table.add_column(col, justify="right" if col != "item" else "left")
    for r in held:
        table.add_row(r.item, f"{r.reference_bytes:,}", f"{r.triton_bytes:,}")
    return table


def plot_capture(path: Path, rows: list, heading: str) -> Path:
    """The four panels under `heading` (reports.style.title: model, device, dtype, shape)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle

    runs = [r for r in rows if r.table == "run"]
    pools = [r for r in rows if r.table == "pool" and r.kernel == "reference"]
    held = [r for r in rows if r.table == "held"]
    # Constrained layout makes room for wrapped titles and labels; tight_layout clips them.
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), layout="constrained")
    (ax_ms, ax_count), (ax_pool, ax_held) = axes
    step_panel(ax_ms, runs)
    count_panel(ax_count, runs)
    if pools:
        pool_panel(ax_pool, pools)
    if held:
        held_panel(ax_held, held)
    fit_suptitle(fig, heading)
    return save_figure(fig, path)


def count_panel(ax_count, runs: list) -> None:
    """Graphs to record per run length: the open set against the closed (bucketed) set."""
    labels = [str(r.steps) for r in runs]
    xs = range(len(runs))
    ax_count.bar(
        [x - 0.2 for x in xs], [r.captures_open for r in runs], 0.4, label="open (per step)"
    )
    ax_count.bar(
        [x + 0.2 for x in xs], [r.captures_closed for r in runs], 0.4, label="closed (bucketed)"
    )
    ax_count.set_yscale("log")
    ax_count.set_xticks(list(xs), labels)
    ax_count.set_xlabel("decode steps")
    ax_count.set_ylabel("graphs to record")
    ax_count.set_title("captures: open set against closed set")
    ax_count.legend()


def pool_panel(ax_pool, pools: list) -> None:
    """The reference list's pools per width multiple: shared (a max) against private (a sum)."""
    px = range(len(pools))
    ax_pool.bar(
        [x - 0.2 for x in px],
        [r.shared_pool_bytes / MIB for r in pools],
        0.4,
        label="shared",
    )
    ax_pool.bar(
        [x + 0.2 for x in px],
        [r.private_pools_bytes / MIB for r in pools],
        0.4,
        label="private",
    )
    for key, x_off, marker, name in (
        ("traced_shared_pool_bytes", -0.2, "ko", "shared, traced"),
        ("traced_private_pools_bytes", 0.2, "ks", "private, traced"),
    ):
        if all(getattr(r, key) is not None for r in pools):
            ax_pool.plot(
                [x + x_off for x in px],
                [getattr(r, key) / MIB for r in pools],
                marker,
                label=name,
            )
    measured = [r.shared_pool_measured_bytes for r in pools]
    if any(m is not None for m in measured):
        ax_pool.plot(
            [x - 0.2 for x, m in zip(px, measured, strict=True) if m is not None],
            [m / MIB for m in measured if m is not None],
            "k^",
            label="shared, measured",
        )
    ax_pool.set_xticks(list(px), [f"{r.width_multiple}\n({r.shapes} shapes)" for r in pools])
    ax_pool.set_yscale("log")
    ax_pool.set_xlabel("width multiple")
    ax_pool.set_ylabel("MiB")
    ax_pool.set_title("shared pool (a max) against one per shape (a sum): formula bars")
    ax_pool.legend()


def held_panel(ax_held, held: list) -> None:
    """What a step holds at the top of the list, per kernel, on a log axis."""
    hy = range(len(held))
    ax_held.barh(
        [y + 0.2 for y in hy],
        [max(r.reference_bytes, 1) for r in held],
        0.4,
        label="reference",
        color=colour("reference"),
    )
    ax_held.barh(
        [y - 0.2 for y in hy],
        [max(r.triton_bytes, 1) for r in held],
        0.4,
        label="triton",
        color=colour("triton"),
    )
    for y, r in zip(hy, held, strict=True):
        if r.triton_bytes == 0:
            # A log axis has no zero: say so instead of letting a 1-byte bar stand for it.
            ax_held.text(1.5, y - 0.2, "0 (no rectangle)", va="center", fontsize=8)
    ax_held.set_yticks(list(hy), [r.item for r in held])
    ax_held.set_xscale("log")
    ax_held.set_xlabel("bytes")
    ax_held.set_title("what a step holds at the top of the list")
    ax_held.legend()


def step_panel(ax, runs: list) -> None:
    """Median ms per step of each side with IQR whiskers; replayed / eager and its 95% CI above."""
    xs = list(range(len(runs)))
    for side, offset, name in (
        ("eager", -0.2, "engine-eager"),
        ("replayed", 0.2, "engine-captured"),
    ):
        medians = [getattr(r, f"step_ms_{side}") or 0.0 for r in runs]
        q1 = [getattr(r, f"step_ms_{side}_q1") or 0.0 for r in runs]
        q3 = [getattr(r, f"step_ms_{side}_q3") or 0.0 for r in runs]
        whiskers = [[m - lo for m, lo in zip(medians, q1)], [hi - m for m, hi in zip(medians, q3)]]
        ax.bar([x + offset for x in xs], medians, 0.4, yerr=whiskers, capsize=3, label=side,
               color=colour(name))  # fmt: skip
    from reports.figure_text import bar_labels

    tops = [max(r.step_ms_eager_q3 or 0.0, r.step_ms_replayed_q3 or 0.0) for r in runs]
    bar_labels(ax, xs, tops, [ratio_cell(r) for r in runs], slots=len(runs), fontsize=7)
    ax.set_xticks(xs, [str(r.steps) for r in runs])
    ax.set_xlabel("decode steps in a run")
    ax.set_ylabel("ms per decode step (median, IQR)")
    ax.set_title("a step, eager against replayed: replayed/eager [95% CI]")
    ax.legend()
