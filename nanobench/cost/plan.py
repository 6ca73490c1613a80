"""What a decode step's addressing costs on the host, in cells and bytes.

What it is: the addressing arithmetic. A plan that rebuilds the `[rows, width]` slot mapping from
scratch every step writes a growing rectangle; a persistent slot table writes one entry per
row per step. `rebuild_ratio` is the gap and `check_rebuild_bounded` the gate (`PlanUnsound`).
What it is not: the plan (`engine.plan`) or a measurement of plan time.
Invariant: step i (0-based) of a run from a `prompt_len`-token prompt maps width
`prompt_len + i + 1`, the same convention as `cost.buckets.open_shapes`; slot entries are
int64, so bytes are cells * 8 unless told otherwise.
"""

from __future__ import annotations

INT64_BYTES = 8
# The rebuild-ratio gate: an 8-step run passes (20.5x), a 512-step run fails by a factor of eight.
DEFAULT_MAX_REBUILD_RATIO = 32.0


class PlanUnsound(RuntimeError):
    """The host rebuilds far more addressing than the run appends."""


def _non_negative(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {value}")


def mapping_cells(rows: int, width: int) -> int:
    """rows * width: one step's slot-mapping rectangle."""
    _non_negative("rows", rows)
    _non_negative("width", width)
    return rows * width


def mapping_bytes(rows: int, width: int, dtype_bytes: int = INT64_BYTES) -> int:
    """rows * width * dtype_bytes."""
    return mapping_cells(rows, width) * dtype_bytes


def rebuild_cells(rows: int, prompt_len: int, steps: int) -> int:
    """sum(rows * (prompt_len + i + 1) for i in range(steps)): a rectangle rebuilt every step."""
    _non_negative("rows", rows)
    _non_negative("prompt_len", prompt_len)
    _non_negative("steps", steps)
    # Closed form of the arithmetic series, exact in integers.
    return rows * (steps * prompt_len + steps * (steps + 1) // 2)


def appended_cells(rows: int, steps: int) -> int:
    """rows * steps: one slot-table entry per row per step."""
    _non_negative("rows", rows)
    _non_negative("steps", steps)
    return rows * steps


def cells_bytes(cells: int, dtype_bytes: int = INT64_BYTES) -> int:
    """cells * dtype_bytes (int64 slots by default)."""
    _non_negative("cells", cells)
    return cells * dtype_bytes


def rebuild_ratio(rebuilt: int, appended: int) -> float:
    """rebuilt / appended: host cells written per cell the run actually needed."""
    if appended <= 0:
        raise ValueError(f"appended: expected a positive cell count, got {appended}")
    return rebuilt / appended


def check_rebuild_bounded(ratio: float, max_ratio: float = DEFAULT_MAX_REBUILD_RATIO) -> None:
    """Addressing cost stays linear: rebuild_ratio <= max_ratio."""
    if ratio > max_ratio:
        raise PlanUnsound(
            f"the plan rebuilds {ratio:,.1f}x the cells the run appends, bound is "
            f"{max_ratio:g}x: the slot mapping is rebuilt every step; keep a persistent "
            "slot table and read windows of it"
        )
