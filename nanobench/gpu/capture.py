"""The real capture path on CUDA, end to end: recorded up front, replayed, priced, compared.

What it is: `check_capture_path(kernel)`, which builds two engines from one checkpoint on CUDA,
an eager one and `Engine(capture_decode=True)` (the default recorder, which on CUDA is
`cuda_graph_recorder`), records the whole bucketed capture list up front into one shared pool
(`Engine.capture()` -> `capture_all`), and measures that pool around the recording
(`memory_reserved` / `memory_allocated` growth, and each recording's `max_memory_allocated`
peak) beside nanobench's own figures for the same list: the score-rectangle formula
(`capture_pools.pool_rows`) and the traced ones (`capture_memory.list_memory`: the pool is the
largest traced peak when every graph writes one shared logits buffer, the largest workspace
when each keeps its own; what stays allocated after the walk is the outputs the graphs keep,
none when shared). Run once per `capture_output`, it measures what the shared buffer saves. It then decodes `PHASES` batches of changing sizes, teacher-forcing
both engines with the eager engine's greedy tokens, and compares every step's logits.
What it is not: a timing (the milliseconds belong to `nanobench capture`), nor a CPU test: the
recorder seam's CPU side is `tests/test_captured.py`.
Invariant: a replay's logits are copied out before the next step (a one-step lifetime); the
row's `ok` holds only what this run proved: every graph is a `torch.cuda.CUDAGraph` in one
pool, nothing recorded mid-run, every step replayed, and every step within tolerance.
"""

from __future__ import annotations

import gc

import torch

from engine.captured import CaptureStats
from engine.engine import Engine
from engine.recorders import STREAMS, ordinary_pool_bytes, warm_library_state
from engine.weights import DTYPES
from nanobench.capture.pools import pool_rows
from nanobench.cost.pool import check_pool_shared
from nanobench.harness.step.dynamo_explain import seeded_prompts

# Batch sizes of the successive batches (row buckets 4, 8, 1, 8) and steps per batch: 32 steps.
PHASES = (3, 8, 1, 5)
STEPS_PER_PHASE = 8
MAX_BATCH = 8
MAX_MODEL_LEN = 256
WIDTH_MULTIPLE = 64
# Both engines run the same kernels in the same dtype, but two engines may pick different GEMM
# algorithms; the logits leave a bf16 head GEMM, so allow two roundings at the logits' scale.
TOL_ULPS = 2


def engine_options(
    kernel: str, dtype: str, device: str, capture: bool, capture_output: str = "shared"
) -> dict:
    return dict(
        capture_output=capture_output,
        max_batch_size=MAX_BATCH,
        max_model_len=MAX_MODEL_LEN,
        dtype=dtype,
        device=device,
        attention=kernel,
        bucket_decode=True,
        width_multiple=WIDTH_MULTIPLE,
        persist_inputs=True,
        capture_decode=capture,
    )


def predicted_pool_bytes(engine: Engine) -> int:
    """nanobench's shared-pool figure for this engine's capture list, as `capture` prints it."""
    cfg = engine.config
    rows = pool_rows(engine.model_config.num_heads, MAX_BATCH, cfg.max_model_len, [WIDTH_MULTIPLE])
    return next(r.shared_pool_bytes for r in rows if r.kernel == engine.attention)


def traced_pool(engine: Engine) -> dict:
    """The traced figures of this engine's capture list, under fake tensors."""
    from nanobench.memory.decode_workspace import decode_memory, list_memory

    cfg = engine.config
    memory = decode_memory(
        engine.model_config, engine.attention, cfg.dtype, MAX_BATCH, cfg.max_model_len
    )
    traced = list_memory(memory, engine.buckets.shapes)
    shared = cfg.capture_output == "shared"
    return {
        # what the pool must hold: the logits are a transient of it when copied out
        "traced_pool_bytes": (
            traced.shared_output_pool_bytes if shared else traced.shared_workspace_bytes
        ),
        # what stays allocated after the walk: the outputs the graphs keep (the shared
        # buffer was allocated with the engine, before the walk)
        "traced_kept_bytes": 0 if shared else traced.outputs_bytes,
        "shared_output_bytes": traced.shared_output_bytes if shared else 0,
    }


