"""The bucket bench: what a closed decode shape set costs, measured off real plans on the host.

What it is: `measure(spec)`. Per run length it builds a real `BatchedPagedKVCache` (1 layer,
1 KV head, head_dim 2: the pools are tiny, the addressing is the engine's) and calls
`plan_decode` once per step, open and bucketed, timing each call with `time.perf_counter`,
because the plan's host cost is part of the price. Shapes and cells come from the plans
(`graph_rows`, `graph_width`, `graph_cells`, `open_cells`) and are cross-checked against the
pure arithmetic in `nanobench.cost.buckets`. Then the capture list at a serving configuration
per width multiple, for the reference kernel and the width-free (Triton) one, each with the
seconds recording it adds to a start (`startup_seconds`), and the gates.
What it is not: a model run (no weights, no compiler, no device) or a report (no printing).
Invariant: every number in a run row was read off a plan `plan_decode` built, and agrees with
`bucket_run` for the same buckets (`check_plans_match_arithmetic`).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from engine.buckets import DecodeBuckets
from engine.cache import BatchedPagedKVCache
from engine.capture_sizes import mix_pad_share, sglang_sizes, size_padding, vllm_sizes
from engine.config import EngineConfig, ModelConfig
from engine.inputs import StepInputs
from engine.plan import plan_decode
from nanobench.buckets.rows import BucketsResult, CaptureRow, RecommendedRow, RunRow, RunTrace
from nanobench.cost.buckets import bucket_run
from nanobench.cost.capture import capture_startup_s, record_s_per_graph, workspace_bytes
from nanobench.cost.capture_list import (
    batch_histogram,
    computed_rows,
    optimal_sizes,
    optimal_sizes_within,
    pad_share,
    padded_rows,
    uncovered_steps,
)
from nanobench.harness.errors import BadInput
from nanobench.memory.target_memory import list_memory

if TYPE_CHECKING:
    from nanobench.buckets.spec import BucketsSpec

# fp32 scores: the reference read softmaxes in float32 whatever the model dtype.
SCORE_DTYPE_BYTES = 4


class PriceMismatch(RuntimeError):
    """The plans and the arithmetic disagree about what a run costs."""


def run_buckets(spec: BucketsSpec, max_model_len: int):
    return DecodeBuckets(spec.max_batch, max_model_len, spec.multiple, width_free=spec.width_free)


def capture_buckets(spec: BucketsSpec, multiple: int, width_free: bool):
    if spec.sizes is not None:
        # The list is the row axis: its largest size is the top row bucket.
        return DecodeBuckets(
            spec.sizes[-1],
            spec.capture_tokens,
            multiple,
            width_free=width_free,
            row_sizes=spec.sizes,
        )
    return DecodeBuckets(spec.capture_rows, spec.capture_tokens, multiple, width_free=width_free)


def _cache(spec: BucketsSpec, max_model_len: int):
    """A real cache and its persistent step inputs, with the prompt rows admitted."""
    # The addressing does not depend on the model's width: the smallest legal one keeps the
    # pools small (tens of kilobytes) while every slot, block and table is the engine's own.
    model = ModelConfig(
        vocab_size=1,
        hidden_size=2,
        intermediate_size=1,
        num_layers=1,
        num_heads=1,
        num_kv_heads=1,
        head_dim=2,
    )
    config = EngineConfig(
        max_batch_size=spec.max_batch, max_model_len=max_model_len, block_size=spec.block_size
    )
    cache = BatchedPagedKVCache(model, config, torch.float32)
    for row in range(spec.rows):
        cache.add(row, spec.prompt_len)
    # The engine plans into persistent buffers by default (persist_inputs=True); so does this.
    return cache, StepInputs(spec.max_batch, cache.device)


def _facts(plan) -> tuple[int, ...]:
    # Host ints only: a plan holds windows on buffers the next step overwrites.
    return (
        plan.graph_rows,
        plan.graph_width,
        plan.graph_cells,
        plan.open_cells,
        plan.max_ctx,
        plan.pad_rows,
    )


def _plan_runs(spec: BucketsSpec, steps: int, buckets) -> tuple[list, list, list, list, object]:
    """Plan `steps` decode steps open and through `buckets`, on two caches, step by step.

    Returns (open facts, bucketed facts, open seconds per step, bucketed seconds per step, the
    bucketed cache); a fact is (graph_rows, graph_width, graph_cells, open_cells, max_ctx,
    pad_rows). The two plans of a step are timed back to back, in alternating order, with the
    collector paused, so a noisy host shifts both totals rather than one.
    """
    mml = spec.run_len(steps)
    open_cache, open_inputs = _cache(spec, mml)
    bucket_cache, bucket_inputs = _cache(spec, mml)
    rows = list(range(spec.rows))
    width_free = buckets.width_free
    open_facts, bucket_facts = [], []
    open_s, bucket_s = [], []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for step in range(steps):
            for which in (0, 1) if step % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                if which == 0:
                    plan = plan_decode(open_cache, rows, None, open_inputs)
                    open_s.append(time.perf_counter() - t0)
                    open_facts.append(_facts(plan))
                else:
                    plan = plan_decode(bucket_cache, rows, buckets, bucket_inputs, width_free)
                    bucket_s.append(time.perf_counter() - t0)
                    bucket_facts.append(_facts(plan))
    finally:
        if collecting:
            gc.enable()
    return open_facts, bucket_facts, open_s, bucket_s, bucket_cache


def measure_run(spec: BucketsSpec, steps: int) -> tuple[RunRow, RunTrace]:
    """One run length priced open and bucketed through real plans."""
    mml = spec.run_len(steps)
    buckets = run_buckets(spec, mml)
    open_facts, bucket_facts, open_s, bucket_s, cache = _plan_runs(spec, steps, buckets)
    open_shapes = [(r, w) for r, w, *_ in open_facts]
    bucketed_shapes = [(r, w) for r, w, *_ in bucket_facts]
    distinct = list(dict.fromkeys(bucketed_shapes))
    cells_open = sum(f[2] for f in open_facts)
    cells_bucketed = sum(f[2] for f in bucket_facts)
    # The cells the bucketed plans would have computed unpadded: must equal the open run's.
    bucketed_open_cells = sum(f[3] for f in bucket_facts)
    arithmetic = bucket_run(spec.rows, spec.prompt_len, steps, buckets)
    row = RunRow(
        table="run",
        kernel=spec.kernel,
        steps=steps,
        rows=spec.rows,
        max_batch=spec.max_batch,
        prompt_len=spec.prompt_len,
        max_model_len=mml,
        width_multiple=spec.multiple,
        pad_rows=bucket_facts[0][5] if bucket_facts else 0,
        shapes_open=len(set(open_shapes)),
        shapes_bucketed=len(distinct),
        waste=1.0 - cells_open / cells_bucketed if cells_bucketed else 0.0,
        cells_open=cells_open,
        cells_bucketed=cells_bucketed,
        plan_ms_open=1e3 * sum(open_s),
        plan_ms_bucketed=1e3 * sum(bucket_s),
        # A shared host stalls single calls; the median step says what a plan costs without them.
        plan_us_open_median=1e6 * statistics.median(open_s),
        plan_us_bucketed_median=1e6 * statistics.median(bucket_s),
        bucket_shapes=[list(s) for s in distinct],
        bucketed_open_cells=bucketed_open_cells,
        arith_shapes_open=arithmetic.open_count,
        arith_shapes_bucketed=arithmetic.bucketed_count,
        arith_cells_open=arithmetic.open_cells,
        arith_cells_bucketed=arithmetic.padded_cells,
        pool_slots=cache.sink_slot + 1,
        sink_slot=cache.sink_slot,
        blocks_used=cache.allocator.num_blocks - cache.allocator.num_free,
        num_blocks=cache.allocator.num_blocks,
        block_size=spec.block_size,
    )
    trace = RunTrace(
        steps=steps,
        real_rows=spec.rows,
        open_shapes=open_shapes,
        bucketed_shapes=bucketed_shapes,
        lens=[f[4] for f in bucket_facts],
        owned_blocks=sorted(b for t in cache.tables if t is not None for b in t.blocks),
    )
    return row, trace


def capture_row(spec: BucketsSpec, multiple: int) -> CaptureRow:
    """The capture list at (capture_rows, capture_tokens) for one width multiple, both kernels."""
    ref = capture_buckets(spec, multiple, width_free=False)
    free = capture_buckets(spec, multiple, width_free=True)
    typical = bucket_run(spec.rows, spec.prompt_len, spec.typical_steps, ref)
    # The largest member is the top of both ladders; `shapes` would materialise every pair.
    largest_rows, largest_width = ref.rows[-1], ref.widths[-1]
    shapes_for_kernel = free.count if spec.width_free else ref.count
    return CaptureRow(
        table="capture",
        kernel=spec.kernel,
        width_multiple=multiple,
        capture_rows=ref.max_batch_size,
        capture_tokens=spec.capture_tokens,
        row_buckets=len(ref.rows),
        width_buckets=len(ref.widths),
        shapes=ref.count,
        shapes_triton=free.count,
        waste=typical.waste,
        typical_rows=spec.rows,
        typical_prompt_len=spec.prompt_len,
        typical_steps=spec.typical_steps,
        heads=spec.heads,
        largest_shape=[largest_rows, largest_width],
        workspace_bytes=workspace_bytes(largest_rows, spec.heads, largest_width, SCORE_DTYPE_BYTES),
        # The Triton kernel keeps an online softmax in registers: no score rectangle at all.
        workspace_bytes_triton=0,
        chosen=multiple == spec.multiple,
        fits_budget=shapes_for_kernel <= spec.max_shapes,
        **capture_size_columns(ref.rows, spec.max_batch),
        **startup_seconds(spec, ref.count, free.count),
    )


def startup_seconds(spec: BucketsSpec, shapes: int, shapes_triton: int | None = None) -> dict:
    """Recording a list up front: graphs x one graph's seconds, measured or the CUDA model (a
    capture list is a server's, recorded on its GPU; `buckets` takes no device)."""
    per_graph, source = record_s_per_graph(spec.record_s_per_graph, "cuda")
    found = {
        "startup_s": capture_startup_s(shapes, per_graph),
        "record_s_per_graph": per_graph,
        "record_s_source": source,
    }
    if shapes_triton is not None:
        found["startup_s_triton"] = capture_startup_s(shapes_triton, per_graph)
    return found


