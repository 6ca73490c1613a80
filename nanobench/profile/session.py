"""One profiled mode in its own worker: compile's session, then its steady step under the profiler.

What it is: `ProfileSession`, the worker session this module serves when run (`python -m
nanobench.profile.session`), handed a `ProfileJob`'s fields. It opens compile's own session for
the mode (`compile.session.open_session`: the engine or the `--target`, built, first pass
measured); then, in the mode's first worker only: warm passes until one builds nothing, pairs
of passes with and without torch.profiler, interleaved (`profile.passes`: CPU activity, CUDA's
too on a GPU; shapes recorded), one more with Python stacks (for where each op comes from
only: stacks cost time, so no time is read from it; each kernel's user line from it and Inductor's
provenance, `profile.user_lines`, which every worker of the mode turns on before it builds), the
peaks probed (`decode.roofline`), and the events attributed (`profile.attribution`). Timed
windows (`serve`) are compile's, unprofiled, in the fleet's rounds; `finish` is compile's.
Inductor's per-kernel records (`TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE`) are set by the parent
in this worker's environment, so every kernel the mode builds names itself to the profiler.
What it is not: the sweep, the rounds' statistics or the report.
Invariant: the profiled passes come after a pass that built nothing, and their own builds decide
which steps are steady; the ready row's profile is measured, never filled in.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import wraps

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from nanobench.compile.session import open_session
from nanobench.decode.roofline import probe_bandwidth, probe_gemm
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.workers.fleet import timing_core
from nanobench.harness.workers.fresh import pin_this_thread, serve_main
from nanobench.profile.attribution import attribute, events_per_step
from nanobench.profile.device import skip_reasons
from nanobench.profile.generated import defined_kernels, generated_sources, kernel_sources
from nanobench.profile.overhead import event_cost_us
from nanobench.profile.passes import end_to_end, interleaved, least_disturbed, run_pass
from nanobench.profile.rows import FORWARD_RANGE, STEP_RANGE
from nanobench.profile.spec import ProfileJob
from nanobench.profile.user_lines import enable_provenance, forward_ops, kernel_lines, provenance

WARM_PASSES = 3  # passes run before profiling, at most, waiting for one that builds nothing


@dataclass(frozen=True)
class Peaks:
    """What the roofline probes read of a run's spec: the device, dtype and bytes to stream."""

    device: str
    dtype: str
    weight_bytes: int


def marked(fn: Callable, *names: str) -> Callable:
    """`fn` inside a profiler range per name (outermost first); near free with no profiler."""

    @wraps(fn)
    def call(*args, **kwargs):
        if not names:
            return fn(*args, **kwargs)
        with record_function(names[0]):
            return marked(fn, *names[1:])(*args, **kwargs)

    return call


@contextmanager
def ranges_marked(session) -> Iterator[None]:
    """The step and its forward as ranges while profiling: the engine's `decode_step` around
    its `decode_forward`; a target's step is its forward call (its inputs are built outside).
    Taken off after, so the rounds' unprofiled windows call no range at all."""
    engine = getattr(session, "engine", None)
    forward = getattr(session, "forward", None)
    if engine is not None:
        engine.decode_step = marked(engine.decode_step, STEP_RANGE)
        engine.decode_forward = marked(engine.decode_forward, FORWARD_RANGE)
    else:
        session.forward = marked(forward, STEP_RANGE, FORWARD_RANGE)
    try:
        yield
    finally:
        if engine is not None:
            del engine.decode_step, engine.decode_forward  # the class's own methods again
        else:
            session.forward = forward


def warm(session) -> None:
    """Passes until one builds nothing (a mode past its fall-back builds no more either)."""
    for _ in range(WARM_PASSES):
        _, built = session.run()
        if not any(built):
            return


def event_probe_us(ops: int = 2000, repeats: int = 5) -> tuple[float, float]:
    """(what one event cost, what of it fell inside the event) here, in µs: `ops` calls of
    `as_strided`, an op that only makes a view, timed with and without the profiler (the fastest
    of `repeats` each); the cost the difference over the events recorded, the inside part the
    events' median duration (an upper bound: the op's own work is in it)."""
    a = torch.ones(1)  # (1,): an op that does next to nothing but dispatch

    def fastest() -> float:
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(ops):
                a.as_strided((1,), (1,))
            best = min(best, time.perf_counter() - t0)
        return best

    plain = fastest()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        profiled = fastest()
    spans = [e.time_range.end - e.time_range.start for e in prof.events()]
    return max(profiled - plain, 0.0) / len(spans) * repeats * 1e6, statistics.median(spans)