def measured_capture(engine: Engine) -> tuple[object, dict]:
    """engine.capture() with the device memory it took: reserved, allocated, peak bytes.

    Each figure is net of what a library took outside every graph's pool over the walk
    (`library_bytes`: cuBLAS workspaces of a stream new to it), as `memory_check` nets its own;
    the recorder's streams are warmed before the first reading, so that is 0 when it worked.
    """
    device = engine.cache.device
    if device.type != "cuda":
        return engine.capture(), {}
    warm_library_state(device)
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    library = ordinary_pool_bytes(device)
    stats = engine.capture()
    torch.cuda.synchronize()
    library = ordinary_pool_bytes(device) - library
    return stats, {
        "pool_reserved_bytes": torch.cuda.memory_reserved() - reserved - library,
        "pool_allocated_bytes": torch.cuda.memory_allocated() - allocated - library,
        # record() resets the peak per shape: the largest recording's peak above its start
        "pool_peak_bytes": max((s.peak_bytes or 0) for s in stats.shapes),
        "library_bytes": library,
    }


def phase_prompts(phase: int, rows: int, vocab: int) -> list[list[int]]:
    """Seeded prompts whose lengths differ by phase, so widths cross bucket edges."""
    length = 9 + 60 * phase  # 9, 69, 129, 189: with 8 steps each, widths 64, 128, 192, 256
    return seeded_prompts(rows, length, vocab, seed=phase)


def drive_phases(eager: Engine, captured: Engine, dtype: torch.dtype) -> tuple[float, float, int]:
    """(max |replayed - eager|, tolerance, steps) over every phase, teacher-forced by eager."""
    worst, tolerance, steps = 0.0, float("inf"), 0
    vocab = eager.model_config.vocab_size
    for phase, rows in enumerate(PHASES):
        batch = phase_prompts(phase, rows, vocab)
        tokens = eager.prefill(batch).argmax(-1).tolist()
        captured.prefill(batch)
        for _ in range(STEPS_PER_PHASE):
            want = eager.decode_step(tokens)  # (B, V)
            got = captured.decode_step(tokens).clone()  # (B, V) out of the replay's buffer
            scale = float(want.abs().max())
            tolerance = min(tolerance, TOL_ULPS * torch.finfo(dtype).eps * scale)
            worst = max(worst, float((got - want).abs().max()))
            tokens = want.argmax(-1).tolist()
            steps += 1
        eager.release_all()
        captured.release_all()
    return worst, tolerance, steps


def check_capture_path(
    kernel: str,
    *,
    model: str = "tiny",
    dtype: str = "bfloat16",
    device: str = "cuda",
    capture_output: str = "shared",
) -> dict:
    """One row: the capture list recorded up front, 32 replayed steps, the pool measured.

    device "cpu" runs the same path with the eager recorder and no memory figures (a test).
    """
    eager = Engine.from_checkpoint(model, **engine_options(kernel, dtype, device, False))
    captured = Engine.from_checkpoint(
        model, **engine_options(kernel, dtype, device, True, capture_output)
    )
    with torch.no_grad():
        stats, memory = measured_capture(captured)
        worst, tolerance, steps = drive_phases(eager, captured, DTYPES[dtype])
    graphs = captured.decode_graphs
    predicted = predicted_pool_bytes(captured)
    problems = recording_problems(captured, stats, steps, device)
    if not worst <= tolerance:
        problems.append(f"replayed logits differ from eager by {worst:.3g} > {tolerance:.3g}")
    reserved = memory.get("pool_reserved_bytes")
    allocated = memory.get("pool_allocated_bytes")
    traced = traced_pool(captured)
    kept = traced["shared_output_bytes"] or traced["traced_kept_bytes"]
    if graphs.output_bytes != kept:
        problems.append(f"the graphs keep {graphs.output_bytes} output bytes, traced {kept}")
    return {
        "check": "capture",
        "name": f"{model} {kernel} {dtype} {capture_output} output",
        "ok": not problems,
        "kernel": kernel,
        "dtype": dtype,
        "capture_output": capture_output,
        "steps": steps,
        "shapes": stats.count,
        "replays": graphs.replays,
        "recorded_mid_run": graphs.recorded_mid_run,
        "max_abs_diff": worst,
        "tolerance": tolerance,
        **memory,
        "predicted_pool_bytes": predicted,
        "pool_diff_pct": (
            100.0 * (reserved - predicted) / predicted
            if predicted and reserved is not None
            else None
        ),
        **traced,
        "graph_output_bytes": graphs.output_bytes,
        "traced_pool_diff_pct": diff_pct(reserved, traced["traced_pool_bytes"]),
        "traced_kept_diff_pct": diff_pct(allocated, traced["traced_kept_bytes"]),
        "capture_s": stats.total_s,
        "detail": "; ".join(problems),
    }


