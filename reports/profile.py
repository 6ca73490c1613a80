"""The profile's outputs: the terminal tables and `profile.png`.

What it is: `render_profile` (where each mode's step goes, category by category, against the
step timed without the profiler; each mode's heaviest kernels; each row's words and the gates)
and `draw_profile` (the same categories as a stacked bar per mode beside the unprofiled step,
and a roofline of the kernels whose shapes give both bytes and flops), over rows with the
fields of `nanobench.profile.rows` (`ProfileRow`, `CategoryRow`, `KernelRow`: read as
attributes, never imported; their fields are the CSVs' columns).
What it is not: the profiler, the attribution or the CSVs. Every number drawn here comes from
the rows handed in, the roofs included (the peaks each mode's own worker probed).
Invariant: a missing measurement prints as `-` and plots as nothing; a measured zero prints as
a zero; no category handed in is dropped, "unattributed" included.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.compile import fmt, interval
from reports.csvio import save_figure
from reports.style import colour, fit_table, gate_mark

# A fixed colour per category (the keys are `nanobench.profile.rows.CATEGORIES`): the host's
# work in warm colours, the kernels in cool ones, the time no event covered in grey. Unrelated
# to the modes' colours (`style.colour`), which are only on the roofline.
CATEGORY_COLOURS = {
    "guards": "tab:red",
    "dynamo entry": "tab:orange",
    "wrapper python": "gold",
    "fused kernels": "tab:blue",
    "extern kernels": "tab:cyan",
    "eager ops": "tab:green",
    "copies and allocation": "tab:olive",
    "forward python": "tab:pink",
    "outside the forward": "tab:purple",
    "unattributed": "lightgray",
}
TICK = "step without the profiler"  # the left panel's mark at each mode's unprofiled step


def member(r) -> tuple[str, str]:
    """The (side, mode) a row, a category or a kernel belongs to."""
    return (getattr(r, "side", "") or "", r.mode)


def name_of(r) -> str:
    """'dynamic', or 'before dynamic' in a before/after run."""
    side, mode = member(r)
    return f"{side} {mode}" if side else mode


def category_order(categories: list) -> list[str]:
    """Every category named, in the order the rows give them: each mode's own order kept, a
    category one mode lacks placed after the one it follows where it does appear."""
    order: list[str] = []
    by: dict[tuple, list[str]] = {}
    for c in categories:
        by.setdefault(member(c), []).append(c.category)
    for names in by.values():
        at = 0
        for name in names:
            if name in order:
                at = order.index(name) + 1
            else:
                order.insert(at, name)
                at += 1
    return order


def category_cell(c) -> str:
    """'0.44 ms 35%': a category's time a step and its share of the profiled step."""
    if c is None or c.ms_per_step is None:
        return "-"
    share = "" if c.share is None else f" {c.share:.0%}"
    return f"{c.ms_per_step:.2f} ms{share}"


def ratio(part, whole) -> str:
    return "-" if part is None or not whole else f"{part / whole:.0%}"


def amdahl_cell(r) -> str:
    """The forward's speedup over off's and the step speedup it predicts: '1.45x (1.42x)'."""
    if r.forward_speedup is None:
        return "-"
    return f"{r.forward_speedup:.2f}x ({fmt(r.amdahl_speedup, '.2f')}x)"


def guard_cell(r) -> str:
    """One guard check as profiled, beside dynamo's own figure for it: '45 (38)'."""
    if r.guard_us_per_call is None:
        return "-"
    return f"{r.guard_us_per_call:.0f} ({fmt(r.guard_latency_us, '.0f')})"


def event_cell(r) -> str:
    """The step's own cost of one profiler event, the probe's no-work op's beside it."""
    if r.event_cost_us is None:
        return "-"
    return f"{r.event_cost_us:.2f} ({fmt(r.probe_event_cost_us, '.2f')})"


def beside_cell(r) -> str:
    """The worker's unprofiled step beside the profile, and how far apart its passes were."""
    if r.beside_spread is None:
        return fmt(r.plain_step_ms, ".2f")
    return f"{fmt(r.plain_step_ms, '.2f')} (±{r.beside_spread:.0%})"


def step_lines(r) -> list[tuple[str, str]]:
    """The step's own lines under the categories: (label, this row's cell)."""
    speedup = (
        "-" if r.mode == "off" else interval(r.speedup, r.speedup_low, r.speedup_high, ".2f", "x")
    )
    return [
        ("step ms (unprofiled) [q1, q3]", interval(r.step_ms, r.step_ms_q1, r.step_ms_q3)),
        ("step ms beside the profile (± passes)", beside_cell(r)),
        ("profiled step ms", fmt(r.profiled_step_ms, ".2f")),
        ("profiler overhead", fmt(r.overhead, "+.0%")),
        ("profiler us / event (probe's)", event_cell(r)),
        ("guard check us (dynamo's)", guard_cell(r)),
        ("attributed / beside", ratio(r.attributed_ms, r.plain_step_ms)),
        ("forward share", fmt(r.forward_share, ".0%")),
        ("host share", fmt(r.host_share, ".0%")),
        ("speedup [95%]", speedup),
        ("forward speedup (Amdahl's step)", amdahl_cell(r)),
    ]


