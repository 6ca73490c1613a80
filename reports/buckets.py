"""Reports for `nanobench buckets`: the CSV columns, the terminal tables and the shape diagram.

What it is: `BUCKETS_COLUMNS` (one CSV, both tables, told apart by `table`: `run` or `capture`),
`render_buckets` (table 1 per run length, table 2 per width multiple, the gates),
`render_short_answer` (the one-screen answer to "what does this width multiple cost me?") and
`draw_buckets` (bucketed-decode-shape.png).
What it is not: a measurement. Everything here takes rows and traces as plain dicts and lists;
it never imports the engine.
Invariant: every number drawn or printed comes from the rows it is given, never a constant.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from reports.style import binary_bytes, colour, title

RUN_COLUMNS = [
    "steps", "shapes_open", "shapes_bucketed", "waste", "cells_open", "cells_bucketed",
    "plan_ms_open", "plan_ms_bucketed",
]  # fmt: skip
CAPTURE_COLUMNS = [
    "width_multiple", "row_buckets", "width_buckets", "shapes", "shapes_triton", "waste",
    "workspace_bytes", "workspace_bytes_triton", "fits_budget", "chosen",
    "capture_sizes", "mix_pad_share", "startup_s", "startup_s_triton", "record_s_per_graph",
    "record_s_source",
]  # fmt: skip
# One CSV for both tables: a run row leaves the capture columns empty and the other way round.
BUCKETS_COLUMNS = ["table", "kernel", *RUN_COLUMNS]
BUCKETS_COLUMNS += [c for c in CAPTURE_COLUMNS if c not in BUCKETS_COLUMNS]


def _width_text(run: dict) -> str:
    if run["kernel"] == "triton":
        return "no width axis (triton kernel)"
    return f"width multiple {run['width_multiple']}"


def run_table(runs: list[dict], explicit_len: bool) -> Table:
    first = runs[0]
    length = (
        f"max_model_len {first['max_model_len']}"
        if explicit_len
        else "max_model_len = prompt + steps"
    )
    table = Table(
        title=(
            f"decode runs: {first['rows']} of {first['max_batch']} cache rows, from a "
            f"{first['prompt_len']}-token prompt, {_width_text(first)}, {length}"
        ),
        caption=(
            "shapes and cells read off real plans (graph_rows x graph_width); "
            "plan ms: total host time in plan_decode over the run"
            + (
                "; triton: cells are the window the plan addresses, the kernel reads each "
                "row only to its length"
                if first["kernel"] == "triton"
                else ""
            )
        ),
    )
    for col in (
        "steps", "shapes\nopen", "shapes\nbucketed", "waste", "cells\nopen", "cells\nbucketed",
        "plan ms\nopen", "plan ms\nbucketed",
    ):  # fmt: skip
        table.add_column(col, justify="right")
    for r in runs:
        table.add_row(
            str(r["steps"]),
            str(r["shapes_open"]),
            str(r["shapes_bucketed"]),
            f"{r['waste']:.1%}",
            f"{r['cells_open']:,}",
            f"{r['cells_bucketed']:,}",
            f"{r['plan_ms_open']:.2f}",
            f"{r['plan_ms_bucketed']:.2f}",
        )
    return table


def capture_table(capture: list[dict], kernel: str, max_shapes: int) -> Table:
    first = capture[0]
    table = Table(
        title=(
            f"capture list at {first['capture_rows']} rows x {first['capture_tokens']} tokens, "
            "per width multiple"
        ),
        # Text, not a str: "[rows, heads, 1, width]" would be markup on a console that reads it.
        caption=Text(
            f"typical run: {first['typical_rows']} rows, {first['typical_prompt_len']}-token "
            f"prompt, {first['typical_steps']} steps (the longest --steps, clamped to "
            "--capture-tokens); waste is what it pays in padding through the reference kernel's "
            f"buckets. Workspace: the fp32 [rows, heads, 1, width] score rectangle of the largest "
            f"shape {tuple(first['largest_shape'])} at {first['heads']} heads; the triton kernel "
            f"has none. Budget: {kernel} kernel's shapes vs --max-shapes {max_shapes}. "
            f"Startup s: shapes x one graph's record seconds ({first['record_s_source']})."
        ),
    )
    for col in (
        "width\nmultiple", "row\nbuckets", "width\nbuckets", "shapes\nreference",
        "shapes\ntriton", "typical\nwaste", "workspace\nreference", "workspace\ntriton",
        "startup s\nreference", "startup s\ntriton", "budget",
    ):  # fmt: skip
        table.add_column(col, justify="right")
    for r in capture:
        mark = "*" if r["chosen"] else ""
        table.add_row(
            f"{mark}{r['width_multiple']}",
            str(r["row_buckets"]),
            str(r["width_buckets"]),
            str(r["shapes"]),
            str(r["shapes_triton"]),
            f"{r['waste']:.1%}",
            binary_bytes(r["workspace_bytes"]),
            binary_bytes(r["workspace_bytes_triton"]),
            seconds(r["startup_s"]),
            seconds(r["startup_s_triton"]),
            "fits" if r["fits_budget"] else "over",
        )
    return table


def seconds(value: float) -> str:
    """Startup seconds: three significant figures, thousands separated ("230", "0.45")."""
    return f"{value:,.3g}" if value < 1000 else f"{value:,.0f}"


def _print_gates(console, gates) -> None:
    for g in gates:
        mark = "pass" if g.passed else "FAIL"
        console.print(f"{mark} {g.name}: {g.detail}", markup=False)


def _print_outputs(console, outputs: dict[str, str]) -> None:
    for name, path in outputs.items():
        console.print(f"wrote {name}: {path}", markup=False)


def render_buckets(
    console,
    runs: list[dict],
    capture: list[dict],
    gates,
    outputs: dict[str, str],
    *,
    kernel: str,
    max_shapes: int,
    explicit_len: bool,
) -> None:
    console.print(run_table(runs, explicit_len))
    console.print(capture_table(capture, kernel, max_shapes))
    console.print("* the chosen --width-multiple", markup=False)
    _print_gates(console, gates)
    _print_outputs(console, outputs)


def render_short_answer(
    console, chosen: dict, gates, outputs: dict[str, str], *, kernel: str, max_shapes: int
) -> None:
    """One screen: what the chosen width multiple costs at the capture configuration."""
    c = chosen
    shapes = c["shapes_triton"] if kernel == "triton" else c["shapes"]
    lines = [
        f"width multiple {c['width_multiple']} at {c['capture_rows']} rows x "
        f"{c['capture_tokens']} tokens ({kernel} kernel)",
        f"  capture list  {c['row_buckets']} row buckets x {c['width_buckets']} width buckets = "
        f"{c['shapes']} shapes (triton kernel, no width axis: {c['shapes_triton']})",
        f"  padding       {c['waste']:.1%} of the cells a typical run computes "
        f"({c['typical_rows']} rows, {c['typical_prompt_len']}-token prompt, "
        f"{c['typical_steps']} steps; reference kernel)",
        f"  workspace     largest shape {tuple(c['largest_shape'])}: "
        f"{binary_bytes(c['workspace_bytes'])} of fp32 scores at {c['heads']} heads "
        "(triton: none)",
        f"  startup       {shapes} shapes x {c['record_s_per_graph']:g} s = "
        f"{seconds(c['startup_s_triton'] if kernel == 'triton' else c['startup_s'])} s recording "
        f"them up front ({c['record_s_source']})",
        f"  budget        {shapes} shapes vs --max-shapes {max_shapes}: "
        + ("fits" if c["fits_budget"] else "over budget"),
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False)
    # The two gates that answer the question, and any other that failed (it decides --check).
    wanted = ("check_capture_budget", "check_waste_bounded[typical")
    _print_gates(console, [g for g in gates if g.name.startswith(wanted) or not g.passed])
    _print_outputs(console, outputs)


def draw_buckets(
    runs: list[dict], capture: list[dict], traces: list[dict], max_shapes: int, max_waste: float
):
    """The bucketed-decode-shape diagram, from the measured rows. Returns a matplotlib Figure (Agg, no pyplot)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 9.5))
    (ax_open, ax_rect), (ax_pool, ax_trade) = fig.subplots(2, 2)
    open_panel(ax_open, runs, traces)
    real = rectangle_panel(ax_rect, runs[-1], traces[-1])
    pool_panel(ax_pool, runs[-1], traces[-1], real)
    tradeoff_panel(ax_trade, capture, max_shapes, max_waste)
    # The plans run on the host over a float32 toy cache (no weights): the title says so.
    first = runs[0]
    fig.suptitle(
        title(
            "bucketed decode shapes",
            model="no weights (host plans)",
            device="cpu",
            dtype="float32",
            kernel=first["kernel"],
            rows=first["rows"],
            max_batch=first["max_batch"],
            prompt_len=first["prompt_len"],
        )
    )
    fig.tight_layout()
    return fig


