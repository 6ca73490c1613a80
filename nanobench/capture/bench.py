"""The capture bench: drive an eager engine and a capturing engine identically, then price pools.

What it is: `run_rows`, which for each run length (`run_length`) decodes the same seeded
prompts through a bucketed eager engine and a bucketed capturing engine (lazily, or after
`Engine.capture()` up front), teacher-forcing the capturing one with the eager tokens so the
logits are compared step by step, and reads each graph's record seconds (`record_rows`); then
times both engines in interleaved rounds (`nanobench.capture.timing`).
The pool table and what a step holds are `nanobench.capture.pools`.
What it is not: a unit test of the recorder (tests/test_captured.py) or a timing claim in a
test: the milliseconds here are what this machine measured, with their spread and interval.
Invariant: rows are measured, never constants; every run builds a fresh capturing engine so
its recordings belong to that run alone; logits are copied out of the replay's buffer before
the next step (check_output_not_held); the counts a row reports (replays, recordings) are those
of the correctness drive, read before any timed window adds to them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch

from engine.captured import check_all_shapes_captured, check_output_not_held
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from nanobench.capture.rows import RecordRow, RunRow
from nanobench.capture.timing import DEFAULT_PLAN, Clock, time_run, timing_of
from nanobench.cost.buckets import bucket_run
from nanobench.cost.capture import capture_cost_s, capture_reuse_share
from nanobench.cost.pool import check_pool_shared
from nanobench.harness.runs.gates import gate
from nanobench.harness.step.dynamo_explain import seeded_prompts
from nanobench.harness.workers.rounds import RoundPlan, Window

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


@dataclass(frozen=True)
class RunSetup:
    """What every run length shares: the options, the prompts, the warm eager engine, the timing."""

    model: ModelConfig
    tensors: dict | None
    rows: int
    prompt_len: int
    width_multiple: int
    up_front: bool
    device: str
    dtype: str
    recorder: Callable | None
    capture_cfg: EngineConfig
    eager: Engine
    batch: list[list[int]]
    plan: RoundPlan  # one run length's share of the budget
    clock_for: Callable[[str], Clock]
    on_window: Callable[[int, Window], None]
    status: Callable[[str], None]


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
    plan: RoundPlan = DEFAULT_PLAN,
    clock_for: Callable[[str], Clock] = lambda system: time.perf_counter,
    on_window: Callable[[int, Window], None] = lambda steps, w: None,
) -> tuple[list[RunRow], list[RecordRow]]:
    """Table 1 rows and a record row per graph each run recorded.

    After each run length's correctness drive, both engines are timed in rounds under `plan`;
    its budget_s is shared by the run lengths (each gets an equal part). `on_window(steps, w)`
    sees every timed window; `clock_for(system)` is the clock its steps are timed by.
    """
    per_run = replace(plan, budget_s=plan.budget_s / len(steps))
    eager_cfg = run_config(rows, prompt_len, steps, width_multiple, kernel, device, dtype, False)
    capture_cfg = run_config(rows, prompt_len, steps, width_multiple, kernel, device, dtype, True)
    eager = Engine.build(model, tensors, eager_cfg)
    batch = seeded_prompts(rows, prompt_len, model.vocab_size)
    # Untimed warm-up: the first steps of a process pay lazy initialisation on every backend.
    drive(eager, batch, min(4, max(steps)))
    setup = RunSetup(
        model=model,
        tensors=tensors,
        rows=rows,
        prompt_len=prompt_len,
        width_multiple=width_multiple,
        up_front=up_front,
        device=device,
        dtype=dtype,
        recorder=recorder,
        capture_cfg=capture_cfg,
        eager=eager,
        batch=batch,
        plan=per_run,
        clock_for=clock_for,
        on_window=on_window,
        status=status,
    )
    out, records = [], []
    for n in steps:
        row, recorded = run_length(setup, n)
        out.append(row)
        records += recorded
    return out, records


def run_length(run: RunSetup, n: int) -> tuple[RunRow, list[RecordRow]]:
    """One run length's Table 1 row and record rows: eager, captured forced by it, rounds."""
    run.status(f"capture bench: {n} steps eager")
    fed, eager_logits, _ = drive(run.eager, run.batch, n)
    # This run length's own, freed when it returns: the next one's recordings start from nothing.
    engine = Engine.build(run.model, run.tensors, run.capture_cfg, recorder=run.recorder)
    stats = None
    if run.up_front:
        run.status(f"capture bench: recording {engine.buckets.count} shapes up front")
        stats = engine.capture()
    run.status(f"capture bench: {n} steps captured ({'up front' if run.up_front else 'lazy'})")
    _, replay_logits, _ = drive(engine, run.batch, n, forced=fed)
    run_status = finite_status(eager_logits, "eager") or finite_status(replay_logits, "replay")
    counts = run_counts(
        engine, n, eager_logits, replay_logits, stats, up_front=run.up_front, rows=run.rows,
        prompt_len=run.prompt_len, width_multiple=run.width_multiple, device=run.device,
        dtype=run.dtype, max_model_len=run.capture_cfg.max_model_len,
    )  # fmt: skip
    # Read before any timed window: the graphs the drive (or the walk) recorded.
    recorded = record_rows(engine, n, "up-front" if run.up_front else "lazy", run.device)
    run.status(f"capture bench: {n} steps, eager against replayed in rounds")
    windows = time_run(
        run.eager,
        engine,
        run.batch,
        fed,
        run.plan,
        clock_for=run.clock_for,
        on_window=lambda w: run.on_window(n, w),
    )
    timing = timing_of(windows)
    failed = next((w.status for w in windows if w.status != "ok"), None)
    row = RunRow(
        **counts,
        **recording_counts(recorded),
        **asdict(timing),
        status=run_status or failed or "ok",
    )
    return row, recorded


