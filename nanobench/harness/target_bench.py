"""Explain and compile a user's decode step (a `--target`), with the columns the engine gets.

What it is: `explain_target` (steps 0..K-1 eagerly, then `torch._dynamo.explain` of `forward`
at step K and K+1: a guard on a Python value whose text differs between the two is one that
changes every step) and `TargetSession` (the compile worker's session for a target: the factory
runs in this fresh process, `forward` is compiled per the mode and called once per step, then
replayed in timed windows; builds,
recompile reasons, fall-back and compile seconds come from dynamo's counters and ledger, the
prediction (`predict_target`) from the shapes and Python values `step_inputs` presented).
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
from nanobench.harness.targets import (
    Target,
    TargetError,
    growing_dims,
    inputs_at,
    scalar_signature,
    shape_signature,
)

# Guards on a value a step may change: a constant, an equality, a container's length.
STEP_GUARDS = ("CONSTANT_MATCH", "EQUALS_MATCH", "SEQUENCE_LENGTH", "DICT_LENGTH")
CONTRACT = (
    "broke the step_inputs contract (step_inputs(step) is called again for every timed "
    "window and must depend on step alone; the first pass ran this step)"
)


def guard_where(guard) -> str:
    """file:line: source of the frame dynamo recorded for a guard ("" when it recorded none)."""
    frame = guard.user_stack[-1] if getattr(guard, "user_stack", None) else None
    return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}" if frame else ""


def step_value_guards(guards_k, guards_next) -> list:
    """Guards on Python values at step K whose text is different at step K+1 (`ValueGuard`s)."""
    from nanobench.harness.remedies import ValueGuard, symbolic_source

    def by_text(guards) -> dict:
        # Entry by entry: a length guard's code also checks the type, which never changes.
        return {
            text: g
            for g in guards or ()
            if g.create_fn_name() in STEP_GUARDS and g.name.startswith("L[")
            for text in g.code_list or (g.name,)
        }

    at_k, at_next = by_text(guards_k), by_text(guards_next)
    return [
        ValueGuard(text, guard_where(at_k[text]) or text, symbolic_source(text))
        for text in sorted(set(at_k) - set(at_next))
    ]


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
    return probe_target(target, step)[0]


def probe_target(target: Target, step: int) -> tuple[ExplainRow, list, set[str]]:
    """The explained row at `step`, its guards that change by step K+1 (`ValueGuard`s) and the
    source of every guard dynamo installed (what the step reads)."""
    from nanobench.harness.dynamo_explain import break_table, explained_counts
    from nanobench.harness.remedies import quote_dynamic_row, remedies_for

    out, following = _explain_steps(target, step)
    breaks = break_table(out.break_reasons)
    varying = step_value_guards(out.out_guards, following.out_guards)
    remedies = remedies_for(fell_back=False, guard_kind="none", breaks=breaks, value_guards=varying)
    row = ExplainRow(
        layers=None,
        path=f"target step {step}",
        target=target.spec,
        attention="",
        **explained_counts(out, breaks, [g.guard for g in varying]),
        remedies=[quote_dynamic_row(r.text(), None, None) for r in remedies],
    )
    guarded = {g.name for o in (out, following) for g in o.out_guards or ()}
    return row, varying, guarded


def predict_target(
    mode: str, seen: list[tuple], varying: list, guarded: set[str], limit: int
) -> tuple[str, bool]:
    """(guard kind, falls back) that a mode's run predicts from its inputs, before dynamo says.

    `seen` holds each step's (shape signature, scalar signature). A changing shape guards by
    size, a changing Python value by value, unless the mode makes it symbolic (dynamic: every
    size, and an int or float argument); a guard the probe saw change with no input behind it
    (a resume function's local) is one build a step. Nothing changing predicts `none`.
    """
    from nanobench.compile.reduce_overhead import prediction_mode
    from nanobench.cost.compile import predicts_fall_back
    from nanobench.harness.targets import changing_scalars

    if mode == "off":
        return "none", False
    dynamic = prediction_mode(mode) == "dynamic"
    changed = changing_scalars([scalars for _, scalars in seen], guarded)
    kept = {source for source, symbolic in changed.items() if not (dynamic and symbolic)}
    each_step = [g for g in varying if g.expression not in changed and not (dynamic and g.symbolic)]
    keys = [
        (
            () if dynamic else shapes,
            tuple(v for s, v, _ in scalars if s in kept),
            i * bool(each_step),
        )
        for i, (shapes, scalars) in enumerate(seen)
    ]
    if kept or each_step:
        kind = "value"
    elif not dynamic and len({shapes for shapes, _ in seen}) > 1:
        kind = "shape"
    else:
        kind = "none"
    return kind, predicts_fall_back(keys, prediction_mode(mode), limit, kind)


class TargetSession(WindowServer):
    """A compile worker's session for a target: the first pass, then timed replay windows.

    A window replays `step_inputs(0..steps-1)` on the same target, so `step_inputs(step)` must
    depend on `step` alone (a cache cropped back to that step); a step that ran in the first
    pass and raises in a window is reported as that contract broken, naming window and step.
    """

    def __init__(self, spec: dict, progress: Callable[[dict], None]) -> None:
        self.spec = spec
        self.window = 0  # 0: the first pass; a timed window's round otherwise
        self.ready = self.first_pass(spec, progress)

    def first_pass(self, spec: dict, progress: Callable[[dict], None]) -> dict:
        import torch
        import torch._dynamo
        from torch._dynamo.utils import clear_compilation_metrics, counters

        from nanobench.compile.reduce_overhead import compile_kwargs
        from nanobench.harness.targets import make_target

        mode = spec["mode"]
        protocol = {k: spec[k] for k in ("rows", "prompt_len", "steps", "device", "dtype")}
        probe = (None, [], set())
        if mode != "off":
            # A probe target of its own: explaining runs the forward, which may move its state.
            probe = probe_target(make_target(spec["target"], model=spec["model"], **protocol), 0)
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
        seen: list = []
        times, built = self.run(seen, progress)
        self.frames_after_first_pass = counters["frames"]["ok"]
        ledger = self.ledger(mode, seen, probe)
        return {**ledger, **self.timing(times, built, ledger["fell_back"])}

    def ledger(self, mode: str, seen: list, probe: tuple) -> dict:
        """The first pass as dynamo's counters and compilation metrics record it, the
        prediction from the inputs it saw, and the remedies for what it measured."""
        import torch
        from torch._dynamo.utils import counters, get_compilation_metrics

        from nanobench.compile.bench import recompile_limit, short_reason
        from nanobench.compile.reduce_overhead import cudagraph_counts
        from nanobench.cost.compile import classify_guard
        from nanobench.harness.remedies import Growth, remedies_for, value_guard

        row, varying, guarded = probe
        metrics = list(get_compilation_metrics())
        compiled = [m for m in metrics if m.fail_type is None]
        reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
        kinds = {classify_guard(r) for r in reasons}
        guard_kind = "value" if "value" in kinds else ("shape" if "shape" in kinds else "none")
        fell_back = any("recompile limit" in (m.fail_reason or "") for m in metrics)
        limit = recompile_limit()
        shapes = [s for s, _ in seen]
        growth = [Growth(p, d, a, b) for p, d, a, b in growing_dims(shapes)]
        predicted_kind, predicted_fall_back = predict_target(mode, seen, varying, guarded, limit)
        # dynamo's own reasons carry the guard's file:line; the probe's guards stand in before.
        recompiled = [value_guard(r) for r in reasons if classify_guard(r) == "value"]
        remedies = remedies_for(
            fell_back=fell_back,
            guard_kind=guard_kind,
            breaks=row.break_reasons if row else [],
            value_guards=recompiled or varying,
            growth=growth,
            limit=limit,
            inputs_where=where_defined(self.target.step_inputs),
            mode=mode,
        )
        return {
            "mode": mode,
            "status": "ok",
            "target": self.spec["target"],
            "shapes": len(set(shapes)),
            "predicted_shapes": len(set(shapes)),
            "builds": counters["frames"]["ok"],
            "unique_graphs": counters["stats"]["unique_graphs"],
            "calls_captured": counters["stats"]["calls_captured"],
            "graph_breaks": sum(counters["graph_break"].values()),
            "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
            "fell_back": fell_back,
            "predicted_fall_back": predicted_fall_back,
            "guard_kind": guard_kind if mode != "off" else "none",
            "predicted_guard_kind": predicted_kind,
            "expected_value_guards": [g.guard for g in varying][:4],
            "recompile_reasons": [short_reason(r) for r in reasons],
            "recompile_limit": limit,
            "compile_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4),
            "inductor_s": round(sum(m.inductor_compile_time_s or 0.0 for m in compiled), 4),
            "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
            "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
            **cudagraph_counts(mode),
            "growing": [f"{g.what} dim {g.dim}: {g.first}..{g.last}" for g in growth],
            "remedies": [r.text() for r in remedies],
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
        }

    def timing(self, times: list[float], built: list[int], fell_back: bool) -> dict:
        """The first pass's steps: which were steady, their median, what building cost."""
        from nanobench.compile.session import steady_mask

        self.steady = steady_mask(built, fell_back)
        steady = [t for t, ok in zip(times, self.steady) if ok]
        return {
            "reuse": round(1 - sum(1 for b in built if b) / len(built), 4) if built else None,
            "build_steps_s": round(sum(t for t, b in zip(times, built) if b) / 1e3, 4),
            "step_ms": round(statistics.median(steady), 4) if steady else None,
            "steady_steps": len(steady),
            "step_ms_all": [round(t, 4) for t in times],
            "builds_per_step": built,
        }

    def serve(self, request: dict) -> dict:
        """One timed window; its round names a step that raises in it."""
        self.window = int(request["round"])
        return super().serve(request)

    def run(self, seen: list | None = None, progress=lambda e: None):
        """`steps` timed calls of forward on step_inputs(0..steps-1): ms and builds of each."""
        import torch
        from torch._dynamo.utils import counters

        times, built = [], []
        with torch.no_grad():
            for i in range(self.spec["steps"]):
                try:
                    args, kwargs = inputs_at(self.target, i)
                except TargetError as e:
                    raise self.in_window(e, i) from None
                if seen is not None:
                    seen.append((shape_signature(args, kwargs), scalar_signature(
                        self.target.forward, args, kwargs)))  # fmt: skip
                before = counters["frames"]["ok"]
                self.sync()
                t0 = time.perf_counter()
                try:
                    _call(self.target, i, self.forward, args, kwargs)
                except TargetError as e:
                    raise self.in_window(e, i) from None
                self.sync()
                times.append((time.perf_counter() - t0) * 1e3)
                built.append(counters["frames"]["ok"] - before)
                progress({"step": i + 1, "steps": self.spec["steps"], "built": built[-1]})
        return times, built

    def in_window(self, error: TargetError, step: int) -> TargetError:
        """A step that ran in the first pass and raises in a timed window broke the contract."""
        if not self.window:
            return error
        spec, _, what = str(error).partition(": ")
        return TargetError(f"{spec}: timed window {self.window}, step {step} {CONTRACT}: {what}")