def recording_problems(captured: Engine, stats: CaptureStats, steps: int, device: str) -> list[str]:
    """A line per broken promise: CUDA recorder, one pool, whole list, none mid-run, replays."""
    graphs = captured.decode_graphs
    problems = []
    recorded = [g.keepalive for g in graphs.graphs.values()]
    if device == "cuda" and not all(isinstance(g, torch.cuda.CUDAGraph) for g in recorded):
        problems.append("a graph was not recorded by the CUDA recorder")
    try:
        check_pool_shared(graphs.pools)
    except Exception as e:
        problems.append(str(e))
    if stats.count != captured.buckets.count:
        problems.append(f"{stats.count} shapes recorded, the list has {captured.buckets.count}")
    if graphs.recorded_mid_run:
        problems.append(f"{graphs.recorded_mid_run} graphs recorded mid-run")
    if graphs.replays != steps:
        problems.append(f"{graphs.replays} replays for {steps} steps")
    return problems


def diff_pct(measured: int | None, traced: int) -> float | None:
    """100 x (measured - traced) / traced; None with nothing measured or nothing traced."""
    return 100.0 * (measured - traced) / traced if measured is not None and traced else None


def check_target_reserved(
    spec: str, rows: int, dtype: str = "bfloat16", prompt_len: int = 255, steps: int = 1
) -> dict:
    """Record one graph of a --target's step on CUDA; its pool's reserved growth beside the
    priced figures (the meta trace's workspace and the caching-allocator model's reserved).

    The step is warmed up on a side stream first (as `torch.cuda.graph` asks), and both streams
    are the recorder's own, their library state made first (`warm_library_state`), so the
    growth read around the recording is the graph's private pool: whole segments.
    """
    from nanobench.harness.step.targets import inputs_at, make_target
    from nanobench.memory.reserved import reserved_bytes
    from nanobench.memory.target_memory import size_memory

    protocol = {"rows": rows, "prompt_len": prompt_len, "steps": steps, "dtype": dtype}
    priced, _ = size_memory(spec, as_device="cuda", **protocol)
    made = make_target(spec, device="cuda", **protocol)
    args, kwargs = inputs_at(made, 0)
    device = torch.device("cuda", torch.cuda.current_device())
    with torch.no_grad():
        warm_library_state(device)
        side = STREAMS.get(device, "side")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            made.forward(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        before = torch.cuda.memory_reserved()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=STREAMS.get(device, "capture")):
            out = made.forward(*args, **kwargs)
        torch.cuda.synchronize()
        growth = torch.cuda.memory_reserved() - before
    modelled = reserved_bytes(priced.events)
    del out, graph, made
    return {
        "check": "target-memory",
        "name": f"{spec} {rows} rows {dtype} one graph",
        "rows": rows,
        "traced_workspace_bytes": priced.workspace_bytes,
        "traced_peak_bytes": priced.peak_bytes,
        "model_reserved_bytes": modelled,
        "measured_reserved_bytes": growth,
        "diff_pct": diff_pct(growth, modelled),
        # A pool holds at least its live peak; how far the model is off is reported, not gated.
        "ok": growth >= priced.peak_bytes,
    }
