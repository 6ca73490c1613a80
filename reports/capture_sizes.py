"""The padding table of a capture list: what each listed size pads, and a typical mix.

What it is: `capture_sizes_table(row)`, a rich table over one of buckets' capture rows' `size_padding`
(per listed size: the batches it serves, their worst padding rows and mean padded share) with
the mix padding (`mix_pad_share`, a uniform mix of batch sizes) as its caption; and
`recommended_table(rows)`, the capture lists priced over a served batch trace (`RecommendedRow`
dicts: the one chosen for it beside vLLM's and SGLang's).
What it is not: arithmetic; `engine.capture_sizes` computes every number shown here.
Invariant: everything printed comes from the row it is given.
"""

from __future__ import annotations

from rich.table import Table

from reports.style import binary_bytes

# One line per size for short lists; a long ladder (vLLM at 512 rows has 51) keeps its ends.
MAX_LINES = 24


def capture_sizes_table(row) -> Table:
    """`row`: a capture row of `buckets` (its `size_padding`, `mix_batches`, `mix_pad_share`)."""
    sizes = row.size_padding
    table = Table(
        title=f"Capture list: {len(sizes)} sizes, padding per size",
        caption=(
            f"a uniform mix of batches 1..{row.mix_batches}: "
            f"{row.mix_pad_share:.1%} of computed rows are padding"
        ),
    )
    for name in ("size", "serves batches", "max pad rows", "mean pad share"):
        table.add_column(name, justify="right")
    shown = sizes if len(sizes) <= MAX_LINES else sizes[: MAX_LINES - 4] + [None] + sizes[-3:]
    for s in shown:
        if s is None:
            table.add_row("...", "", "", "")
            continue
        low, high = s["batches"]
        served = str(low) if low == high else f"{low}-{high}"
        table.add_row(str(s["size"]), served, str(s["max_pad_rows"]), f"{s['mean_pad_share']:.1%}")
    return table


def _sizes_text(sizes: list[int]) -> str:
    # A long ladder keeps its ends: vLLM's list at 64 sequences has 19 sizes.
    shown = sizes if len(sizes) <= 12 else [*sizes[:8], "...", *sizes[-3:]]
    return ",".join(str(s) for s in shown)


def recommended_table(rows: list[dict]) -> Table:
    first = rows[0]
    table = Table(
        title=(
            f"Capture list for the trace: {first['trace_steps']:,} steps, batches up to "
            f"{first['trace_max_rows']}, at most {first['max_graphs']} graphs"
        ),
        caption=(
            f"vllm and sglang: their default lists for --max-batch {first['max_batch']}; a step "
            "above a list's largest size runs eagerly and is left out of its pad share; startup s: "
            f"graphs x one graph's record seconds ({first['record_s_source']})"
        ),
    )
    names = ("list", "graphs", "capture sizes", "pad share", "pad rows / step", "eager steps")
    for name in (*names, "startup s"):
        table.add_column(name, justify="left" if name in ("list", "capture sizes") else "right")
    if first["usable_bytes"] is not None:
        verdict = "fits" if first["fits"] else "no list fits"
        table.caption += (
            f"; within {binary_bytes(first['usable_bytes'])}: the recommended list needs "
            f"{binary_bytes(first['need_bytes'])} ({verdict})"
        )
    for r in rows:
        table.add_row(
            r["list_name"],
            str(r["graphs"]),
            _sizes_text(r["capture_sizes"]),
            f"{r['mix_pad_share']:.1%}",
            f"{r['mean_pad_rows']:.2f}",
            f"{r['uncovered_steps']:,}",
            f"{r['startup_s']:,.3g}",
        )
    return table
