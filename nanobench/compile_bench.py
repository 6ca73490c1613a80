"""The compile sweep: each mode in a fresh process, measured from dynamo's own ledger.

What it is: `run_mode(spec)` (the worker body: reset dynamo, build the engine in one mode, run
the decode steps, read counters and compilation metrics), `predict(spec)` (builds and fall-back
from the shape history alone, before running), `sweep(...)` (one fresh process per mode) and
`derive(rows)` (speedup, saving, breakeven against the `off` row of the same sweep).
What it is not: the CLI or the report.
Invariant: builds are `counters["frames"]["ok"]`; compile seconds come from
`get_compilation_metrics()`; step time is a median over steps that built nothing, or empty.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable

from nanobench.cost.compile import (
    breakeven_steps,
    classify_guard,
    predicts_fall_back,
    saving_per_step_s,
    worth_compiling,
)
from nanobench.reduce_overhead import compile_kwargs, cudagraph_counts, prediction_mode

MODES = ("off", "dynamic", "static")
BACKENDS = ("inductor", "aot_eager", "eager")


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


def probe_guard_kind(engine, tokens) -> tuple[str, list[str]]:
    """Before compiling: explain one step; guards on step-varying Python values mean `value`."""
    import torch

    from engine.attention import UnplannedDecode
    from nanobench.explain import value_guards

    rows = engine.active_rows
    input_ids = torch.tensor(tokens, device=engine.cache.device).view(-1, 1)  # (B, 1)
    if engine.config.decode_path == "unplanned":
        view = UnplannedDecode(engine.cache, rows)
        fn = engine.unplanned_forward
    else:
        from engine.plan import plan_decode

        view = plan_decode(
            engine.cache, list(rows), engine.buckets, engine.inputs, engine.width_free
        )
        fn = engine.planned_forward
    out = torch._dynamo.explain(fn)(input_ids, view)
    found = value_guards(out.out_guards)
    return ("value" if found else "shape"), found


def run_mode(spec: dict, progress: Callable[[dict], None] = lambda e: None) -> dict:
    import torch
    import torch._dynamo
    from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

    from engine.engine import Engine
    from nanobench.explain import seeded_prompts
    from nanobench.finite import FiniteWatch

    quiet_dynamo()
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    if spec.get("target"):
        from nanobench.target_bench import run_target_mode

        return run_target_mode(spec, progress)
    mode = spec["mode"]
    options = dict(
        max_batch_size=spec["max_batch"],
        max_model_len=spec["max_model_len"],
        block_size=spec.get("block_size", 16),
        dtype=spec["dtype"],
        device=spec["device"],
        bucket_decode=spec["bucketed"],
        width_multiple=spec["width_multiple"],
        decode_path=spec.get("decode_path", "planned"),
    )
    batch_seed = spec.get("seed", 0)
    guard_kind_expected, expected_guards = "shape", []
    if mode != "off":
        probe = Engine.from_checkpoint(spec["model"], **options)
        tokens = (
            probe.prefill(
                seeded_prompts(
                    spec["rows"], spec["prompt_len"], probe.model_config.vocab_size, batch_seed
                )
            )
            .argmax(-1)
            .tolist()
        )
        guard_kind_expected, expected_guards = probe_guard_kind(probe, tokens)
        del probe
    prediction = predict(spec, guard_kind_expected)
    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    engine = Engine.from_checkpoint(
        spec["model"], compile_decode=mode, compiler=compiler_for(spec["backend"]), **options
    )
    vocab = engine.model_config.vocab_size
    sync = torch.cuda.synchronize if spec["device"] == "cuda" else (lambda: None)
    watch = FiniteWatch()
    logits = engine.prefill(seeded_prompts(spec["rows"], spec["prompt_len"], vocab, batch_seed))
    tokens = logits.argmax(-1).tolist()
    watch.see(logits)
    times: list[float] = []
    for i in range(spec["steps"]):
        sync()
        t0 = time.perf_counter()
        logits = engine.decode_step(tokens)  # (B, V)
        tokens = logits.argmax(-1).tolist()
        sync()
        times.append(time.perf_counter() - t0)
        watch.see(logits)
        progress(
            {"step": i + 1, "steps": spec["steps"], "built": engine.compiled.builds_per_call[-1]}
        )
    engine.release_all()
    watch.check()

    metrics = list(get_compilation_metrics())
    compiled = [m for m in metrics if m.fail_type is None]
    reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
    kinds = {classify_guard(r) for r in reasons}
    guard_kind = "value" if "value" in kinds else ("shape" if "shape" in kinds else "none")
    fell_back = any("recompile limit" in (m.fail_reason or "") for m in metrics)
    built = engine.compiled.builds_per_call
    steady = [t for t, b in zip(times, built) if b == 0]
    build_times = [t for t, b in zip(times, built) if b > 0]
    return {
        "mode": mode,
        "status": "ok",
        "shapes": engine.compiled.distinct,
        "predicted_shapes": prediction["shapes"],
        "builds": counters["frames"]["ok"],
        "unique_graphs": counters["stats"]["unique_graphs"],
        "calls_captured": counters["stats"]["calls_captured"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
        "reuse": engine.compiled.reuse,
        "fell_back": fell_back,
        "predicted_fall_back": prediction["predicted_fall_back"],
        "guard_kind": guard_kind if mode != "off" else "none",
        "predicted_guard_kind": guard_kind_expected if mode != "off" else "none",
        "expected_value_guards": expected_guards[:4],
        "recompile_reasons": [short_reason(r) for r in reasons],
        "recompile_limit": recompile_limit(),
        "compile_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4),
        "inductor_s": round(sum(m.inductor_compile_time_s or 0.0 for m in compiled), 4),
        "build_steps_s": round(sum(build_times), 4),
        "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
        **cudagraph_counts(mode),
        "step_ms": round(statistics.median(steady) * 1e3, 4) if steady else None,
        "steady_steps": len(steady),
        "step_ms_all": [round(t * 1e3, 3) for t in times],
        "builds_per_step": built,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def short_reason(reason: str) -> str:
    first = reason.split("#")[0].strip()
    return first.split(": ", 1)[1] if first[:1].isdigit() and ": " in first else first


def derive(rows: list[dict], horizon: int) -> list[dict]:
    """Speedup, saving and breakeven against the `off` row of the same sweep."""
    off = next((r for r in rows if r.get("mode") == "off" and r.get("step_ms")), None)
    for r in rows:
        r["speedup"] = r["saving_per_step_ms"] = r["breakeven_steps"] = None
        r["worth_compiling"] = False
        if off is None or not r.get("step_ms"):
            continue
        r["speedup"] = round(off["step_ms"] / r["step_ms"], 4)
        saving_s = saving_per_step_s(off["step_ms"] / 1e3, r["step_ms"] / 1e3)
        r["saving_per_step_ms"] = round(saving_s * 1e3, 4)
        if r["mode"] == "off":
            continue
        be = breakeven_steps(r.get("compile_s") or 0.0, saving_s)
        r["breakeven_steps"] = None if be == float("inf") else round(be, 1)
        r["worth_compiling"] = worth_compiling(horizon, r.get("compile_s") or 0.0, saving_s)
    return rows


def cache_env(cache: str, mode: str, device: str) -> tuple[dict[str, str], str | None]:
    """Cold: a fresh Inductor cache per mode (returned for cleanup). Warm: the one shared
    directory for this machine's code-generation setting (`nanobench.inductor_cache`)."""
    from nanobench.inductor_cache import fresh_dir, warm_dir

    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if cache == "cold":
        fresh = fresh_dir(mode)
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh
        return env, fresh
    env["TORCHINDUCTOR_CACHE_DIR"] = str(warm_dir(device))
    return env, None


