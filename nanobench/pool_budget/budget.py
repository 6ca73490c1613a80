"""Does the capture list fit beside the weights and the KV pool: the budget, per list and kernel.

What it is: `budget_row`, which prices one (kernel, width multiple) capture list against a
device: weights, the capture pool as the engine records it (every graph writes its logits into
one shared buffer, so: the largest peak of the list's decode forwards with the logits counted
as a transient, traced under fake tensors by `nanobench.memory.decode_workspace`, plus that one buffer),
beside what a capture keeping each graph's own logits would hold, decode activations, the persistent slot table and step inputs, and
what is left for the KV pool in blocks and tokens; `smallest_fitting` searches the width
multiples for the largest list that still fits. Beside the bytes, the seconds recording the list
adds to a start (`startup_s`: its graphs x one graph's record seconds, measured or the model of
the device it is recorded on, named in `record_s_source`). Numbers come from a `ModelConfig`
alone: no weights. The score-rectangle formula (the rectangle alone) stays beside the traced workspace, unused in the sum.
What it is not: a probe (the CLI reads free memory on CUDA) or a recorder. The activation
figure is an estimate of a decode step's largest live set at max batch, stated as a formula.
Invariant: every figure is an int number of bytes; a list fits when the KV pool left over holds
at least one sequence at max_model_len (vLLM's startup rule), checked by
`nanobench.cost.pool.check_pool_budget`; a list that does not fit is a row like any other, with
the bytes it lacks (`shortfall_bytes`, 0 exactly when it fits).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.buckets import DecodeBuckets
from engine.config import CAPTURE_OUTPUTS, KERNELS, ModelConfig
from nanobench.cost.capture import (
    capture_startup_s,
    input_buffer_bytes,
    record_s_per_graph,
    shared_pool_bytes,
    slot_table_bytes,
)
from nanobench.cost.pool import (
    PoolUnsound,
    check_pool_budget,
    free_for_kv_bytes,
    kv_blocks,
    kv_blocks_needed,
    kv_bytes_per_block,
    kv_bytes_per_token,
    kv_shortfall_bytes,
    weights_bytes,
)
from nanobench.memory.decode_workspace import decode_memory, list_memory

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# The reference read's softmax and the logits are fp32 whatever the model dtype.
FP32 = 4


@dataclass(frozen=True)
class BudgetRow:
    """One capture list priced against one device: every figure an int of bytes unless named."""

    kernel: str
    width_multiple: int | None  # None: the Triton list has no width axis
    shapes: int
    capture_sizes: list[int]
    device_bytes: int
    utilization: float
    usable_bytes: int
    weights_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_block: int
    capture_workspace_bytes: int
    traced_workspace_bytes: int
    workspace_difference_bytes: int
    traced_peak_bytes: int
    graph_outputs_bytes: int
    shared_output_bytes: int
    capture_pool_bytes: int
    capture_pool_per_graph_bytes: int
    activation_bytes: int
    persistent_bytes: int
    free_for_kv_bytes: int
    kv_blocks: int
    kv_tokens: int
    kv_pool_bytes: int
    min_blocks: int
    shortfall_bytes: int  # bytes the list lacks to fit (0 when it fits)
    fits: bool
    fits_detail: str
    full_batch_blocks: int
    full_batch_fits: bool
    max_batch: int
    max_model_len: int
    block_size: int
    dtype: str
    capture_output: str  # the capture the fit was judged on: shared or per-graph outputs
    startup_s: float  # shapes x record_s_per_graph: recording the list before serving
    record_s_per_graph: float
    record_s_source: str  # "measured: --record-s-per-graph" or the model and its source
    # The command's search fills these; a row priced alone has not searched.
    smallest_fitting_width_multiple: int | None = None
    largest_fitting_shapes: int | None = None


def capture_list(
    kernel: str,
    max_batch: int,
    max_model_len: int,
    width_multiple: int,
    capture_sizes: tuple[int, ...] | None = None,
) -> tuple[tuple[int, int], ...]:
    """The shapes a kernel records: rows x widths (reference) or rows only (triton).

    Rows are the power-of-two ladder up to max_batch, or `capture_sizes` (a server's list).
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
    width_free = kernel == "triton"
    if capture_sizes is not None:
        top = capture_sizes[-1]
        return DecodeBuckets(
            top, max_model_len, width_multiple, width_free=width_free, row_sizes=capture_sizes
        ).shapes
    return DecodeBuckets(max_batch, max_model_len, width_multiple, width_free=width_free).shapes


def workspace_pool_bytes(kernel: str, shapes, heads: int) -> int:
    """The formula: the largest [rows, heads, 1, width] fp32 score rectangle of the list.

    Shown beside the traced workspace, never summed: it leaves out every other intermediate.
    The Triton kernel materialises no score rectangle, so its list prices at 0 here.
    """
    return 0 if kernel == "triton" else shared_pool_bytes(shapes, heads, FP32)


def graph_outputs_bytes(shapes, vocab: int) -> int:
    """sum(rows) * vocab * 4: each recorded graph keeps its own fp32 logits buffer alive.

    Unlike the workspace this is not shared: an output lives for the life of its graph, so a
    later recording cannot reuse it, and it grows with the list.
    """
    return sum(rows for rows, _ in shapes) * vocab * FP32


def decode_activation_bytes(
    max_batch: int, hidden: int, intermediate: int, vocab: int, dtype_bytes: int
) -> int:
    """A decode step's largest live set outside attention at max_batch rows (an estimate).

    max_batch * (2 * hidden * dtype_bytes [residual and normed stream]
                 + 2 * intermediate * dtype_bytes [gate and up projections]
                 + vocab * 4 [fp32 logits]).
    """
    per_row = 2 * hidden * dtype_bytes + 2 * intermediate * dtype_bytes + vocab * FP32
    return max_batch * per_row


def persistent_bytes(max_batch: int, max_model_len: int) -> int:
    """The slot table and the four step input buffers: held for the life of the engine."""
    return slot_table_bytes(max_batch, max_model_len) + input_buffer_bytes(max_batch)


def traced_list(
    model: ModelConfig, kernel: str, dtype: str, max_batch: int, max_model_len: int, shapes
):
    """The list's memory traced on the engine's decode forward (fake tensors)."""
    # A server's list may capture more rows than --max-batch (vLLM goes to 2x max_num_seqs):
    # the traced engine holds the list's largest row count.
    top_rows = max(max_batch, *(rows for rows, _ in shapes))
    return list_memory(decode_memory(model, kernel, dtype, top_rows, max_model_len), shapes)


def judged_fit(*pool_args) -> tuple[bool, str]:
    """`check_pool_budget` as a verdict: (fits, the one line that says why not, or "ok")."""
    try:
        check_pool_budget(*pool_args)
    except PoolUnsound as e:
        return False, str(e)
    return True, "ok"


def capture_pool_bytes(traced, capture_output: str) -> int:
    """What the capture of `capture_output` holds: shared is what the engine records, per-graph
    what a capture keeping each graph's logits holds."""
    if capture_output not in CAPTURE_OUTPUTS:
        raise ValueError(f"capture output {capture_output!r}: expected one of {CAPTURE_OUTPUTS}")
    return traced.shared_bytes if capture_output == "shared" else traced.per_graph_bytes


def budget_row(
    model: ModelConfig,
    *,
    kernel: str,
    width_multiple: int,
    device_bytes: int,
    utilization: float,
    max_batch: int,
    max_model_len: int,
    block_size: int,
    dtype: str = "float32",
    capture_sizes: tuple[int, ...] | None = None,
    capture_output: str = "shared",
    measured_record_s: float | None = None,
    device: str = "cpu",
) -> BudgetRow:
    """One capture list priced against one device, the fit judged on `capture_output`'s pool;
    its startup seconds from `measured_record_s` per graph, else `device`'s model."""
    dtype_bytes = DTYPE_BYTES[dtype]
    shapes = capture_list(kernel, max_batch, max_model_len, width_multiple, capture_sizes)
    weights = weights_bytes(model.num_params, dtype_bytes)
    kv_shape = (model.num_layers, model.num_kv_heads, model.head_dim, dtype_bytes)
    per_token = kv_bytes_per_token(*kv_shape)
    per_block = kv_bytes_per_block(*kv_shape, block_size)
    formula = workspace_pool_bytes(kernel, shapes, model.num_heads)
    traced = traced_list(model, kernel, dtype, max_batch, max_model_len, shapes)
    capture = capture_fields(traced, formula, capture_output)
    capture_pool = capture["capture_pool_bytes"]
    held = step_held_fields(model, max_batch, max_model_len, dtype_bytes)
    others = held["activation_bytes"] + held["persistent_bytes"]
    free = free_for_kv_bytes(device_bytes, utilization, weights, capture_pool, others)
    kv = kv_pool_fields(free, per_block, block_size, max_batch, max_model_len)
    fits, why = judged_fit(
        device_bytes, utilization, weights, capture_pool, others, per_block, kv["min_blocks"]
    )
    return BudgetRow(
        kernel=kernel,
        width_multiple=None if kernel == "triton" else width_multiple,
        shapes=len(shapes),
        capture_sizes=sorted({rows for rows, _ in shapes}),
        device_bytes=device_bytes,
        utilization=utilization,
        usable_bytes=int(device_bytes * utilization),
        weights_bytes=weights,
        kv_bytes_per_token=per_token,
        kv_bytes_per_block=per_block,
        **capture,
        **held,
        **kv,
        fits=fits,
        fits_detail=why,
        max_batch=max_batch,
        max_model_len=max_model_len,
        block_size=block_size,
        dtype=dtype,
        capture_output=capture_output,
        **startup_fields(len(shapes), measured_record_s, device),
    )


def capture_fields(traced, formula: int, capture_output: str) -> dict:
    """A row's capture figures: the formula beside the traced workspace, peak, outputs and pools."""
    workspace = traced.shared_workspace_bytes
    return {
        "capture_workspace_bytes": formula,
        "traced_workspace_bytes": workspace,
        "workspace_difference_bytes": workspace - formula,
        "traced_peak_bytes": traced.shared_output_pool_bytes,
        "graph_outputs_bytes": traced.outputs_bytes,
        "shared_output_bytes": traced.shared_output_bytes,
        "capture_pool_bytes": capture_pool_bytes(traced, capture_output),
        "capture_pool_per_graph_bytes": traced.per_graph_bytes,
    }


def step_held_fields(
    model: ModelConfig, max_batch: int, max_model_len: int, dtype_bytes: int
) -> dict:
    """What a decode step holds beside the capture pool and the KV: activations, table, inputs."""
    return {
        "activation_bytes": decode_activation_bytes(
            max_batch, model.hidden_size, model.intermediate_size, model.vocab_size, dtype_bytes
        ),
        "persistent_bytes": persistent_bytes(max_batch, max_model_len),
    }


def kv_pool_fields(
    free: int, per_block: int, block_size: int, max_batch: int, max_model_len: int
) -> dict:
    """What the bytes left for KV hold: whole blocks, tokens, the one-sequence minimum, a batch."""
    blocks = kv_blocks(free, per_block)
    min_blocks = -(-max_model_len // block_size)
    full_batch = kv_blocks_needed(max_batch, max_model_len, block_size)
    return {
        "free_for_kv_bytes": free,
        "kv_blocks": blocks,
        "kv_tokens": blocks * block_size,
        "kv_pool_bytes": blocks * per_block,
        "min_blocks": min_blocks,
        "shortfall_bytes": kv_shortfall_bytes(free, per_block, min_blocks),
        "full_batch_blocks": full_batch,
        "full_batch_fits": blocks >= full_batch,
    }


def startup_fields(shapes: int, measured_record_s: float | None, device: str) -> dict:
    """A list's startup seconds, the per-graph figure they stand on and where it comes from."""
    per_graph, source = record_s_per_graph(measured_record_s, device)
    return {
        "startup_s": capture_startup_s(shapes, per_graph),
        "record_s_per_graph": per_graph,
        "record_s_source": source,
    }


def candidate_multiples(block_size: int, max_model_len: int) -> list[int]:
    """Powers of two from block_size to max_model_len, and max_model_len itself (one width)."""
    found = {max_model_len}
    m = 1
    while m <= max_model_len:
        if m >= block_size:
            found.add(m)
        m *= 2
    return sorted(found)


def smallest_fitting(model: ModelConfig, kernel: str, **budget) -> BudgetRow | None:
    """The row of the largest capture list (smallest width multiple) that fits, or None."""
    if kernel == "triton":
        row = budget_row(model, kernel=kernel, width_multiple=budget["max_model_len"], **budget)
        return row if row.fits else None
    for multiple in candidate_multiples(budget["block_size"], budget["max_model_len"]):
        row = budget_row(model, kernel=kernel, width_multiple=multiple, **budget)
        if row.fits:
            return row
    return None


# -- a --target's capture list (nanobench.memory.target_memory) -------------------------------


@dataclass(frozen=True)
class TargetSizeRow:
    """One capture size of the user's step, priced on the meta device."""

    table: str  # "size"
    target: str
    rows: int
    state_bytes: int  # what the factory left allocated at this many rows
    workspace_bytes: int  # the step's transient peak: what a graph's pool must hold
    reserved_bytes: int  # the segments a private pool for this step reserves (allocator model)
    outputs_bytes: int  # what the step returns: what a recorded graph keeps
    peak_bytes: int
    allocations: int
    dtype: str


@dataclass(frozen=True)
class TargetFitRow:
    """The user's capture list against a device: state + shared pool + outputs under the cap."""

    table: str  # "fit"
    target: str
    capture_sizes: list[int]
    graphs: int
    state_bytes: int  # at the largest size: one set of weights and caches serves every graph
    shared_pool_bytes: int  # the largest workspace
    private_pools_bytes: int  # every workspace summed (a pool per graph)
    shared_pool_reserved_bytes: int  # segments one pool reserves for the whole list
    private_pools_reserved_bytes: int  # segments a pool per graph reserves, summed
    outputs_bytes: int  # summed per graph, or one buffer when the target declares it shared
    shared_output: bool
    need_bytes: int  # state + shared pool + outputs
    device_bytes: int
    utilization: float
    usable_bytes: int
    fits: bool
    shortfall_bytes: int  # need - usable when it does not fit, else 0
    largest_fitting_sizes: list[int]  # the longest prefix of the list that fits
    dtype: str


def target_rows(
    spec: str, memory, *, device_bytes: int, utilization: float, dtype: str
) -> tuple[list[TargetSizeRow], TargetFitRow]:
    """The per-size rows and the fit row of a `TargetListMemory`."""
    import math

    from nanobench.memory.reserved import reserved_bytes
    from nanobench.memory.target_memory import largest_fitting

    sizes = [
        TargetSizeRow(
            table="size",
            target=spec,
            rows=s.rows,
            state_bytes=s.state_bytes,
            workspace_bytes=s.workspace_bytes,
            reserved_bytes=reserved_bytes(s.events),
            outputs_bytes=s.outputs_bytes,
            peak_bytes=s.peak_bytes,
            allocations=s.allocations,
            dtype=dtype,
        )
        for s in memory.sizes
    ]
    usable = math.floor(device_bytes * utilization)
    need = memory.total_bytes
    fit = TargetFitRow(
        table="fit",
        target=spec,
        capture_sizes=[s.rows for s in memory.sizes],
        graphs=len(memory.sizes),
        state_bytes=memory.state_bytes,
        shared_pool_bytes=memory.shared_pool_bytes,
        private_pools_bytes=memory.private_pools_bytes,
        shared_pool_reserved_bytes=memory.shared_reserved_bytes,
        private_pools_reserved_bytes=memory.private_reserved_bytes,
        outputs_bytes=memory.outputs_bytes,
        shared_output=memory.shared_output,
        need_bytes=need,
        device_bytes=device_bytes,
        utilization=utilization,
        usable_bytes=usable,
        fits=need <= usable,
        shortfall_bytes=max(0, need - usable),
        largest_fitting_sizes=list(largest_fitting(memory, usable)),
        dtype=dtype,
    )
    return sizes, fit
