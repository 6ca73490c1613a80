"""The table and the diagram for `nanobench pool-budget`: where a device's bytes go.

What it is: a stacked breakdown table (one column per
kernel and width multiple) and `pool-budget.png`, a stacked bar per kernel and width multiple;
for `--target`, `render_target_budget` (a row per capture size: state, workspace, outputs; then
the fit) and `plot_target_budget` (state, pool and outputs stacked per list prefix, beside the cap).
What it is not: the arithmetic (that is `nanobench.pool_budget.budget`); it never imports the engine.
Invariant: the stack of each bar sums to the device total: weights, the capture pool (as the
engine records it: the largest traced peak, logits copied out), its one shared logits buffer,
activations, slot table and inputs, the KV pool, the remainder under the utilisation
cap, and the headroom above it. When the list does not fit, the KV pool is 0 and the stack
itself rises past the cap line by the overrun.

pool-budget.csv's columns are `nanobench.pool_budget.budget.BudgetRow`'s fields: kernel, width_multiple, shapes, device_bytes, utilization, usable_bytes,
weights_bytes, kv_bytes_per_token, kv_bytes_per_block, capture_workspace_bytes (the
formula: the largest score rectangle, shown, not summed), traced_workspace_bytes (the largest
workspace of the list, traced from the decode forward), workspace_difference_bytes (traced -
formula), traced_peak_bytes (the largest peak with the logits counted: the pool when every graph
copies its logits out), graph_outputs_bytes (the sum of every graph's logits, had each kept its
own), shared_output_bytes (the one logits buffer every graph writes), capture_pool_bytes (what the
capture of `capture_output` holds, the fit judged on it: traced_peak_bytes + shared_output_bytes
for shared, the engine's; capture_pool_per_graph_bytes for per-graph),
capture_pool_per_graph_bytes (traced_workspace_bytes + graph_outputs_bytes: a capture keeping
each graph's logits), activation_bytes, persistent_bytes, free_for_kv_bytes, kv_blocks, kv_tokens,
kv_pool_bytes, min_blocks (one sequence at max_model_len), shortfall_bytes (what the list
lacks to fit: 0 exactly when it fits), fits, fits_detail,
full_batch_blocks, full_batch_fits, capture_output, startup_s (shapes x record_s_per_graph:
the seconds recording the list adds to a start), record_s_per_graph, record_s_source (measured:
--record-s-per-graph, or the model and its source), smallest_fitting_width_multiple,
largest_fitting_shapes.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from reports.csvio import save_figure
from reports.style import binary_bytes, title


def capture_pool_part(row) -> int:
    """The pool: the largest traced peak (logits copied out) or workspace (logits kept apart)."""
    return row.traced_peak_bytes if row.capture_output == "shared" else row.traced_workspace_bytes


def capture_outputs_part(row) -> int:
    """The logits a capture keeps: one shared buffer, or every graph's own."""
    return row.shared_output_bytes if row.capture_output == "shared" else row.graph_outputs_bytes


# (label, bytes of a row) from the bottom of the stack up; the remainder and headroom are derived.
STACK = [
    ("weights", lambda r: r.weights_bytes),
    ("capture pool (shared, traced)", capture_pool_part),
    ("capture outputs (logits kept)", capture_outputs_part),
    ("decode activations", lambda r: r.activation_bytes),
    ("slot table + inputs", lambda r: r.persistent_bytes),
    ("KV pool", lambda r: r.kv_pool_bytes),
]


def label(row) -> str:
    multiple = "rows only" if row.width_multiple is None else f"wm {row.width_multiple}"
    return f"{row.kernel}\n{multiple}"


def remainder_bytes(row) -> int:
    """Usable bytes no component and no whole KV block took (negative when it overran)."""
    used = sum(part(row) for _, part in STACK)
    return row.usable_bytes - used