def capture_size_columns(sizes: tuple[int, ...], max_batch: int) -> dict:
    """The row ladder, its padding per size, and over a uniform mix of batches 1..max_batch."""
    return {
        "capture_sizes": list(sizes),
        "size_padding": size_padding(sizes),
        "mix_batches": max_batch,
        "mix_pad_share": mix_pad_share(sizes, range(1, max_batch + 1)),
    }


def measure(spec: BucketsSpec, status: Callable[[str], None] = lambda _: None) -> BucketsResult:
    runs, traces = [], []
    status("warming the planner")
    # The first plan_decode in a process pays one-time costs (torch dispatch, allocator) that
    # would otherwise land on whichever run is measured first.
    shortest = min(spec.run_lengths)
    _plan_runs(spec, shortest, run_buckets(spec, spec.run_len(shortest)))
    for steps in spec.run_lengths:
        status(f"planning {steps} decode steps open and bucketed")
        row, trace = measure_run(spec, steps)
        runs.append(row)
        traces.append(trace)
    status("pricing the capture list per width multiple")
    capture = [capture_row(spec, m) for m in spec.table_multiples]
    recommended = [] if spec.batches is None else recommended_rows(spec)
    return BucketsResult(
        runs=runs, capture=capture, traces=traces, spec=spec, recommended=recommended
    )


