"""One look for every report: byte units, a colour per mode and per system, figure titles.

What it is: `binary_bytes(n)` (the one byte formatter: powers of 1024, named KiB/MiB/GiB),
`colour(name)` (a fixed colour for each compile mode, decode system and kernel, the same in
every panel of every figure), and `title(what, model=, device=, dtype=, **shape)` (a figure
title that names the run it was drawn from).
What it is not: a theme. Matplotlib's defaults stand; only what must agree across figures is here.
Invariant: the same name is drawn in the same colour everywhere; a byte count is never printed
in decimal megabytes beside a binary one.
"""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")

# Modes, systems and kernels that can share a figure get distinct colours (tab10).
COLOURS = {
    "off": "tab:gray",
    "dynamic": "tab:blue",
    "static": "tab:orange",
    "reduce-overhead": "tab:purple",
    "engine-eager": "tab:gray",
    "engine-compiled": "tab:blue",
    "engine-captured": "tab:green",
    "hf-eager": "tab:brown",
    "hf-static-compiled": "tab:red",
    "reference": "tab:blue",
    "triton": "tab:green",
}


def binary_bytes(n: int | float | None) -> str:
    """`1536` -> "1.5 KiB"; a size in powers of 1024 with one decimal ("-" for None)."""
    if n is None:
        return "-"
    value = float(n)
    unit = UNITS[0]
    for unit in UNITS:
        if abs(value) < 1024 or unit == UNITS[-1]:
            break
        value /= 1024
    return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"


def colour(name: str) -> str:
    """The colour `name` (a mode, a system or a kernel) has in every figure."""
    return COLOURS.get(name, "tab:olive")


def title(what: str, *, model: str | None, device: str, dtype: str, **shape) -> str:
    """`what` and the run it measured: "compiled decode: tiny, cpu float32, rows 4, steps 16";
    model None (a run that loads no model, such as a user's own target) names none."""
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in shape.items() if v is not None]
    named = [] if model is None else [str(model)]
    return f"{what}: {', '.join([*named, f'{device} {dtype}', *parts])}"


def gate_mark(g) -> str:
    """How a gate's verdict reads in every table: pass, FAIL or can't tell."""
    return {"pass": "pass", "fail": "FAIL", "inconclusive": "can't tell"}[g.verdict]
