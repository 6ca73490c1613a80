"""Text that fits its figure: titles and labels wrapped to the width they have, never cut.

What it is: `wrapped(text, width_pt, fontsize)` (the text broken at spaces, hyphens or, for a
word wider than the line, inside it, so each line measures at most `width_pt` points in
Matplotlib's default font), `fit_suptitle(fig, text)`, `fit_title(ax, text)`,
`fit_ticks(ax, labels)` (category labels wrapped to their share of the axis) and
`headroom(ax, tops, lines)` (room above the tallest bar for the labels written on top of bars).
What it is not: a layout engine. The figures use constrained layout; these only decide where
a line breaks and how much space a label needs.
Invariant: a wrapped text holds every character of the original, in order (only whitespace at
a break becomes a newline); widths are measured in points, so a figure saved at any dpi keeps
the same breaks.
"""

from __future__ import annotations

import re
import textwrap

# Constrained layout pads each side of a figure and an axes; leave that much of the width free.
SLACK = 0.94
# Held together while wrapping: an interval's "[low, high]" breaks before it, never inside.
KEEP = "\u00a0"
# What sits beside an axes in its grid cell: y tick labels, the y label and the pads between.
BESIDE_PT = 64


def text_width_pt(line: str, fontsize: float) -> float:
    """The width in points of one line in Matplotlib's default font (Agg's own measure)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = RendererAgg(1, 1, 72)  # 72 dpi: one pixel is one point
    width, _, _ = renderer.get_text_width_height_descent(
        line, FontProperties(size=fontsize), ismath=False
    )
    return width


def wrapped(text: str, width_pt: float, fontsize: float) -> str:
    """`text` with each of its lines broken so that no line is wider than `width_pt`."""
    out = []
    for line in text.split("\n"):
        if text_width_pt(line, fontsize) <= width_pt:
            out.append(line)
            continue
        per_char = text_width_pt(line, fontsize) / max(len(line), 1)
        chars = max(int(width_pt / per_char), 8)
        held = re.sub(r"\[[^\]]*\]", lambda m: m.group().replace(" ", KEEP), line)
        while True:
            parts = textwrap.wrap(held, chars, break_on_hyphens=True)
            if chars <= 8 or all(text_width_pt(p, fontsize) <= width_pt for p in parts):
                break
            chars -= 1
        out.extend(p.replace(KEEP, " ") for p in parts)
    return "\n".join(out)


def axes_width_pt(ax) -> float:
    """The axes' width in points once laid out: under constrained layout its share of the grid
    less the tick labels and label beside it; otherwise its width now (tight layout or none)."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    fig = ax.get_figure()
    spec = ax.get_subplotspec()
    if spec is None or not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        return ax.get_position().width * fig.get_figwidth() * 72
    share = len(spec.colspan) / spec.get_gridspec().ncols
    return share * fig.get_figwidth() * 72 - BESIDE_PT


def fontsize_of(size) -> float:
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=size).get_size_in_points()


def fit_suptitle(fig, text: str, fontsize="large") -> None:
    """The figure's title, wrapped to the figure's width."""
    size = fontsize_of(fontsize)
    fig.suptitle(wrapped(text, fig.get_figwidth() * 72 * SLACK, size), fontsize=size)


def fit_title(ax, text: str, fontsize="large", beside_pt: float = 0) -> None:
    """The axes' title, wrapped to the axes' width less `beside_pt` (a colour bar's share)."""
    size = fontsize_of(fontsize)
    ax.set_title(wrapped(text, (axes_width_pt(ax) - beside_pt) * SLACK, size), fontsize=size)


def fit_ticks(ax, labels: list, fontsize="medium", axis: str = "x", beside_pt: float = 0):
    """Category labels at 0..n-1, wrapped: on x each to its share of the axes' width (less
    `beside_pt`), on y to a quarter of the figure's width. Returns the labels as set."""
    size = fontsize_of(fontsize)
    if axis == "x":
        width = (axes_width_pt(ax) - beside_pt) * SLACK / max(len(labels), 1) * 0.92
    else:
        width = ax.get_figure().get_figwidth() * 72 / 4
    shown = [wrapped(str(label), width, size) for label in labels]
    set_ticks = ax.set_xticks if axis == "x" else ax.set_yticks
    set_ticks(range(len(labels)), shown, fontsize=size)
    return shown


def headroom(ax, tops: list[float], lines: int) -> None:
    """Raise the y limit so `lines` lines of label sit above the tallest of `tops`, inside
    the axes (not in the title's space); a bar axis starting at 0 keeps its bottom."""
    top = max([t for t in tops if t is not None] or [0.0])
    if top <= 0:
        return
    _, high = ax.get_ylim()
    # Each label line takes about a tenth of a panel's height at its default size.
    ax.set_ylim(top=max(high, top * (1.08 + 0.11 * lines)))


def bar_labels(ax, xs, tops, texts, slots: int, fontsize="small") -> None:
    """Each text centred above its bar (x, top), wrapped to one of `slots` equal shares of the
    axes' width, the y limit raised so every label stays inside the axes."""
    size = fontsize_of(fontsize)
    share = axes_width_pt(ax) * SLACK / max(slots, 1)
    shown = [wrapped(text, share * 0.92, size) for text in texts]
    for x, top, text in zip(xs, tops, shown, strict=True):
        ax.annotate(text, (x, top), xytext=(0, 2), textcoords="offset points", ha="center",
                    va="bottom", fontsize=size)  # fmt: skip
    headroom(ax, list(tops), max((t.count("\n") + 1 for t in shown), default=0))