def recommended_rows(spec: BucketsSpec) -> list[RecommendedRow]:
    """The list chosen for the trace (at most --max-graphs), then vLLM's and SGLang's on it."""
    mix = batch_histogram(spec.batches)
    budget = target_budget(spec, mix) if spec.device_bytes else None
    lists = {
        "recommended": optimal_sizes(mix, spec.max_graphs) if budget is None else budget[0],
        "vllm": vllm_sizes(spec.max_batch),
        "sglang": sglang_sizes(spec.max_batch),
    }
    rows = []
    for name, sizes in lists.items():
        uncovered = uncovered_steps(sizes, mix)
        padded = padded_rows(sizes, mix)
        covered = len(spec.batches) - uncovered
        rows.append(
            RecommendedRow(
                table="recommended",
                list_name=name,
                capture_sizes=list(sizes),
                graphs=len(sizes),
                max_graphs=spec.max_graphs,
                mix_pad_share=pad_share(sizes, mix),
                padded_rows=padded,
                computed_rows=computed_rows(sizes, mix),
                mean_pad_rows=padded / covered if covered else 0.0,
                trace_steps=len(spec.batches),
                trace_max_rows=max(mix),
                uncovered_steps=uncovered,
                max_batch=spec.max_batch,
                **startup_seconds(spec, len(sizes)),
                **(budget[1] if budget and name == "recommended" else {}),
            )
        )
    return rows


