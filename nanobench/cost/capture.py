"""What recording the decode step costs and holds: workspace bytes, pools, seconds.

What it is: the capture arithmetic. The reference read materialises a `[rows, heads, 1, width]`
score rectangle, so a recorded graph's workspace is that rectangle; a capture list either
shares one pool (sized by its largest shape: a max) or holds one per shape (a sum). Next to it,
what a step holds persistently (slot table, input buffers) and when recording pays back.
What it is not: a recorder (`engine.captured`) or a device memory probe.
Invariant: shared_pool_bytes <= private_pool_bytes for any list, with equality only for a
list of one; a shared pool does not grow with the list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

INT64_BYTES = 8
# The persistent step inputs: token ids, positions, write slots, context lens.
STEP_INPUT_BUFFERS = 4


def _positive(name: str, value: float) -> None:
    if value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value}")


def score_cells(rows: int, heads: int, width: int) -> int:
    """rows * heads * 1 * width: the [rows, heads, 1, width] score rectangle of one decode read."""
    _positive("rows", rows)
    _positive("heads", heads)
    _positive("width", width)
    return rows * heads * 1 * width


def workspace_bytes(rows: int, heads: int, width: int, dtype_bytes: int) -> int:
    """score_cells(rows, heads, width) * dtype_bytes: the largest intermediate of one graph."""
    _positive("dtype_bytes", dtype_bytes)
    return score_cells(rows, heads, width) * dtype_bytes


def shared_pool_bytes(shapes: Iterable[tuple[int, int]], heads: int, dtype_bytes: int) -> int:
    """max(workspace_bytes(r, heads, w, dtype_bytes)) over the shapes; 0 for none."""
    return max((workspace_bytes(r, heads, w, dtype_bytes) for r, w in shapes), default=0)


def private_pool_bytes(shapes: Iterable[tuple[int, int]], heads: int, dtype_bytes: int) -> int:
    """sum(workspace_bytes(r, heads, w, dtype_bytes)) over the shapes."""
    return sum(workspace_bytes(r, heads, w, dtype_bytes) for r, w in shapes)


def pool_sharing_ratio(private_bytes: int, shared_bytes: int) -> float:
    """private_bytes / shared_bytes: what sharing one pool saves (not the list's length)."""
    if shared_bytes <= 0:
        raise ValueError(f"shared_bytes: expected a positive byte count, got {shared_bytes}")
    return private_bytes / shared_bytes


def slot_table_bytes(max_batch: int, max_model_len: int, dtype_bytes: int = INT64_BYTES) -> int:
    """max_batch * max_model_len * dtype_bytes: the persistent int64 slot table."""
    _positive("max_batch", max_batch)
    _positive("max_model_len", max_model_len)
    return max_batch * max_model_len * dtype_bytes


def input_buffer_bytes(
    max_batch: int, buffers: int = STEP_INPUT_BUFFERS, dtype_bytes: int = INT64_BYTES
) -> int:
    """buffers * max_batch * dtype_bytes: ids, positions, write slots and lens, int64 each."""
    _positive("max_batch", max_batch)
    return buffers * max_batch * dtype_bytes


def capture_cost_s(record_s_per_shape: Iterable[float]) -> float:
    """sum(record_s_per_shape): paid before serving when the list is captured up front."""
    values = list(record_s_per_shape)
    if any(v < 0 for v in values):
        raise ValueError(f"record_s_per_shape: expected non-negative seconds, got {values}")
    return float(sum(values))


def launch_saving_s(eager_step_s: float, replay_step_s: float) -> float:
    """eager_step_s - replay_step_s; negative when replaying is slower (e.g. host-bound CPU)."""
    return eager_step_s - replay_step_s


def capture_breakeven_steps(capture_s: float, saving_s: float) -> float:
    """capture_s / saving_s, or math.inf when saving_s <= 0 (recording never pays back)."""
    if capture_s < 0:
        raise ValueError(f"capture_s: expected non-negative seconds, got {capture_s}")
    if saving_s <= 0:
        return math.inf
    return capture_s / saving_s


def capture_reuse_share(captures: int, steps: int) -> float:
    """1 - captures / steps: the share of steps that replayed rather than recorded."""
    if steps < 1:
        raise ValueError(f"steps: expected a positive integer, got {steps}")
    if not 0 <= captures <= steps:
        raise ValueError(f"captures: expected 0..{steps}, got {captures}")
    return 1.0 - captures / steps