def render_pool_budget(console, rows: list, gates, notes: list[str] = ()) -> None:
    """The breakdown table, then the KV and startup arithmetic, the notes and the gates."""
    first = rows[0]
    console.print(budget_table(rows))
    console.print(
        f"KV: {first.kv_bytes_per_token:,} bytes per token, {first.kv_bytes_per_block:,} "
        f"per block of {first.block_size}; weights {first.weights_bytes:,} bytes",
        markup=False,
    )
    console.print(
        f"startup s: shapes x one graph's record seconds ({first.record_s_source})",
        markup=False,
    )
    for note in notes:
        console.print(note, markup=False)
    for g in gates:
        mark = "pass" if g.passed else "FAIL"
        console.print(f"{mark} {g.name}: {g.detail}", markup=False)


def budget_table(rows: list) -> Table:
    """A column per kernel and width multiple: the stack, its remainders, the KV pool, the fit."""
    first = rows[0]
    table = Table(
        title=(
            f"device budget: {binary_bytes(first.device_bytes)} x {first.utilization:g}, "
            f"max batch {first.max_batch}, max_model_len {first.max_model_len}, "
            f"block {first.block_size}, {first.dtype}"
        )
    )
    table.add_column("", justify="left")
    for r in rows:
        table.add_column(label(r).replace("\n", " "), justify="right")
    table.add_row("capture shapes", *[f"{r.shapes:,}" for r in rows])
    table.add_row("startup s (record the list)", *[f"{r.startup_s:,.3g}" for r in rows])
    table.add_row("capture outputs", *[r.capture_output for r in rows])
    for name, part in STACK:
        table.add_row(name, *[binary_bytes(part(r)) for r in rows])
    table.add_row("unallocated (under the cap)", *[binary_bytes(remainder_bytes(r)) for r in rows])
    table.add_row(
        "headroom (above the cap)", *[binary_bytes(r.device_bytes - r.usable_bytes) for r in rows]
    )
    table.add_row(
        "  formula: score rectangle", *[binary_bytes(r.capture_workspace_bytes) for r in rows]
    )
    table.add_row(
        "  capture, one shared logits buffer",
        *[binary_bytes(r.traced_peak_bytes + r.shared_output_bytes) for r in rows],
    )
    table.add_row(
        "  capture, each graph its own logits",
        *[binary_bytes(r.capture_pool_per_graph_bytes) for r in rows],
    )
    table.add_row("free for KV", *[binary_bytes(r.free_for_kv_bytes) for r in rows])
    table.add_row("KV blocks", *[f"{r.kv_blocks:,}" for r in rows])
    table.add_row("KV tokens", *[f"{r.kv_tokens:,}" for r in rows])
    table.add_row(
        "fits (>= one max_model_len sequence)", *["yes" if r.fits else "NO" for r in rows]
    )
    table.add_row(
        "short by (to fit)",
        *[binary_bytes(r.shortfall_bytes) if r.shortfall_bytes else "-" for r in rows],
    )
    table.add_row("full batch fits", *["yes" if r.full_batch_fits else "no" for r in rows])
    table.add_row(
        "smallest fitting width multiple",
        *[_or_dash(r.smallest_fitting_width_multiple) for r in rows],
    )
    table.add_row(
        "largest fitting list (shapes)", *[_or_dash(r.largest_fitting_shapes) for r in rows]
    )
    return table


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def plot_pool_budget(path: Path, rows: list, *, model: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle

    # Constrained layout keeps the legend beside the axes and the wrapped title above them.
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows) + 3), 6), layout="constrained")
    xs = list(range(len(rows)))
    bottoms = [0.0] * len(rows)
    layers = [(name, [part(r) for r in rows]) for name, part in STACK]
    layers.append(("unallocated", [max(remainder_bytes(r), 0) for r in rows]))
    # An overrun already shows as a stack above the cap; headroom is what is left above both.
    tops = [r.usable_bytes + max(-remainder_bytes(r), 0) for r in rows]
    layers.append(
        ("headroom", [max(r.device_bytes - t, 0) for r, t in zip(rows, tops, strict=True)])
    )
    for name, values in layers:
        gib = [v / 2**30 for v in values]
        if not any(gib):
            continue
        ax.bar(xs, gib, 0.6, bottom=bottoms, label=name)
        bottoms = [b + g for b, g in zip(bottoms, gib, strict=True)]
    caps = [r.usable_bytes / 2**30 for r in rows]
    ax.scatter(xs, caps, marker="_", s=900, color="black", label="utilisation cap", zorder=3)
    ax.set_xticks(xs, [label(r) + ("" if r.fits else "\n(does not fit)") for r in rows])
    ax.set_ylabel("GiB")
    first = rows[0]
    # The figure's title, not the axes': centred on the figure, it has the legend's width too.
    fit_suptitle(
        fig,
        title(
            "where the device's bytes go, per capture list",
            model=model,
            device=binary_bytes(first.device_bytes),
            dtype=first.dtype,
            max_batch=first.max_batch,
            max_model_len=first.max_model_len,
        ),
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)


