"""The padding table of a capture list: what each listed size pads, and a typical mix.

What it is: `capture_sizes_table(row)`, a rich table over one capture row's (`CaptureRow`) `size_padding`
(per listed size: the batches it serves, their worst padding rows and mean padded share) with
the mix padding (`mix_pad_share`, a uniform mix of batch sizes) as its caption.
What it is not: arithmetic; `engine.capture_sizes` computes every number shown here.
Invariant: everything printed comes from the row it is given.
"""

from __future__ import annotations

from rich.table import Table

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
