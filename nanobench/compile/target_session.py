"""A compile worker's session for a user's decode step (a `--target`), with the engine's columns.

What it is: `predict_target` (guard kind and fall-back predicted from the shapes and Python
values `step_inputs` presented, before dynamo says) and `TargetSession` (the factory runs in
this fresh process, `forward` is compiled per the mode and called once per step, then replayed
in timed windows; the row is `compile.ledger.first_pass`, as the engine's session builds it,
plus the target's growing dims, the step each recompile reason came at, its remedies worded by
those steps (`harness.step.rebuilt`: a guard that failed once is a boundary, not one that changes
every step) and, where every step built, what more steps would do, from a dry run over more).
What it is not: explaining a target (`nanobench.harness.step.target_bench`) or the sweep.
Invariant: step inputs are built before the timed call and outside the traced region; a step
that raises is a failed row (`TargetError`), never a traceback; what more --steps would do is said
only from a dry run that took them, never extrapolated from the first pass.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import asdict

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

from nanobench.compile.dynamo import recompile_limit
from nanobench.compile.ledger import first_pass, guard_kind_of, recompile_reasons
from nanobench.compile.reduce_overhead import compile_kwargs, prediction_mode
from nanobench.compile.spec import WorkerSpec
from nanobench.compile.windows import WindowServer
from nanobench.cost.compile import classify_guard, predicts_fall_back
from nanobench.harness.runs.dry_run import DryRun, dry_steps
from nanobench.harness.step.dynamo_call import fell_back_in
from nanobench.harness.step.dynamo_explain import per_call
from nanobench.harness.step.knobs import compile_options
from nanobench.harness.step.output_check import fingerprint
from nanobench.harness.step.rebuilt import StepRun, boundary, step_run
from nanobench.harness.step.remedies import (
    Growth,
    quote_fail_fast,
    quote_marked,
    remedies_for,
    value_guard,
)
from nanobench.harness.step.self_compiled import SELF_COMPILED, VLLM_MODES
from nanobench.harness.step.signatures import (
    changing_scalars,
    growing_dims,
    scalar_signature,
    shape_signature,
)
from nanobench.harness.step.target_bench import call_step, probe_target
from nanobench.harness.step.targets import TargetError, inputs_at, make_target

CONTRACT = (
    "broke the step_inputs contract (step_inputs(step) is called again for every timed "
    "window and must depend on step alone; the first pass ran this step)"
)


def where_defined(fn: Callable) -> str:
    """file:line of a function (or a module's forward), for remedies that point at inputs."""
    try:
        code = inspect.unwrap(fn)
        return f"{inspect.getsourcefile(code)}:{inspect.getsourcelines(code)[1]}"
    except (TypeError, OSError):
        return getattr(fn, "__qualname__", repr(fn))


def predict_target(
    mode: str, seen: list[tuple], varying: list, guarded: set[str], limit: int
) -> tuple[str, bool]:
    """(guard kind, falls back) that a mode's run predicts from its inputs, before dynamo says.

    `seen` holds each step's (shape signature, scalar signature). A changing shape guards by
    size, a changing Python value by value, unless the mode makes it symbolic (dynamic: every
    size, and an int or float argument); a guard the probe saw change with no input behind it
    (a resume function's local) is one build a step. Nothing changing predicts `none`.
    """
    if mode == "off" or mode in VLLM_MODES:  # vLLM's: its own guards, nothing of ours predicts
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

    def __init__(self, spec: WorkerSpec, progress: Callable[[dict], None]) -> None:
        self.spec = spec
        self.window = 0  # 0: the first pass; a timed window's round otherwise
        self.ready = self.first_pass(spec, progress)

    def make(self, steps: int = 0):
        """The target as its factory builds it, in this spec's shape (over `steps` if given)."""
        spec = self.spec
        return make_target(
            spec.target,
            model=spec.model,
            mode=spec.mode,
            rows=spec.rows,
            prompt_len=spec.prompt_len,
            steps=steps or spec.steps,
            device=spec.device,
            dtype=spec.dtype,
        )

    def first_pass(self, spec: WorkerSpec, progress: Callable[[dict], None]) -> dict:
        probe = (None, [], set())
        self.dry: DryRun | str | None = None
        self.marked: DryRun | None = None  # the mark-dynamic remedy's dry run, where it applies
        self.stanced: DryRun | None = None  # the fail-fast remedy's, where it applies
        self.longer: str | None = None  # what more --steps would do, where every step built
        itself = spec.target in SELF_COMPILED
        # A later worker's row gives only its status and compile seconds: the probe is the first's.
        # A target that compiles itself is probed by nothing of ours: its forward is not dynamo's.
        if spec.mode != "off" and spec.process == 1 and spec.probe and not itself:
            # A probe target of its own: explaining runs the forward, which may move its state.
            probe = probe_target(self.make(), 0)
            self.dry = self.dry_check(spec)
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        target = self.make()
        forward = (
            target.forward
            if spec.mode == "off" or itself
            else torch.compile(
                target.forward,
                **compile_kwargs(spec.mode, spec.backend),
                **compile_options(spec.knob),
            )  # fmt: skip
        )
        self.target, self.forward = target, forward
        self.sync = torch.cuda.synchronize if spec.device == "cuda" else (lambda: None)
        seen: list = []
        self.outputs: list = []
        self.records: list[int] = []  # the step of each compilation metrics record
        times, built = self.run(seen, progress)
        self.frames_after_first_pass = counters["frames"]["ok"]
        row = self.ledger(times, built, seen, probe)
        if itself:  # its compile ran while the factory warmed it up: the target's own clock
            # vLLM's trace-once builds through dynamo's AOT compile, which counts a graph but no
            # frame: the graphs are its builds
            builds = max(row["builds"], counters["stats"]["unique_graphs"])
            row |= {"compile_s": round(target.compile_s, 4), "predicted_by": None, "builds": builds}
        return row

    def dry_check(self, spec: WorkerSpec) -> DryRun | str:
        """The fall-back prediction checked: the mode's steps through dynamo alone (the eager
        backend: tracing and guards, no Inductor), on a target of its own; a step that raises
        there is said, and the rule predicts instead. Where an input dimension grows, its
        mark-dynamic remedy is tried the same way (`self.marked`); where every step built and
        none fell back, a dry run over more steps says what more --steps would do (`longer`):
        here, as dynamo is reset between dry runs, which the first pass must not be."""
        dynamic = {"dynamic": True, "static": False}.get(spec.mode)  # reduce-overhead: automatic
        options = compile_options(spec.knob)
        try:
            dry = dry_steps(self.make(), spec.steps, dynamic, options)
            target = self.make()
            shapes = [shape_signature(*inputs_at(target, i)) for i in range(spec.steps)]
            marks = tuple((path, dim) for path, dim, _, _ in growing_dims(shapes))
            if marks and dry.fell_back:
                self.marked = dry_steps(self.make(), spec.steps, None, options, marks)
            if dry.fell_back:  # the fail-fast remedy: the stance set after the first step
                self.stanced = dry_steps(self.make(), spec.steps, dynamic, options, fail_after=1)
            if all(dry.built_at) and not dry.fell_back:
                self.longer = self.more_steps(recompile_limit())
            return dry
        except Exception as e:  # the step's own failure is the real pass's to report
            return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"

    def ledger(self, times: list, built: list, seen: list, probe: tuple) -> dict:
        """The first pass as dynamo's counters and compilation metrics record it, the
        prediction from the inputs it saw, and the remedies for what it measured."""
        mode = self.spec.mode
        row, varying, guarded = probe
        limit = recompile_limit()
        shapes = [s for s, _ in seen]
        predicted_kind, predicted_fall_back = predict_target(mode, seen, varying, guarded, limit)
        predicted_by = "" if mode == "off" else "rule: the inputs each step presented"
        if isinstance(self.dry, DryRun):
            predicted_fall_back = self.dry.fell_back
            predicted_by = (f"dry run: dynamo alone (eager backend) over the {self.dry.steps} "
                            f"steps built {self.dry.builds}")  # fmt: skip
        elif self.dry:
            predicted_by += f" (the dry run raised {self.dry})"
        found, self.steady = first_pass(
            mode,
            times,
            built,
            shapes=len(set(shapes)),
            predicted_shapes=len(set(shapes)),
            predicted_fall_back=predicted_fall_back,
            predicted_guard_kind=predicted_kind,
            expected_value_guards=[g.guard for g in varying],
            outputs=self.outputs if any(o is not None for o in self.outputs) else None,
        )
        growth = [Growth(p, d, a, b) for p, d, a, b in growing_dims(shapes)]
        run = self.steps_seen(built, found.fell_back)
        remedies = self.remedies(run, found.fell_back, row, varying, growth, limit)
        every = mode != "off" and not found.steady_steps and not found.fell_back
        return {
            **asdict(found),
            "target": self.spec.target,
            "predicted_by": predicted_by or None,
            "growing": [f"{g.what} dim {g.dim}: {g.first}..{g.last}" for g in growth],
            "remedies": [r.text() for r in remedies],
            "recompile_steps": self.reason_steps(),
            "more_steps": self.longer if every else None,
            **per_call(row),
        }

    def reason_steps(self) -> list[int]:
        """The step (from 0) of each of dynamo's recompile reasons, in their order."""
        metrics = get_compilation_metrics()
        return [s for s, m in zip(self.records, metrics) if m.recompile_reason]

    def steps_seen(self, built: list, fell_back: bool) -> StepRun:
        """The first pass step by step: which steps rebuilt, the guard that failed at each."""
        at = next((s for s, m in zip(self.records, get_compilation_metrics())
                   if fell_back_in([m])), None)  # fmt: skip
        return step_run(len(built), built, recompile_reasons(), self.reason_steps(), fell_back, at)

    def remedies(self, run: StepRun, fell_back: bool, row, varying, growth, limit) -> list:
        """The fixes for what the first pass measured, each value guard worded by the steps it
        failed at: one that failed once is a boundary, said as such, never as a guard that
        changes every step. dynamo's own reasons carry the guard's file:line; the probe's guards
        stand in where none recompiled on a value."""
        reasons = recompile_reasons()
        once = {(r.guards[0], r.where): r for r in run.rebuilt if r.kind(run.steps) == "once"}
        valued = [value_guard(r) for r in reasons if classify_guard(r) == "value"]
        kept = [g for g in valued if (g.guard, g.where) not in once]
        found = [boundary(r, run) for key, r in once.items()
                 if key in {(g.guard, g.where) for g in valued}]  # fmt: skip
        found += remedies_for(
            fell_back=fell_back,
            # dynamo's kind, not the row's: an off row says none but still has remedies to find
            guard_kind=guard_kind_of(reasons),
            breaks=row.break_reasons if row else [],
            value_guards=kept if valued else varying,
            growth=growth,
            limit=limit,
            inputs_where=where_defined(self.target.step_inputs),
            mode=self.spec.mode,
            failed_at={g.expression: run.failed_at(g.expression) for g in kept},
        )
        if self.marked is not None:
            m = self.marked
            found = [quote_marked(r, m.builds, m.steps, m.fell_back) for r in found]
        if self.stanced is not None:
            found = [quote_fail_fast(r, 1, self.stanced.raised_at) for r in found]
        if self.target.findings is not None:  # a target that compiles itself says what it found
            found += self.target.findings()
        return found

    def more_steps(self, limit: int) -> str | None:
        """Every step built and none fell back: what more --steps would do, from a dry run over
        two steps past the limit in this mode (dynamo alone, eager backend), and where it falls
        back, whether dynamic=True helps over the same steps. None where a dry run raised."""
        spec = self.spec
        steps = max(spec.steps, limit) + 2
        dynamic = {"dynamic": True, "static": False}.get(spec.mode)  # reduce-overhead: automatic
        options = compile_options(spec.knob)
        by = f"a dry run over {steps} steps (dynamo alone, eager backend)"
        try:
            run = dry_steps(self.make(steps), steps, dynamic, options).seen()
            if not run.fell_back:
                return f"reach a steady step: {by} {run.words()}"
            said = f"fall back past recompile_limit {limit} at step {run.fell_back_at}: {by} "
            said += run.words()
            if dynamic:
                return f"{said}; what helps: keep the value out of the traced region"
            helped = dry_steps(self.make(steps), steps, True, options).seen()
        except Exception:  # the step's own failure is the first pass's to report
            return None
        fix = (
            "compile with dynamic=True"
            if helped.helps
            else "keep the value out of the traced region"
        )
        verdict = {True: "helps", False: "does not help", None: "cannot be told"}[helped.helps]
        return f"{said}; dynamic=True {verdict}: over the same steps it {helped.words()}: {fix}"

    def serve(self, request: dict) -> dict:
        """One timed window; its round names a step that raises in it."""
        self.window = int(request["round"])
        return super().serve(request)

    def run(self, seen: list | None = None, progress=lambda e: None):
        """`steps` timed calls of forward on step_inputs(0..steps-1): ms and builds of each."""
        times, built = [], []
        with torch.no_grad():
            for i in range(self.spec.steps):
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
                    out = call_step(self.target, i, self.forward, args, kwargs)
                except TargetError as e:
                    raise self.in_window(e, i) from None
                self.sync()
                times.append((time.perf_counter() - t0) * 1e3)
                built.append(counters["frames"]["ok"] - before)
                if seen is not None:  # the first pass's outputs: what a --try side is held to
                    self.outputs.append(fingerprint(out))
                    self.records += [i] * (len(get_compilation_metrics()) - len(self.records))
                progress({"step": i + 1, "steps": self.spec.steps, "built": built[-1]})
        return times, built

    def in_window(self, error: TargetError, step: int) -> TargetError:
        """A step that ran in the first pass and raises in a timed window broke the contract."""
        if not self.window:
            return error
        spec, _, what = str(error).partition(": ")
        return TargetError(f"{spec}: timed window {self.window}, step {step} {CONTRACT}: {what}")