def guard_latency_us() -> float | None:
    """Dynamo's own guard latency (the compilation metrics' `guard_latency_us`: one check of a
    frame's guards timed at its compile, after a cache flush), the median over the frames built."""
    from torch._dynamo.utils import get_compilation_metrics

    found = [m.guard_latency_us for m in get_compilation_metrics() if m.guard_latency_us]
    return statistics.median(found) if found else None


def model_bytes(session) -> int:
    """The bytes the bandwidth probe streams: the engine's weights, or 64 MiB for a target."""
    engine = getattr(session, "engine", None)
    if engine is None:
        return 64 << 20
    return sum(p.numel() * p.element_size() for p in engine.model.parameters())


def profile_mode(session, job: ProfileJob) -> dict:
    """The mode's steady step profiled and attributed: categories, kernels, facts, peaks."""
    spec = session.spec
    warm(session)
    pin_this_thread(timing_core())  # the core the rounds' windows are timed on
    with ranges_marked(session):
        passes = interleaved(session, job.passes, job.trace)
        # eager, an operator's or subscript's line too (`user_lines.CallLines`): a compiled
        # mode would build again under it
        stacked = run_pass(session, profiled=True, stacks=True, eager=spec.mode == "off")
    kept = least_disturbed(passes)
    events = end_to_end([p.events for p in passes if p.events is not None])
    per_step = events_per_step(events, kept.steady)  # no kept step: ValueError, no profile
    cost_us = event_cost_us(kept.profiled_ms, kept.plain_ms, per_step)
    probe_us, probe_inside_us = event_probe_us()
    inside_us = cost_us * min(probe_inside_us / probe_us, 1.0) if probe_us else cost_us
    peaks = {
        **probe_bandwidth(Peaks(spec.device, spec.dtype, model_bytes(session))),
        **probe_gemm(Peaks(spec.device, spec.dtype, 0)),
    }
    rates = (peaks["bandwidth_gbs"], peaks["gemm_gflops"])
    cost = (inside_us, cost_us - inside_us)
    texts, ops = generated_sources(), forward_ops(stacked.events)
    lines = kernel_lines(ops, stacked.sites, texts, provenance())
    categories, kernels, facts = attribute(events, kept.steady, rates, cost, lines,
                                           kernel_sources(ops, texts))  # fmt: skip
    plain_ms = statistics.fmean(kept.plain_ms)
    facts |= {
        "plain_step_ms": plain_ms,
        "overhead": statistics.fmean(kept.profiled_ms) / plain_ms - 1,  # the same clock
        "beside_spread": kept.spread,
        "event_cost_us": cost_us,
        "event_inside_us": inside_us,
        "events_per_step": per_step,
        "probe_event_cost_us": probe_us,
        "guard_latency_us": guard_latency_us(),
    }
    return {
        "categories": [asdict(c) for c in categories],
        "kernels": [asdict(k) for k in kernels],
        "facts": {**facts, "bandwidth_gbs": rates[0], "gemm_gflops": rates[1],
                  "generated_kernels": len(defined_kernels(texts)), "trace": job.trace},
    }  # fmt: skip


class ProfileSession:
    """Compile's session for one mode, its first worker's ready row carrying the profile."""

    def __init__(self, payload: dict, progress: Callable[[dict], None] = lambda e: None):
        job = rebuild(ProfileJob, payload)
        # in every worker of the mode: the one that profiles runs the code the others time
        enable_provenance()
        with skip_reasons() as skipped:  # the mode builds here
            self.inner = open_session(job.worker, progress)
        self.ready = dict(self.inner.ready)
        if job.passes and self.inner.spec.process == 1 and self.ready.get("status", "ok") == "ok":
            progress({"step": 0, "steps": job.passes, "profiling": True})
            self.ready["profile"] = profile_mode(self.inner, job)
            self.ready["profile"]["facts"]["cudagraph_skips"] = "; ".join(skipped)

    def serve(self, request: dict) -> dict:
        return self.inner.serve(request)

    def finish(self) -> dict:
        return self.inner.finish()


if __name__ == "__main__":
    serve_main(ProfileSession)
