"""The capture bench: drive an eager engine and a capturing engine identically, then price pools.

What it is: `run_rows`, which for each run length decodes the same seeded prompts through a
bucketed eager engine and a bucketed capturing engine (lazily, or after `Engine.capture()` up
front), teacher-forcing the capturing one with the eager tokens so the logits are compared
step by step; `pool_rows` and `held_rows`, the score-rectangle pool table and what a step holds at the top
of the capture list, from `nanobench.cost.capture`; and `measure_pools`, which on CUDA records
each list for real and reads what the pool grew by.
What it is not: a unit test of the recorder (tests/test_captured.py) or a timing claim in a
test: the milliseconds here are what this machine measured once.
Invariant: rows are measured, never constants; every run builds a fresh capturing engine so
its recordings belong to that run alone; logits are copied out of the replay's buffer before
the next step (check_output_not_held).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from engine.buckets import DecodeBuckets
from engine.captured import check_all_shapes_captured, check_output_not_held
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from nanobench.capture_rows import HeldRow, PoolRow, RunRow
from nanobench.common import gate
from nanobench.cost.buckets import bucket_run
from nanobench.cost.capture import (
    capture_reuse_share,
    input_buffer_bytes,
    pool_sharing_ratio,
    private_pool_bytes,
    shared_pool_bytes,
    slot_table_bytes,
    workspace_bytes,
)
from nanobench.cost.pool import check_pool_shared
from nanobench.explain import seeded_prompts

# The reference read's softmax runs in fp32 (`scores.float()`), so the rectangle the pool
# must hold is fp32 whatever the model dtype.
SCORE_BYTES = 4
# Replayed logits are the same kernels on the same shapes (both engines are bucketed): on CPU
# (eager recorder) they are bit-identical. On a device the two engines may pick different GEMM
# algorithms, so the tolerance is relative to the logits' scale and follows the dtype's eps.
CUDA_RTOL = {"float32": 1e-4, "bfloat16": 3e-2, "float16": 4e-3}


def replay_tolerance(device: str, dtype: str, scale: float) -> float:
    """0 on CPU (same kernel, same shape); CUDA_RTOL[dtype] x the largest |logit| on a GPU."""
    return 0.0 if device == "cpu" else CUDA_RTOL[dtype] * scale


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def copy_out(logits: torch.Tensor) -> torch.Tensor:
    """What the bench keeps of a step: a copy, because the next replay writes through `logits`."""
    return logits.clone()


def drive(engine: Engine, batch: list[list[int]], steps: int, forced=None):
    """Prefill, then `steps` decode steps; returns (tokens fed, logits copies, decode ms).

    With `forced`, step i feeds forced[i] instead of this engine's own greedy tokens.
    """
    device = engine.config.device
    tokens = engine.prefill(batch).argmax(-1).tolist()
    fed, held, elapsed = [], [], 0.0
    for i in range(steps):
        if forced is not None:
            tokens = forced[i]
        fed.append(tokens)
        _sync(device)
        start = time.perf_counter()
        logits = engine.decode_step(tokens)  # (B, V) a view on the replay's buffer when captured
        nxt = logits.argmax(-1).tolist()
        elapsed += time.perf_counter() - start
        held.append(copy_out(logits))
        tokens = nxt
    engine.release_all()
    return fed, held, elapsed * 1e3


def run_config(
    rows: int,
    prompt_len: int,
    steps: list[int],
    width_multiple: int,
    kernel: str,
    device: str,
    dtype: str,
    capture: bool,
) -> EngineConfig:
    """One server config for every run length: max_model_len = prompt_len + max(steps)."""
    return EngineConfig(
        max_batch_size=rows,
        max_model_len=prompt_len + max(steps),
        dtype=dtype,
        device=device,
        attention=kernel,
        bucket_decode=True,
        width_multiple=width_multiple,
        persist_inputs=True,
        capture_decode=capture,
    )


def run_rows(
    model: ModelConfig,
    tensors: dict | None,
    *,
    rows: int,
    prompt_len: int,
    steps: list[int],
    width_multiple: int,
    up_front: bool,
    kernel: str = "reference",
    device: str = "cpu",
    dtype: str = "float32",
    recorder: Callable | None = None,
    status: Callable[[str], None] = lambda _m: None,
) -> tuple[list[RunRow], list[dict]]:
    """Table 1 rows and per-shape up-front capture records."""
    eager_cfg = run_config(rows, prompt_len, steps, width_multiple, kernel, device, dtype, False)
    capture_cfg = run_config(rows, prompt_len, steps, width_multiple, kernel, device, dtype, True)
    eager = Engine.build(model, tensors, eager_cfg)
    batch = seeded_prompts(rows, prompt_len, model.vocab_size)
    # Untimed warm-up: the first steps of a process pay lazy initialisation on every backend.
    drive(eager, batch, min(4, max(steps)))
    out, shapes = [], []
    for n in steps:
        status(f"capture bench: {n} steps eager")
        fed, eager_logits, eager_ms = drive(eager, batch, n)
        engine = Engine.build(model, tensors, capture_cfg, recorder=recorder)
        graphs = engine.decode_graphs
        capture_s = None
        stats = None
        if up_front:
            status(f"capture bench: recording {engine.buckets.count} shapes up front")
            stats = engine.capture()
            capture_s = stats.total_s
            shapes += [
                {
                    "steps": n,
                    "rows": s.shape[0],
                    "width": s.shape[1],
                    "record_s": s.record_s,
                    "pool_growth_bytes": s.pool_growth_bytes,
                    "peak_bytes": s.peak_bytes,
                }
                for s in stats.shapes
            ]
        status(f"capture bench: {n} steps captured ({'up front' if up_front else 'lazy'})")
        _, replay_logits, replay_ms = drive(engine, batch, n, forced=fed)
        diff = max(
            float((a - b).abs().max()) for a, b in zip(eager_logits, replay_logits, strict=True)
        )
        scale = max(float(a.abs().max()) for a in eager_logits)
        run_status = finite_status(eager_logits, "eager") or finite_status(replay_logits, "replay")
        predicted = bucket_run(rows, prompt_len, n, engine.buckets)
        mid_run = graphs.recorded_mid_run
        row = RunRow(
            status=run_status or "ok",
            steps=n,
            captures_open=predicted.open_count,
            captures_closed=graphs.distinct,
            predicted_closed=predicted.bucketed_count,
            recorded_mid_run=mid_run,
            replays=graphs.replays,
            reuse=capture_reuse_share(mid_run, n),
            run_ms_eager=eager_ms,
            run_ms_replayed=replay_ms,
            max_abs_diff=diff,
            replay_tolerance=replay_tolerance(device, dtype, scale),
            mode="up-front" if up_front else "lazy",
            captured_up_front=stats.count if stats else 0,
            capture_s=capture_s,
            capture_pool_bytes=stats.pool_growth_bytes if stats else None,
            kernel=engine.attention,
            device=device,
            rows=rows,
            prompt_len=prompt_len,
            width_multiple=width_multiple,
            max_model_len=capture_cfg.max_model_len,
            pool_shared=check_detail(check_pool_shared, graphs.pools),
            output_not_held=check_detail(check_output_not_held, replay_logits, graphs.outputs),
            all_shapes_captured=(
                check_detail(check_all_shapes_captured, engine.buckets.shapes, graphs.graphs)
                if up_front
                else None
            ),
        )
        out.append(row)
        del engine, graphs
    return out, shapes


def check_detail(check, *args) -> str:
    """ "ok" when `check(*args)` holds, else the first line of the promise it found broken."""
    return gate(check.__name__, check, *args).detail


def finite_status(logits: list[torch.Tensor], system: str) -> str | None:
    """`error: non-finite logits at step N (system)` for the first decode step (1-based) whose
    logits held NaN or Inf: NaN logits compare equal to nothing, yet argmax still agrees."""
    for step, held in enumerate(logits, start=1):
        if not bool(torch.isfinite(held).all()):
            return f"error: non-finite logits at step {step} ({system})"
    return None


# -- the pool table and what a step holds ------------------------------------------------------


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
    private = the sum of each recording's own peak (what a pool per shape would hold). The
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