def open_panel(ax_open, runs: list[dict], traces: list[dict]) -> None:
    """Top left: the open width grows one token per step; the bucketed width is a staircase."""
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for i, (run, trace) in enumerate(zip(runs, traces, strict=True)):
        color = colors[i % len(colors)]
        steps = range(1, len(trace["open_shapes"]) + 1)
        ax_open.plot(steps, [w for _, w in trace["open_shapes"]], color=color, lw=1, alpha=0.5)
        ax_open.step(
            steps,
            [w for _, w in trace["bucketed_shapes"]],
            where="post",
            color=color,
            lw=2,
            label=(
                f"{run['steps']} steps: {run['shapes_open']} open shapes -> "
                f"{run['shapes_bucketed']} bucketed, {run['waste']:.1%} padding"
            ),
        )
    ax_open.set_xscale("log")
    ax_open.set_xlabel("decode step")
    ax_open.set_ylabel("graph width (tokens read per row)")
    ax_open.set_title("open: a new shape every step (thin); bucketed: a staircase (thick)")
    ax_open.legend(fontsize=8, loc="upper left")


def rectangle_panel(ax_rect, run: dict, trace: dict) -> int:
    """Top right: one step of the longest run as the rectangle the forward computes; the step with the most padded columns (just past a bucket edge), so both kinds of padding show. Returns the real rows."""
    from matplotlib.patches import Rectangle

    from reports.figure_text import fit_title

    shown = max(
        range(len(trace["lens"])),
        key=lambda i: (trace["bucketed_shapes"][i][1] - trace["lens"][i], -i),
    )
    graph_rows, graph_width = trace["bucketed_shapes"][shown]
    real, ctx = trace["real_rows"], trace["lens"][shown]
    for r in range(graph_rows):
        y = graph_rows - 1 - r
        if r < real:
            ax_rect.add_patch(Rectangle((0, y), ctx, 0.9, color="tab:blue", alpha=0.7))
            ax_rect.add_patch(
                Rectangle((ctx, y), graph_width - ctx, 0.9, fill=False, hatch="//", ec="grey")
            )
        else:
            padded_row(ax_rect, y, graph_width, run["sink_slot"])
    for _, w in run["bucket_shapes"]:
        ax_rect.axvline(w, color="black", ls=":", lw=0.8)
    ax_rect.set_xlim(0, graph_width * 1.3)
    ax_rect.set_ylim(-0.2, graph_rows + 0.2)
    ax_rect.set_yticks([graph_rows - 1 - r + 0.45 for r in range(graph_rows)])
    ax_rect.set_yticklabels(
        [f"row {r}" if r < real else f"pad {r}" for r in range(graph_rows)], fontsize=8
    )
    ax_rect.set_xlabel("width (dotted: the run's bucket widths)")
    # Wider than the panel at long histories: wrapped, never past the figure's edge.
    fit_title(
        ax_rect,
        f"step {shown + 1} of {run['steps']} bucketed: {real} rows -> {graph_rows}, "
        f"history {ctx} -> {graph_width} (hatched: padding)",
    )
    return real


