"""The traced capture memory held against real allocations: the profiler on CPU, a capture on CUDA.

What it is: `real_trace`, the tracker run over one real decode forward (real tensors, random
weights, full depth), `profiled_peak_bytes`, an independent count of the same forward's
allocations from the profiler's allocation events (`profile_memory=True`), and
`cuda_capture_check`, which records one graph on a CUDA device and reads the allocator's peak
around it, for `make gpu-check` to call.
What it is not: the pricing (that is `nanobench.memory.decode_workspace`, under fake tensors).
Invariant: every measured figure here comes from real allocations, never from a trace.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.captured import padding_plan
from engine.config import ModelConfig
from nanobench.memory.decode_workspace import (
    ShapeMemory,
    build_engine,
    decode_memory,
    engine_config,
    replay,
    trace_forward,
)


def real_trace(
    model: ModelConfig, kernel: str, dtype: str, rows: int, width: int, max_model_len: int
) -> tuple[ShapeMemory, int]:
    """(the tracker over one real forward at full depth, the profiler's peak of that forward)."""
    engine = build_engine(model, engine_config(kernel, dtype, rows, max_model_len))
    read_width = max_model_len if kernel == "triton" else width
    trace = trace_forward(engine, rows, read_width)
    workspace, outputs, peak = replay(trace.events, trace.kept)
    input_ids, plan = padding_plan(engine.cache, engine.inputs, rows, read_width)
    with torch.no_grad():
        profiled = profiled_peak_bytes(engine.decode_forward, input_ids, plan)
    return ShapeMemory(kernel, rows, width, workspace, outputs, peak), profiled


def profiled_peak_bytes(fn: Callable, *args) -> int:
    """Peak of the running sum of the CPU allocator's allocation events while fn runs."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args)
    del out
    found: list[tuple[int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            # alloc_size is negative for a free: the running sum is the live bytes.
            found.append((node.start_time_ns, node.extra_fields.alloc_size))
        stack.extend(node.children)
    live = peak = 0
    for _, size in sorted(found):
        live += size
        peak = max(peak, live)
    return peak


def cuda_capture_check(
    model: ModelConfig,
    kernel: str = "triton",
    dtype: str = "bfloat16",
    rows: int = 64,
    width: int = 2048,
) -> dict:
    """Record one graph on CUDA and compare the allocator's peak with the traced peak.

    measured = max_memory_allocated during the recording (warm-up included, which runs the
    same forward) minus what was allocated before. The recorder's streams get their library
    state (cuBLAS workspaces) before the window opens (`warm_library_state`); whatever a
    library still takes in it outlives the graph, so what is still allocated once the graph is
    gone is counted apart (`library_bytes`, 0 when the warm-up covered it) and the comparison
    is on the rest; traced = `peak_bytes` of the same shape under fake tensors. The caching
    allocator rounds each block up to 512 bytes.
    """
    import gc

    from engine.recorders import cuda_graph_recorder, warm_library_state

    device = torch.device("cuda")
    engine = build_engine(model, engine_config(kernel, dtype, rows, width, device="cuda"))
    input_ids, plan = padding_plan(engine.cache, engine.inputs, rows, width)
    with torch.no_grad():
        engine.decode_forward(input_ids, plan)  # library workspaces (cuBLAS) before measuring
        warm_library_state(device)  # and those of the recorder's own two streams
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        recording = cuda_graph_recorder(engine.decode_forward, (input_ids, plan))
        torch.cuda.synchronize(device)
        measured = torch.cuda.max_memory_allocated(device) - before
    del recording
    gc.collect()
    torch.cuda.synchronize(device)
    library = max(torch.cuda.memory_allocated(device) - before, 0)
    traced = decode_memory(model, kernel, dtype, rows, width).at(rows, width)
    net = measured - library
    return {
        "kernel": kernel,
        "rows": rows,
        "width": width,
        "dtype": dtype,
        "traced_peak_bytes": traced.peak_bytes,
        "measured_peak_bytes": measured,
        "library_bytes": library,
        "diff_pct": 100.0 * (net - traced.peak_bytes) / traced.peak_bytes,
    }
