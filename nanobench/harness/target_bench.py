"""Explain and compile a user's decode step (a `--target`), with the columns the engine gets.

What it is: `explain_target` (steps 0..K-1 eagerly, then `torch._dynamo.explain` of `forward`
at step K and K+1: a guard on a Python value whose text differs between the two is one that
changes every step) and `TargetSession` (the compile worker's session for a target: the factory
runs in this fresh process, `forward` is compiled per the mode and called once per step, then
replayed in timed windows; builds,
recompile reasons, fall-back and compile seconds come from dynamo's counters and ledger, the
prediction from the shape history of `step_inputs`).
What it is not: the engine's sweep (`compile_bench`), which hands a target's spec here.
Invariant: step inputs are built before the timed call and outside the traced region; a step
that raises is a failed row (`TargetError`), never a traceback.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from nanobench.compile.session import WindowServer
from nanobench.harness.dynamo_explain import ExplainRow
from nanobench.harness.targets import Target, TargetError, growing_dims, inputs_at, shape_signature


def step_value_guards(guards_k, guards_next) -> list[str]:
    """Guards on Python values at step K whose text is different at step K+1."""
    from nanobench.harness.dynamo_explain import VALUE_GUARDS, guard_text

    def texts(guards) -> set[str]:
        return {
            guard_text(g)
            for g in guards or ()
            if g.create_fn_name() in VALUE_GUARDS and g.name.startswith("L[")
        }

    return sorted(texts(guards_k) - texts(guards_next))


def _explain_steps(target: Target, step: int):
    import torch

    with torch.no_grad():
        for k in range(step):
            args, kwargs = inputs_at(target, k)
            _call(target, k, target.forward, args, kwargs)
        outs = []
        for k in (step, step + 1):
            args, kwargs = inputs_at(target, k)
            outs.append(_call(target, k, torch._dynamo.explain(target.forward), args, kwargs))
    return outs


def _call(target: Target, step: int, fn: Callable, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except TargetError:
        raise
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise TargetError(
            f"--target {target.spec!r}: forward at step {step} raised {type(e).__name__}: {first}"
        ) from None


def where_defined(fn: Callable) -> str:
    """file:line of a function (or a module's forward), for remedies that point at inputs."""
    import inspect

    try:
        code = inspect.unwrap(fn)
        return f"{inspect.getsourcefile(code)}:{inspect.getsourcelines(code)[1]}"
    except (TypeError, OSError):
        return getattr(fn, "__qualname__", repr(fn))


def explain_target(target: Target, step: int) -> ExplainRow:
    from nanobench.harness.dynamo_explain import break_table, explained_counts
    from nanobench.harness.remedies import remedies_for

    out, following = _explain_steps(target, step)
    breaks = break_table(out.break_reasons)
    varying = step_value_guards(out.out_guards, following.out_guards)
    remedies = remedies_for(fell_back=False, guard_kind="none", breaks=breaks, value_guards=varying)
    return ExplainRow(
        layers=None,
        path=f"target step {step}",
        target=target.spec,
        attention="",
        **explained_counts(out, breaks, varying),
        remedies=[r.text() for r in remedies],
    )


class TargetSession(WindowServer):
    """A compile worker's session for a target: the first pass, then timed replay windows.

    A window replays `step_inputs(0..steps-1)` on the same target: a target whose state grows
    (a DynamicCache) grows through the windows alike in every mode, paired by round.
    """

    def __init__(self, spec: dict, progress: Callable[[dict], None]) -> None:
        self.spec = spec
        self.ready = self.first_pass(spec, progress)

    def first_pass(self, spec: dict, progress: Callable[[dict], None]) -> dict:
        import torch
        import torch._dynamo
        from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

        from nanobench.compile.bench import recompile_limit, short_reason
        from nanobench.compile.session import steady_mask
        from nanobench.cost.compile import classify_guard, predicts_fall_back
        from nanobench.compile.reduce_overhead import compile_kwargs, cudagraph_counts, prediction_mode
        from nanobench.harness.remedies import Growth, remedies_for
        from nanobench.harness.targets import make_target

        mode = spec["mode"]
        protocol = {k: spec[k] for k in ("rows", "prompt_len", "steps", "device", "dtype")}
        expected_kind, expected, probe_breaks = "shape", [], []
        if mode != "off":
            # A probe target of its own: explaining runs the forward, which may move its state.
            probe = explain_target(make_target(spec["target"], model=spec["model"], **protocol), 0)
            expected, probe_breaks = probe.value_guard_text, probe.break_reasons
            expected_kind = "value" if expected else "shape"
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        target = make_target(spec["target"], model=spec["model"], **protocol)
        forward = (
            target.forward
            if mode == "off"
            else torch.compile(target.forward, **compile_kwargs(mode, spec["backend"]))
        )
        self.target, self.forward = target, forward
        self.sync = torch.cuda.synchronize if spec["device"] == "cuda" else (lambda: None)
        history: list = []
        times, built = self.run(history, progress)

        metrics = list(get_compilation_metrics())
        compiled = [m for m in metrics if m.fail_type is None]
        reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
        kinds = {classify_guard(r) for r in reasons}
        guard_kind = "value" if "value" in kinds else ("shape" if "shape" in kinds else "none")
        fell_back = any("recompile limit" in (m.fail_reason or "") for m in metrics)
        self.frames_after_first_pass = counters["frames"]["ok"]
        self.steady = steady_mask(built, fell_back)
        steady = [t for t, ok in zip(times, self.steady) if ok]
        limit = recompile_limit()
        growth = [Growth(p, d, a, b) for p, d, a, b in growing_dims(history)]
        remedies = remedies_for(
            fell_back=fell_back,
            guard_kind=guard_kind,
            breaks=probe_breaks,
            value_guards=expected,
            growth=growth,
            limit=limit,
            inputs_where=where_defined(target.step_inputs),
        )
        shapes = len(set(history))
        return {
            "mode": mode,
            "status": "ok",
            "target": spec["target"],
            "shapes": shapes,
            "predicted_shapes": shapes,
            "builds": counters["frames"]["ok"],
            "unique_graphs": counters["stats"]["unique_graphs"],
            "calls_captured": counters["stats"]["calls_captured"],
            "graph_breaks": sum(counters["graph_break"].values()),
            "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
            "reuse": round(1 - sum(1 for b in built if b) / len(built), 4) if built else None,
            "fell_back": fell_back,
            "predicted_fall_back": predicts_fall_back(
                history, prediction_mode(mode), limit, expected_kind
            ),
            "guard_kind": guard_kind if mode != "off" else "none",
            "predicted_guard_kind": expected_kind if mode != "off" else "none",
            "expected_value_guards": expected[:4],
            "recompile_reasons": [short_reason(r) for r in reasons],
            "recompile_limit": limit,
            "compile_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4),
            "inductor_s": round(sum(m.inductor_compile_time_s or 0.0 for m in compiled), 4),
            "build_steps_s": round(sum(t for t, b in zip(times, built) if b) / 1e3, 4),
            "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
            "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
            **cudagraph_counts(mode),
            "step_ms": round(statistics.median(steady), 4) if steady else None,
            "steady_steps": len(steady),
            "step_ms_all": [round(t, 4) for t in times],
            "builds_per_step": built,
            "growing": [f"{g.what} dim {g.dim}: {g.first}..{g.last}" for g in growth],
            "remedies": [r.text() for r in remedies],
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
        }

    def run(self, history: list | None = None, progress=lambda e: None):
        """`steps` timed calls of forward on step_inputs(0..steps-1): ms and builds of each."""
        import torch
        from torch._dynamo.utils import counters

        times, built = [], []
        with torch.no_grad():
            for i in range(self.spec["steps"]):
                args, kwargs = inputs_at(self.target, i)
                if history is not None:
                    history.append(shape_signature(args, kwargs))
                before = counters["frames"]["ok"]
                self.sync()
                t0 = time.perf_counter()
                _call(self.target, i, self.forward, args, kwargs)
                self.sync()
                times.append((time.perf_counter() - t0) * 1e3)
                built.append(counters["frames"]["ok"] - before)
                progress({"step": i + 1, "steps": self.spec["steps"], "built": built[-1]})
        return times, built
