"""The compile sweep: each mode in a fresh worker, timed in interleaved rounds against `off`.

What it is: `predict(spec)` (builds and fall-back from the shape history alone, before
running), the pieces the worker (`nanobench.compile.session`) uses, `interleaved_sweep(...)`
(one live worker per mode, set up one at a time, then timed windows in rotating rounds until
every speedup's interval is tight), `sweep(...)` (one-shot: a mode's first pass in a fresh
process, what the GPU check runs) and `spec_for` (the spec a worker reads).
What it is not: the CLI, the row type and its derived columns (`compile_rows`) or the report.
Invariant: builds are `counters["frames"]["ok"]`; compile seconds come from
`get_compilation_metrics()`; step time is steps that built nothing, and a ratio is paired by
round, never across rounds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import asdict, replace

from nanobench.compile.reduce_overhead import compile_kwargs, prediction_mode
from nanobench.compile.rows import CompileRow, from_worker
from nanobench.cost.compile import predicts_fall_back
from nanobench.harness.choices import BACKENDS, MODES  # noqa: F401 (the sweep's vocabulary)
from nanobench.harness.rounds import Comparison, RoundPlan, Window

WORKER = "nanobench.compile.session"  # the module each mode's fresh process runs


def step_shapes(spec: dict) -> list[tuple[int, int]]:
    """(rows, width) each decode step presents: open, or through the bucket ladder."""
    from engine.buckets import DecodeBuckets
    from nanobench.cost.buckets import open_shapes

    shapes = open_shapes(spec["rows"], spec["prompt_len"], spec["steps"])
    if not spec["bucketed"]:
        return shapes
    buckets = DecodeBuckets(spec["max_batch"], spec["max_model_len"], spec["width_multiple"])
    return [buckets.shape_for(r, w) for r, w in shapes]


def recompile_limit() -> int:
    import torch._dynamo.config as dc

    return int(getattr(dc, "recompile_limit", getattr(dc, "cache_size_limit", 8)))


def predict(spec: dict, guard_kind: str) -> dict:
    history = step_shapes(spec)
    return {
        "shapes": len(set(history)),
        "predicted_fall_back": predicts_fall_back(
            history, prediction_mode(spec["mode"]), recompile_limit(), guard_kind
        ),
    }


def compiler_for(backend: str) -> Callable:
    def compile_with(fn, mode):
        import torch

        return torch.compile(fn, **compile_kwargs(mode, backend))

    return compile_with


def quiet_dynamo() -> None:
    """The recompile-limit warning is read from dynamo's records, not its log."""
    for name in ("torch._dynamo", "torch._inductor", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def short_reason(reason: str) -> str:
    """dynamo's reason on one line, its user stack dropped: the failed guard, its source line
    and the file:line dynamo names ("pos == 17 # k_cache[...] = k # step.py:20 in forward")."""
    head = reason.split("User stack trace:", 1)[0].strip()
    first = head.splitlines()[0] if head else ""
    first = first.split(": ", 1)[1] if first[:1].isdigit() and ": " in first else first
    return " ".join(first.split())


def cache_env(cache: str, mode: str, device: str) -> tuple[dict[str, str], str | None]:
    """Cold: a fresh Inductor cache per mode (returned for cleanup). Warm: the one shared
    directory for this machine's code-generation setting (`nanobench.harness.inductor_cache`)."""
    from nanobench.harness.inductor_cache import fresh_dir, warm_dir

    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if cache == "cold":
        fresh = fresh_dir(mode)
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh
        return env, fresh
    env["TORCHINDUCTOR_CACHE_DIR"] = str(warm_dir(device))
    return env, None


def annotate(payload: dict, spec: dict, mode: str) -> CompileRow:
    """A worker's payload as a row (`from_worker` fails naming a renamed field), with the spec's."""
    row = from_worker(payload, mode)
    return replace(row, **{k: spec[k] for k in ("cache", "device", "backend", "bucketed")})


def sweep(
    spec: dict,
    modes: list[str],
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda m, e: None,
    on_row: Callable[[CompileRow], None] = lambda r: None,
) -> list[CompileRow]:
    """One-shot: each mode's first pass in its own fresh process, one after another."""
    import shutil

    from nanobench.harness.fresh import run_fresh

    rows = []
    for mode in modes:
        env, fresh = cache_env(spec["cache"], mode, spec["device"])
        if spec.get("trace"):
            env["TORCH_TRACE"] = os.path.join(spec["trace"], mode)
        try:
            row = run_fresh(
                WORKER,
                {**spec, "mode": mode},
                timeout=timeout,
                env=env,
                on_progress=lambda e, m=mode: on_progress(m, e),
            )
        finally:
            if fresh:
                shutil.rmtree(fresh, ignore_errors=True)
        rows.append(annotate(row, spec, mode))
        on_row(rows[-1])
    return rows


def comparisons(modes: list[str]) -> list[Comparison]:
    """Each compiled mode's speedup: off's step time over its own."""
    if "off" not in modes:
        return []
    return [Comparison(f"{m}", "off", m) for m in modes if m != "off"]


def interleaved_sweep(
    spec: dict,
    modes: list[str],
    plan: RoundPlan,
    *,
    timeout: float,
    on_status: Callable[[str], None] = lambda s: None,
    on_row: Callable[[CompileRow], None] = lambda r: None,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict], None] = lambda r, i: None,
) -> tuple[list[CompileRow], list[Window]]:
    """A live worker per mode, set up one at a time (no two compile at once), then rounds.

    on_row sees each row when its worker is ready and again when it closes; on_window every
    window, the first pass (round 0) included. Whatever ends the sweep (an interrupt too),
    every worker's process group is killed and every cold cache directory removed.
    """
    import shutil

    from nanobench.harness.fresh import LiveWorker
    from nanobench.harness.rounds import first_pass_window, live_window, run_rounds

    workers: dict[str, LiveWorker] = {}
    rows: dict[str, CompileRow] = {}
    fresh_dirs: list[str] = []
    windows: list[Window] = []

    def keep(window: Window) -> None:
        windows.append(window)
        if window.status != "ok":
            rows[window.system] = replace(rows[window.system], status=window.status)
        on_window(window)

    try:
        for mode in modes:
            on_status(f"{mode}: starting a fresh process")
            env, fresh = cache_env(spec["cache"], mode, spec["device"])
            if spec.get("trace"):
                env["TORCH_TRACE"] = os.path.join(spec["trace"], mode)
            if fresh:
                fresh_dirs.append(fresh)
            worker = LiveWorker(
                WORKER,
                {**spec, "mode": mode},
                env=env,
                on_progress=lambda e, m=mode: on_status(
                    f"{m}: first pass, step {e.get('step')}/{e.get('steps')}"
                    + (" (building)" if e.get("built") else "")
                ),
            )
            workers[mode] = worker
            row = rows[mode] = annotate(worker.start(timeout), spec, mode)
            if row.status == "ok":
                keep(first_pass_window(mode, asdict(row)))
            on_row(row)
        live = {m: live_window(w, m, timeout) for m, w in workers.items() if rows[m].status == "ok"}
        run_rounds(live, plan, comparisons(modes), on_window=keep, on_round=on_round)
        for mode in live:
            final = workers[mode].close(timeout)
            if rows[mode].status == "ok" and final.get("status", "ok") != "ok":
                rows[mode] = replace(rows[mode], status=str(final["status"]))
            elif rows[mode].status == "ok":
                rows[mode] = annotate(final, spec, mode)
            on_row(rows[mode])
    finally:
        for worker in workers.values():
            worker.kill()
        for fresh in fresh_dirs:
            shutil.rmtree(fresh, ignore_errors=True)
    return list(rows.values()), windows


def spec_for(**kw) -> dict:
    """The spec a worker reads: the command's defaults (`CompileSpec`), then `kw`."""
    from nanobench.compile.command import CompileSpec

    d = CompileSpec()
    base = dict(
        rows=d.rows,
        max_batch=d.max_batch,
        prompt_len=d.prompt_len,
        steps=d.steps,
        bucketed=d.bucketed,
        width_multiple=d.width_multiple,
        max_model_len=d.max_model_len,
        cache=d.cache,
        backend=d.backend,
        device=d.device,
        dtype="float32",  # what --dtype auto is on a CPU; the command resolves auto first
        seed=0,
        decode_path=d.path,
        threads=d.threads,
        block_size=d.block_size,
        target=d.target,
        trace="",
    )
    base.update(kw)
    base["model"] = str(base["model"])
    return base