def padded_row(ax_rect, y: float, graph_width: int, sink: int) -> None:
    """One padded row of the rectangle: hatched, reading nothing, its K/V write sent to the sink."""
    from matplotlib.patches import FancyArrowPatch, Rectangle

    ax_rect.add_patch(Rectangle((0, y), graph_width, 0.9, fill=False, hatch="xx", ec="tab:red"))
    ax_rect.text(
        graph_width / 2,
        y + 0.45,
        "padded row: context_lens 0, reads nothing",
        ha="center",
        va="center",
        fontsize=8,
        color="tab:red",
        bbox={"fc": "white", "ec": "none"},
    )
    ax_rect.add_patch(
        FancyArrowPatch(
            (graph_width, y + 0.45),
            (graph_width * 1.12, y + 0.45),
            arrowstyle="->",
            mutation_scale=14,
            color="tab:red",
        )
    )
    ax_rect.text(
        graph_width * 1.13,
        y + 0.45,
        f"writes K/V\nto sink slot\n{sink}",
        va="center",
        fontsize=8,
        color="tab:red",
    )


def pool_panel(ax_pool, run: dict, trace: dict, real: int) -> None:
    """Bottom left: the pool, its blocks, and the sink one row past the last of them."""
    from matplotlib.patches import Rectangle

    block_size, num_blocks, sink = run["block_size"], run["num_blocks"], run["sink_slot"]
    owned = set(trace["owned_blocks"])
    for b in range(num_blocks):
        ax_pool.add_patch(
            Rectangle(
                (b * block_size, 0),
                block_size,
                1,
                fc="tab:blue" if b in owned else "lightgrey",
                ec="white",
                lw=0.3,
            )
        )
    sink_w = max(block_size, (sink + 1) / 80)
    ax_pool.add_patch(Rectangle((sink, 0), sink_w, 1, fc="tab:red"))
    ax_pool.annotate(
        f"sink slot {sink}: one past the last of {num_blocks} blocks x {block_size};\n"
        "no block maps to it, the allocator cannot hand it out",
        xy=(sink + sink_w / 2, 1),
        xytext=(sink * 0.35, 1.6),
        arrowprops={"arrowstyle": "->", "color": "tab:red"},
        fontsize=8,
        color="tab:red",
    )
    ax_pool.set_xlim(0, sink + sink_w * 1.5)
    ax_pool.set_ylim(0, 2.4)
    ax_pool.set_yticks([])
    ax_pool.set_xlabel(
        f"pool row (slot); blue: {len(owned)} blocks owned by the {real} rows, grey: free"
    )
    ax_pool.set_title(f"the K/V pool of the {run['steps']}-step run: {sink + 1} rows")