def device_lines(r) -> list[tuple[str, str]]:
    """A GPU step's device side (`profile.device`): printed for every row once any has it."""
    replays = f"{fmt(r.launches_per_step, ',.0f')} / {fmt(r.graph_replays_per_step, ',.0f')}"
    return [
        ("device ms (busy / host step)", f"{fmt(r.device_ms_per_step, '.2f')} "
                                         f"({fmt(r.device_busy_share, '.0%')})"),
        ("launches / graph replays", replays if r.device_ms_per_step is not None else "-"),
        ("device time in graphs", fmt(r.graph_device_share, ".0%")),
    ]  # fmt: skip


def step_table(rows: list, categories: list, title: str) -> Table:
    """A column per mode, a line per category ('ms a step, share'), then the step's lines."""
    # Text throughout, never markup: "[q1, q3]" is a style tag to rich, ":mm:" an emoji code.
    table = Table(title=Text(title))
    table.add_column(Text("where the step goes"), no_wrap=True)
    for r in rows:
        table.add_column(Text(name_of(r)), justify="right", no_wrap=True)
    cells = {(member(c), c.category): c for c in categories}
    for name in category_order(categories):
        table.add_row(
            Text(name), *(Text(category_cell(cells.get((member(r), name)))) for r in rows)
        )
    table.add_section()
    on_gpu = any(getattr(r, "device_ms_per_step", None) is not None for r in rows)
    lines = [step_lines(r) + (device_lines(r) if on_gpu else []) for r in rows]
    for i, (label, _) in enumerate(lines[0] if lines else []):
        table.add_row(Text(label), *(Text(line[i][1]) for line in lines))
    return table