def render_target_sizes(console, sizes: list, pool) -> None:
    """The per-size table and the list's pool lines (`pool`: a fit or a pool row)."""
    table = Table(
        title=(
            f"{pool.target}: capture memory per size, {pool.dtype}, priced on the meta device "
            f"(a full context, one step)"
        )
    )
    for name in ("rows", "state", "workspace", "reserved", "outputs", "peak", "allocations"):
        table.add_column(name, justify="right")
    for r in sizes:
        table.add_row(
            f"{r.rows:,}",
            binary_bytes(r.state_bytes),
            binary_bytes(r.workspace_bytes),
            binary_bytes(r.reserved_bytes),
            binary_bytes(r.outputs_bytes),
            binary_bytes(r.peak_bytes),
            f"{r.allocations:,}",
        )
    console.print(table)
    outputs = "one shared buffer" if pool.shared_output else "summed per graph"
    console.print(
        f"list {','.join(map(str, pool.capture_sizes))}: state {binary_bytes(pool.state_bytes)} "
        f"(largest size), shared pool {binary_bytes(pool.shared_pool_bytes)} (private pools "
        f"{binary_bytes(pool.private_pools_bytes)}), outputs {binary_bytes(pool.outputs_bytes)} "
        f"({outputs})",
        markup=False,
    )
    console.print(
        f"reserved (caching-allocator model): one shared pool "
        f"{binary_bytes(pool.shared_pool_reserved_bytes)}, a pool per graph "
        f"{binary_bytes(pool.private_pools_reserved_bytes)}",
        markup=False,
    )


def render_target_budget(console, sizes: list, fit, gates) -> None:
    render_target_sizes(console, sizes, fit)
    console.print(
        f"need state + shared pool + outputs = {binary_bytes(fit.need_bytes)}; cap "
        f"{binary_bytes(fit.device_bytes)} x {fit.utilization:g} = {binary_bytes(fit.usable_bytes)}",
        markup=False,
    )
    largest = ",".join(map(str, fit.largest_fitting_sizes)) or "none"
    console.print(f"largest capture list that fits: {largest}", markup=False)
    for g in gates:
        console.print(f"{'pass' if g.passed else 'FAIL'} {g.name}: {g.detail}", markup=False)


def plot_target_budget(path: Path, sizes: list, fit) -> Path:
    """One bar per list prefix (sizes up to each size): state, shared pool, outputs, the cap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle, fit_ticks

    # Constrained layout keeps the legend beside the axes and the wrapped title above them.
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(sizes) + 3), 5), layout="constrained")
    xs = list(range(len(sizes)))
    state = [r.state_bytes / 2**30 for r in sizes]
    pool = [max(r.workspace_bytes for r in sizes[: i + 1]) / 2**30 for i in xs]
    outs = [
        (max if fit.shared_output else sum)(r.outputs_bytes for r in sizes[: i + 1]) / 2**30
        for i in xs
    ]
    ax.bar(xs, state, 0.6, label="state (weights, caches)")
    ax.bar(xs, pool, 0.6, bottom=state, label="shared pool (largest workspace)")
    tops = [a + b for a, b in zip(state, pool, strict=True)]
    ax.bar(xs, outs, 0.6, bottom=tops, label="outputs kept")
    ax.axhline(fit.usable_bytes / 2**30, color="black", linestyle="--", label="utilisation cap")
    fit_ticks(ax, [f"up to {r.rows}" for r in sizes])
    ax.set_ylabel("GiB")
    fit_suptitle(
        fig,
        title(
            "capture list prefixes against the device",
            model=fit.target,
            device=binary_bytes(fit.device_bytes),
            dtype=fit.dtype,
        ),
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)
