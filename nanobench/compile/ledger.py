"""A compile worker's first pass as dynamo recorded it: the one place a `FirstPass` is built.

What it is: `recompile_reasons()` (dynamo's own reasons, whole), `guard_kind_of(reasons)`,
`first_pass(...)` (builds,
graphs, breaks, fall-back, guard kind, reasons, compile seconds and the pass's step times,
read from `counters` and `get_compilation_metrics()` after the pass, beside the prediction a
session made before it), for the engine's session and a target's alike.
What it is not: a session (what is stepped and predicted is the session's) or the row's
derived columns (`compile.rows.derive`).
Invariant: builds are `counters["frames"]["ok"]`; compile seconds are
`cost.compile.compile_cost_s` of the ledger's `entire_frame_compile_time_s` of the frames that
compiled; a step is steady only when it built nothing (`windows.steady_mask`).
"""

from __future__ import annotations

import statistics

import torch
from torch._dynamo.utils import counters, get_compilation_metrics

from nanobench.compile.dynamo import recompile_limit, short_reason
from nanobench.compile.reduce_overhead import cudagraph_counts
from nanobench.compile.rows import FirstPass
from nanobench.compile.windows import steady_mask
from nanobench.cost.compile import classify_guard, compile_cost_s
from nanobench.harness.step.dynamo_call import fell_back_in, recompile_reasons_in


def recompile_reasons() -> list[str]:
    """dynamo's recompile reasons, whole (a remedy reads the user stack they carry)."""
    return recompile_reasons_in(get_compilation_metrics())


def guard_kind_of(reasons: list[str]) -> str:
    """value if any recompile guarded a Python value, else shape if any guarded a size."""
    kinds = {classify_guard(r) for r in reasons}
    return "value" if "value" in kinds else ("shape" if "shape" in kinds else "none")


def first_pass(
    mode: str,
    times: list[float],
    built: list[int],
    *,
    shapes: int,
    predicted_shapes: int,
    predicted_fall_back: bool,
    predicted_guard_kind: str,
    expected_value_guards: list[str],
    outputs: list | None = None,
) -> tuple[FirstPass, list[bool]]:
    """The first pass (`times` ms and `built` frames of each step, `outputs` each step's
    fingerprint) and its steady-step mask."""
    metrics = list(get_compilation_metrics())
    compiled = [m for m in metrics if m.fail_type is None]
    reasons = recompile_reasons()
    guard_kind = guard_kind_of(reasons)
    fell_back = fell_back_in(metrics)
    steady = steady_mask(built, fell_back)
    steady_ms = [t for t, ok in zip(times, steady) if ok]
    row = FirstPass(
        mode=mode,
        status="ok",
        shapes=shapes,
        predicted_shapes=predicted_shapes,
        builds=counters["frames"]["ok"],
        recompiles=len(reasons),
        unique_graphs=counters["stats"]["unique_graphs"],
        calls_captured=counters["stats"]["calls_captured"],
        graph_breaks=sum(counters["graph_break"].values()),
        fallbacks_to_eager=counters["frames"]["total"] - counters["frames"]["ok"],
        reuse=round(sum(1 for b in built if b == 0) / len(built), 4) if built else None,
        fell_back=fell_back,
        predicted_fall_back=predicted_fall_back,
        guard_kind=guard_kind if mode != "off" else "none",
        predicted_guard_kind=predicted_guard_kind if mode != "off" else "none",
        expected_value_guards=expected_value_guards[:4],
        recompile_reasons=[short_reason(r) for r in reasons],
        recompile_limit=recompile_limit(),
        compile_s=round(compile_cost_s(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4),
        inductor_s=round(sum(m.inductor_compile_time_s or 0.0 for m in compiled), 4),
        fxgraph_cache_hit=counters["inductor"]["fxgraph_cache_hit"],
        fxgraph_cache_miss=counters["inductor"]["fxgraph_cache_miss"],
        **cudagraph_counts(mode),
        torch_version=torch.__version__,
        threads=torch.get_num_threads(),
        build_steps_s=round(sum(t for t, b in zip(times, built) if b) / 1e3, 4),
        step_ms_all=[round(t, 4) for t in times],
        builds_per_step=built,
        # The first pass alone: what a one-shot run reports; rounds replace it.
        step_ms=round(statistics.median(steady_ms), 4) if steady_ms else None,
        steady_steps=len(steady_ms),
        outputs=outputs,
    )
    return row, steady
