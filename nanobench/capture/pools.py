"""`capture`'s pool table: the capture list's score-rectangle pools, priced and (CUDA) measured.

What it is: `pool_rows` and `held_rows`, the score-rectangle pool table and what a step holds
at the top of the capture list, from `nanobench.cost.capture`; `measure_pools`, which on CUDA
records each list for real and reads what the pool grew by; and `with_measured`, the measured
figures beside the arithmetic.
What it is not: the eager-against-replayed runs (`nanobench.capture.bench`) or the traced
columns (`nanobench.capture.workspace`).
Invariant: the formula columns come from the list's own buckets, never constants; a measured
column is None wherever nothing was measured (CPU).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace

import torch

from engine.buckets import DecodeBuckets
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from nanobench.capture.rows import HeldRow, PoolRow
from nanobench.cost.capture import (
    input_buffer_bytes,
    pool_sharing_ratio,
    private_pool_bytes,
    shared_pool_bytes,
    slot_table_bytes,
    workspace_bytes,
)

# The reference read's softmax runs in fp32 (`scores.float()`), so the rectangle the pool
# must hold is fp32 whatever the model dtype.
SCORE_BYTES = 4


def capture_buckets(
    capture_rows: int,
    capture_tokens: int,
    multiple: int,
    capture_sizes: tuple[int, ...] | None = None,
    width_free: bool = False,
) -> DecodeBuckets:
    """The capture list's buckets: the power-of-two row ladder to capture_rows, or a server's
    `capture_sizes` (vLLM's may go past max_num_seqs, to its own largest size)."""
    top = capture_sizes[-1] if capture_sizes else capture_rows
    return DecodeBuckets(
        top, capture_tokens, multiple, width_free=width_free, row_sizes=capture_sizes or None
    )


def pool_rows(
    heads: int,
    capture_rows: int,
    capture_tokens: int,
    multiples: list[int],
    capture_sizes: tuple[int, ...] | None = None,
) -> list[PoolRow]:
    """The score-rectangle table: per width multiple, the reference list's shared pool against private.

    A last row prices the Triton kernel's list (rows only, no score rectangle). Rows carry the
    list's row sizes, ascending (`capture_sizes`).
    """
    out = []
    for multiple in multiples:
        buckets = capture_buckets(capture_rows, capture_tokens, multiple, capture_sizes)
        shapes = buckets.shapes
        shared = shared_pool_bytes(shapes, heads, SCORE_BYTES)
        private = private_pool_bytes(shapes, heads, SCORE_BYTES)
        out.append(
            PoolRow(
                kernel="reference",
                width_multiple=multiple,
                shapes=len(shapes),
                shared_pool_bytes=shared,
                private_pools_bytes=private,
                sharing_ratio=pool_sharing_ratio(private, shared),
                heads=heads,
                capture_rows=capture_rows,
                capture_tokens=capture_tokens,
                capture_sizes=list(buckets.rows),
            )
        )
    rows_only = capture_buckets(
        capture_rows, capture_tokens, capture_tokens, capture_sizes, width_free=True
    )
    out.append(
        PoolRow(
            kernel="triton",
            width_multiple=None,
            shapes=rows_only.count,
            shared_pool_bytes=0,
            private_pools_bytes=0,
            sharing_ratio=None,
            heads=heads,
            capture_rows=capture_rows,
            capture_tokens=capture_tokens,
            capture_sizes=list(rows_only.rows),
        )
    )
    return out


def held_rows(heads: int, capture_rows: int, capture_tokens: int) -> list[HeldRow]:
    """What a decode step holds at the top of the list, reference read against Triton."""
    rect = workspace_bytes(capture_rows, heads, capture_tokens, SCORE_BYTES)
    table = slot_table_bytes(capture_rows, capture_tokens)
    inputs = input_buffer_bytes(capture_rows)
    items = [
        (f"score rectangle [{capture_rows}, {heads}, 1, {capture_tokens}]", rect, 0),
        (f"slot table [{capture_rows}, {capture_tokens}] int64", table, table),
        (f"input buffers 4 x [{capture_rows}] int64", inputs, inputs),
    ]
    return [HeldRow(name, ref, tri) for name, ref, tri in items]


def measure_pools(
    model: ModelConfig,
    capture_rows: int,
    capture_tokens: int,
    multiples: list[int],
    dtype: str,
    status: Callable[[str], None] = lambda _m: None,
) -> dict[int, dict]:
    """CUDA only: record each width multiple's list for real and read the pool.

    measured shared = the reserved growth of the one shared pool over the walk; measured
    private = the sum of each recording's own peak (what a pool per shape would hold); both
    less what a library took outside every graph's pool meanwhile (`CaptureStats`). The
    engine has one KV block: the synthetic batches write only the sink and read through an
    all-sink slot table, and weights are random (memory does not depend on their values).
    """
    found: dict[int, dict] = {}
    for multiple in multiples:
        status(f"measuring the capture pool at width multiple {multiple}")
        config = EngineConfig(
            max_batch_size=capture_rows,
            max_model_len=capture_tokens,
            num_blocks=1,
            dtype=dtype,
            device="cuda",
            attention="reference",
            bucket_decode=True,
            width_multiple=multiple,
            capture_decode=True,
        )
        engine = None
        try:
            engine = Engine.build(model, None, config)
            stats = engine.capture()
            found[multiple] = {
                "shared_pool_measured_bytes": stats.pool_growth_bytes,
                "private_pools_measured_bytes": sum(s.peak_bytes or 0 for s in stats.shapes),
                "capture_s": stats.total_s,
            }
        except torch.cuda.OutOfMemoryError:
            found[multiple] = {"note": "out of device memory while recording"}
        finally:
            del engine
            gc.collect()
            torch.cuda.empty_cache()
    return found


def with_measured(pool: list[PoolRow], measured: dict[int, dict]) -> list[PoolRow]:
    """Pool rows with measured values and the difference in percent next to the arithmetic."""
    out = []
    for row in pool:
        m = measured.get(row.width_multiple) if row.kernel == "reference" else None
        if m:
            shared = m.get("shared_pool_measured_bytes")
            private = m.get("private_pools_measured_bytes")
            row = replace(
                row,
                shared_pool_measured_bytes=shared,
                shared_pool_diff_pct=diff_pct(shared, row.shared_pool_bytes),
                private_pools_measured_bytes=private,
                private_pools_diff_pct=diff_pct(private, row.private_pools_bytes),
                measured_capture_s=m.get("capture_s"),
                note=m.get("note"),
            )
        out.append(row)
    return out


def diff_pct(got: int | None, want: int) -> float | None:
    """100 x (got - want) / want; None when nothing was measured or the formula is 0."""
    return 100.0 * (got - want) / want if got is not None and want else None