def tradeoff_panel(ax_trade, capture: list[dict], max_shapes: int, max_waste: float) -> None:
    """Bottom right: shapes against padding across width multiples, and the budget line."""
    shapes = [c["shapes"] for c in capture]
    wastes = [100 * c["waste"] for c in capture]
    ax_trade.plot(
        shapes, wastes, "o-", color=colour("reference"), label="reference kernel (rows x widths)"
    )
    for c, s, w in zip(capture, shapes, wastes, strict=True):
        label = f"x{c['width_multiple']}: {s}" + (" (chosen)" if c["chosen"] else "")
        # The rightmost point's label reads leftwards: to its right is the axes' edge.
        last = s == max(shapes)
        ax_trade.annotate(label, (s, w), textcoords="offset points", xytext=(-6 if last else 6, 4),
                          ha="right" if last else "left", fontsize=8)  # fmt: skip
    tri = capture[0]["shapes_triton"]
    ax_trade.plot(
        [tri],
        [0],
        "s",
        color=colour("triton"),
        label=f"triton kernel: {tri} shapes, reads each row to its length",
    )
    ax_trade.axvline(max_shapes, color="tab:red", ls="--", lw=1)
    ax_trade.text(
        max_shapes * 1.05,
        25,
        f"--max-shapes {max_shapes}:\nright of this a capture\nlist is a compile bill",
        color="tab:red",
        fontsize=8,
    )
    ax_trade.axhline(100 * max_waste, color="grey", ls=":", lw=1)
    ax_trade.set_xscale("log")
    ax_trade.set_ylim(-5, 105)
    ax_trade.set_xlabel(
        f"shapes in the capture list at {capture[0]['capture_rows']} rows x "
        f"{capture[0]['capture_tokens']} tokens"
    )
    ax_trade.set_ylabel("padding a typical run computes (%)")
    ax_trade.set_title("closed is not small: coarser widths trade shapes for padding")
    ax_trade.legend(fontsize=8, loc="lower right")