def record_rows(engine: Engine, n: int, mode: str, device: str) -> list[RecordRow]:
    """Every graph the capturing engine holds, in the order it recorded them."""
    return [
        RecordRow(
            steps=n,
            mode=mode,
            rows=g.shape[0],
            width=g.shape[1],
            record_s=g.record_s,
            recorder=g.recorder,
            kernel=engine.attention,
            device=device,
            pool_growth_bytes=g.pool_growth_bytes,
            peak_bytes=g.peak_bytes,
            library_bytes=g.library_bytes,
        )
        for g in engine.decode_graphs.graphs.values()
    ]


def recording_counts(records: list[RecordRow]) -> dict:
    """A run's recordings in sum: how many, their seconds in total and per graph, by whom."""
    total = capture_cost_s(r.record_s for r in records)
    return dict(
        graphs_recorded=len(records),
        record_s_total=total,
        record_s_per_graph=total / len(records) if records else None,
        recorder=",".join(sorted({r.recorder for r in records})) or None,
    )


def run_counts(engine, n: int, eager_logits, replay_logits, stats, *, up_front: bool, rows: int,
               prompt_len: int, width_multiple: int, device: str, dtype: str,
               max_model_len: int) -> dict:  # fmt: skip
    """One run length's counts and checks: captures open and closed, replays, the logits' gap."""
    graphs = engine.decode_graphs
    diff = max(float((a - b).abs().max()) for a, b in zip(eager_logits, replay_logits, strict=True))
    scale = max(float(a.abs().max()) for a in eager_logits)
    predicted = bucket_run(rows, prompt_len, n, engine.buckets)
    mid_run = graphs.recorded_mid_run
    return dict(
        steps=n,
        captures_open=predicted.open_count,
        captures_closed=graphs.distinct,
        predicted_closed=predicted.bucketed_count,
        recorded_mid_run=mid_run,
        replays=graphs.replays,
        reuse=capture_reuse_share(mid_run, n),
        max_abs_diff=diff,
        replay_tolerance=replay_tolerance(device, dtype, scale),
        mode="up-front" if up_front else "lazy",
        captured_up_front=stats.count if stats else 0,
        capture_s=stats.total_s if stats else None,
        capture_pool_bytes=stats.pool_growth_bytes if stats else None,
        kernel=engine.attention,
        device=device,
        rows=rows,
        prompt_len=prompt_len,
        width_multiple=width_multiple,
        max_model_len=max_model_len,
        pool_shared=check_detail(check_pool_shared, graphs.pools),
        output_not_held=check_detail(check_output_not_held, replay_logits, graphs.outputs),
        all_shapes_captured=(
            check_detail(check_all_shapes_captured, engine.buckets.shapes, graphs.graphs)
            if up_front
            else None
        ),
        threads=torch.get_num_threads(),  # read where both engines run, not the option
    )


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