def sweep(
    spec: dict,
    modes: list[str],
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda m, e: None,
    on_row: Callable[[dict], None] = lambda r: None,
) -> list[dict]:
    import shutil

    from nanobench.fresh import run_fresh

    rows = []
    for mode in modes:
        env, fresh = cache_env(spec["cache"], mode, spec["device"])
        if spec.get("trace"):
            env["TORCH_TRACE"] = os.path.join(spec["trace"], mode)
        try:
            row = run_fresh(
                "nanobench.compile_worker",
                {**spec, "mode": mode},
                timeout=timeout,
                env=env,
                on_progress=lambda e, m=mode: on_progress(m, e),
            )
        finally:
            if fresh:
                shutil.rmtree(fresh, ignore_errors=True)
        row.setdefault("mode", mode)
        row["cache"] = spec["cache"]
        row["device"] = spec["device"]
        row["backend"] = spec["backend"]
        row["bucketed"] = spec["bucketed"]
        rows.append(row)
        on_row(row)
    return rows


def spec_for(**kw) -> dict:
    base = dict(
        rows=4,
        max_batch=8,
        prompt_len=16,
        steps=16,
        bucketed=False,
        width_multiple=128,
        cache="cold",
        backend="inductor",
        device="cpu",
        dtype="float32",
        seed=0,
        decode_path="planned",
        threads=0,
        block_size=16,
        target="",
        trace="",
    )
    base.update(kw)
    base.setdefault("max_model_len", 2048)
    base["model"] = str(base["model"])
    return base