def kernel_table(r, kernels: list, top: int) -> Table | None:
    """The row's `top` kernels by time a step, each printed whole; None when it has none. The
    rank comes first, so a table too wide prints blocks titled '#: 1' with the name a line of
    its own, as wide as the terminal allows (a block's title is only as wide as its lines)."""
    own = [k for k in kernels if member(k) == member(r)]
    if not own:
        return None
    heaviest = sorted(own, key=lambda k: k.ms_per_step or 0.0, reverse=True)[:top]
    table = Table(title=Text(f"{name_of(r)}: top {len(heaviest)} of {len(own)} kernels by ms/step"))
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("kernel", no_wrap=True)
    # on a GPU the rates and floors are of each kernel's device time, shown beside the host's
    on_gpu = any(getattr(k, "device_ms_per_step", None) is not None for k in own)
    columns = ("kind", "calls/step", "ms/step", *(("device ms",) if on_gpu else ()), "GB/s")
    for col in (*columns, "GFLOP/s", "floor ratio"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column("user line", no_wrap=True)
    for rank, k in enumerate(heaviest, 1):
        device = (fmt(k.device_ms_per_step, ".3f"),) if on_gpu else ()
        table.add_row(
            str(rank),
            Text(k.name),
            Text(fmt(k.kind)),
            fmt(k.calls_per_step, ",.1f"),
            fmt(k.ms_per_step, ".3f"),
            *device,
            fmt(k.gbs, ",.1f"),
            fmt(k.gflops, ",.1f"),
            fmt(k.floor_ratio, ".1f") + ("x" if k.floor_ratio is not None else ""),
            Text(fmt(k.source)),
            Text(fmt(k.user_line)),
        )
    return table


def render_profile(
    console, rows: list, categories: list, kernels: list, gates: list, title: str, top: int = 8
) -> None:
    """The step by category, each mode's top kernels, each row's words and status, the gates."""
    console.print(fit_table(console, step_table(rows, categories, title)))
    for r in rows:
        table = kernel_table(r, kernels, top)
        if table is not None:
            console.print(fit_table(console, table))
    for r in rows:
        if r.words:
            # the words name the mode themselves; a side is said before them
            side = f"{r.side} " if getattr(r, "side", "") else ""
            console.print(f"why: {side}{r.words}", markup=False)
        if r.status != "ok":
            console.print(f"{name_of(r)}: {r.status}", markup=False)
        if r.trace:
            console.print(f"{name_of(r)}: trace {r.trace}", markup=False)
        if getattr(r, "cudagraph_skips", ""):
            console.print(f"{name_of(r)}: cudagraphs skipped: {r.cudagraph_skips}", markup=False)
    note = next((r.load_note for r in rows if r.load_note), None)
    if note:
        console.print(f"every row: {note}", markup=False)
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def profile_figure(rows: list, categories: list, kernels: list, title: str):
    """The figure `draw_profile` saves: the step by category per mode, and the roofline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figure_text import fit_suptitle

    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    shown = [r for r in rows if r.status == "ok"]
    step_panel(axes[0], shown, categories)
    roofline_panel(axes[1], shown, kernels)
    fit_suptitle(fig, title)
    return fig


def draw_profile(rows: list, categories: list, kernels: list, path: Path, title: str) -> Path:
    """`profile_figure`, saved whole to `path` (the figure closed)."""
    fig = profile_figure(rows, categories, kernels, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


def step_panel(ax, shown: list, categories: list) -> None:
    """A bar per mode stacked by category (ms a profiled step), a tick at its unprofiled step."""
    from reports.figure_text import fit_ticks, fit_title

    at = {member(r): i for i, r in enumerate(shown)}
    mine = [c for c in categories if member(c) in at and c.ms_per_step is not None]
    bottoms = [0.0] * len(shown)
    for name in category_order(mine):
        these = [c for c in mine if c.category == name]
        xs = [at[member(c)] for c in these]
        heights = [c.ms_per_step for c in these]
        ax.bar(xs, heights, bottom=[bottoms[x] for x in xs], label=name,
               color=CATEGORY_COLOURS.get(name, "tab:brown"))  # fmt: skip
        for x, h in zip(xs, heights):
            bottoms[x] += h
    timed = [(i, r.step_ms) for i, r in enumerate(shown) if r.step_ms is not None]
    if timed:
        ax.plot([i for i, _ in timed], [ms for _, ms in timed], linestyle="none", marker="_",
                markersize=40, markeredgewidth=2.5, color="black",
                label=TICK)  # fmt: skip
    fit_ticks(ax, [name_of(r) for r in shown])
    fit_title(ax, "where the profiled step goes (ms a step), tick: the unprofiled step")
    ax.set_ylabel("ms per step")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        # The tick's entry first, then the categories top-down as the bars stack bottom-up.
        tick = [i for i, label in enumerate(labels) if label == TICK]
        order = tick + [i for i in reversed(range(len(labels))) if i not in tick]
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7,
                  markerscale=0.3, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # fmt: skip


def roofed(kernels: list) -> list:
    """The kernels a roofline can place: bytes, flops and an achieved rate, all above zero."""
    return [k for k in kernels if (k.bytes or 0) > 0 and (k.flops or 0) > 0 and (k.gflops or 0) > 0]


def roofline_panel(ax, shown: list, kernels: list) -> None:
    """Each kernel's achieved GFLOP/s against its flops per byte, log-log, coloured by mode;
    each mode's roof min(GEMM peak, bandwidth x intensity) where its worker probed both."""
    at = {member(r) for r in shown}
    placed = [k for k in roofed(kernels) if member(k) in at]
    # each side its own marker and roof line, in the order the rows give the sides
    order = list(dict.fromkeys(r.side for r in shown))
    for r in shown:
        own = [k for k in placed if member(k) == member(r)]
        if own:
            ax.scatter([k.flops / k.bytes for k in own], [k.gflops for k in own],
                       color=colour(r.mode), marker="os^D"[order.index(r.side) % 4],
                       label=name_of(r), alpha=0.8)  # fmt: skip
    roofs = [r for r in shown if r.bandwidth_gbs and r.gemm_gflops]
    intensities = [k.flops / k.bytes for k in placed]
    intensities += [r.gemm_gflops / r.bandwidth_gbs for r in roofs]
    for r in roofs:
        ridge = r.gemm_gflops / r.bandwidth_gbs
        xs = sorted({min(intensities) / 10, ridge, max(intensities) * 10})
        ax.plot(xs, [min(r.gemm_gflops, r.bandwidth_gbs * x) for x in xs],
                linestyle=("--", ":", "-.")[order.index(r.side) % 3],
                color=colour(r.mode), linewidth=1,
                label=f"{name_of(r)} roof: {r.bandwidth_gbs:,.0f} GB/s, "
                f"{r.gemm_gflops:,.0f} GFLOP/s")  # fmt: skip
    if not placed:
        ax.text(0.5, 0.5, "no kernel with bytes and flops", transform=ax.transAxes,
                ha="center", va="center")  # fmt: skip
    if placed or roofs:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_title("roofline: kernels with bytes and flops from their shapes")
    ax.set_xlabel("arithmetic intensity (flops / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def render_moved(console, changes: list, sides=("before", "after")) -> None:
    """Each category's ms a step before and after, per mode (a --vs run's one profiled pass a
    side: a difference, no interval; `sides` names the two: plain and knob for --try), so the
    category that moved is read off the rows."""
    if not changes:
        return
    table = Table(title=Text("where the step moved: ms a step, one profiled pass a side"))
    for col in ("mode", "category", *sides, f"{sides[1]} - {sides[0]}"):
        table.add_column(Text(col), justify="left" if col in ("mode", "category") else "right")
    for c in changes:
        moved = c.after - c.before if c.after is not None and c.before is not None else None
        table.add_row(Text(c.member), Text(c.column.removesuffix(" ms")), Text(fmt(c.before, ".3f")),
                      Text(fmt(c.after, ".3f")), Text(fmt(moved, "+.3f")))  # fmt: skip
    console.print(fit_table(console, table))
