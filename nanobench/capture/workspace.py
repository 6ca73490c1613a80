"""`capture`'s traced memory: the workspace table and the traced columns of the pool table.

What it is: `workspace_rows`, one row per shape at the top width of the priced list for each
kernel, the traced workspace (`nanobench.memory.decode_workspace`) beside the score-rectangle
formula and their difference; and `with_traced`, which adds to each pool row the list's traced
shared pool (largest workspace), private pools (their sum), graph outputs (kept per graph), and
what the engine's capture holds with one shared logits buffer against each graph keeping its own.
What it is not: the formula itself (`nanobench.cost.capture`) or the tracer.
Invariant: the formula columns keep their values (the rectangle-only pool table still reproduces); every traced
column comes from the forward's own allocations under fake tensors.
"""

from __future__ import annotations

from dataclasses import replace

from engine.buckets import DecodeBuckets
from engine.config import ModelConfig
from nanobench.capture.rows import PoolRow, WorkspaceRow
from nanobench.cost.capture import workspace_bytes
from nanobench.memory.decode_workspace import decode_memory, list_memory, with_heads

# The reference read's softmax runs in fp32 whatever the model dtype.
SCORE_BYTES = 4


def formula_bytes(kernel: str, rows: int, heads: int, width: int) -> int:
    """The formula's figure: the [rows, heads, 1, width] fp32 score rectangle; 0 for Triton."""
    return 0 if kernel == "triton" else workspace_bytes(rows, heads, width, SCORE_BYTES)


def workspace_rows(
    model: ModelConfig,
    heads: int,
    capture_rows: int,
    capture_tokens: int,
    dtype: str,
    capture_sizes: tuple[int, ...] | None = None,
) -> list[WorkspaceRow]:
    """Per kernel, the list's row sizes at the widest width: traced workspace beside the formula."""
    from nanobench.capture.pools import capture_buckets

    traced_model = with_heads(model, heads)
    ladder = capture_buckets(capture_rows, capture_tokens, capture_tokens, capture_sizes).rows
    out = []
    for kernel in ("reference", "triton"):
        memory = decode_memory(traced_model, kernel, dtype, ladder[-1], capture_tokens)
        for rows in ladder:
            m = memory.at(rows, capture_tokens)
            formula = formula_bytes(kernel, rows, heads, capture_tokens)
            out.append(
                WorkspaceRow(
                    kernel=kernel,
                    rows=rows,
                    width=capture_tokens,
                    traced_bytes=m.workspace_bytes,
                    formula_bytes=formula,
                    difference_bytes=m.workspace_bytes - formula,
                    outputs_bytes=m.outputs_bytes,
                    peak_bytes=m.peak_bytes,
                    heads=heads,
                    dtype=dtype,
                )
            )
    return out


def with_traced(pools: list[PoolRow], model: ModelConfig, dtype: str) -> list[PoolRow]:
    """Pool rows with the traced shared pool, private pools and graph outputs beside the formula."""
    out = []
    for row in pools:
        kernel, tokens = row.kernel, row.capture_tokens
        sizes = tuple(row.capture_sizes)
        memory = decode_memory(with_heads(model, row.heads), kernel, dtype, sizes[-1], tokens)
        multiple = tokens if row.width_multiple is None else row.width_multiple
        buckets = DecodeBuckets(
            sizes[-1], tokens, multiple, width_free=kernel == "triton", row_sizes=sizes
        )
        traced = list_memory(memory, buckets.shapes)
        out.append(
            replace(
                row,
                traced_shared_pool_bytes=traced.shared_workspace_bytes,
                traced_private_pools_bytes=traced.private_workspace_bytes,
                graph_outputs_bytes=traced.outputs_bytes,
                shared_output_pool_bytes=traced.shared_output_pool_bytes,
                shared_output_bytes=traced.shared_output_bytes,
                capture_bytes=traced.shared_bytes,
                per_graph_capture_bytes=traced.per_graph_bytes,
            )
        )
    return out