def target_budget(spec: BucketsSpec, mix) -> tuple[tuple[int, ...], dict]:
    """The least-padding list whose capture memory fits, and the budget fields of its row.

    The target is priced at every batch size of the trace (`--capture-tokens - 1` of context,
    one step). Beside the state at the largest batch and the shared pool (the largest
    workspace of any candidate: a bound, whatever the list), each graph keeps its outputs; when
    they are linear in rows (checked) the bytes left cap the rows the list may hold.
    """
    memory = list_memory(
        spec.target,
        tuple(mix),
        prompt_len=spec.capture_tokens - 1,
        steps=1,
        dtype=spec.dtype,
        length_option=f"--capture-tokens {spec.capture_tokens}",
    )
    usable = math.floor(spec.device_bytes * spec.gpu_memory_utilization)
    fixed = memory.state_bytes + memory.shared_pool_bytes
    outputs = {s.rows: s.outputs_bytes for s in memory.sizes}
    top = max(outputs)
    per_row = outputs[top] // top
    if memory.shared_output:
        fits = fixed + outputs[top] <= usable
        cap_rows = sum(mix) if fits else -1
    elif any(out != rows * per_row for rows, out in outputs.items()):
        raise BadInput(
            f"--target {spec.target!r}: its outputs are not linear in rows ({outputs}); the "
            "memory-bounded list needs bytes per row"
        )
    else:
        cap_rows = (usable - fixed) // per_row if usable >= fixed else -1
    sizes = optimal_sizes_within(mix, spec.max_graphs, cap_rows) if cap_rows >= 0 else None
    chosen = sizes or ()
    kept = outputs[top] if memory.shared_output else per_row * sum(chosen)
    need = fixed + kept
    return chosen, {"usable_bytes": usable, "need_bytes": need, "fits": sizes is not None}


def check_plans_match_arithmetic(row: RunRow) -> None:
    """The plans' shapes and cells equal `bucket_run`'s for the same buckets."""
    pairs = (
        ("shapes_open", "arith_shapes_open"),
        ("shapes_bucketed", "arith_shapes_bucketed"),
        ("cells_open", "arith_cells_open"),
        ("cells_bucketed", "arith_cells_bucketed"),
        ("bucketed_open_cells", "arith_cells_open"),
    )
    wrong = [
        f"{a} {getattr(row, a)} != {getattr(row, b)}"
        for a, b in pairs
        if getattr(row, a) != getattr(row, b)
    ]
    if wrong:
        raise PriceMismatch(
            f"run of {row.steps} steps: plans and arithmetic disagree: {'; '.join(wrong)}"
        )
