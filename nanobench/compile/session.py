"""One compile mode in its own worker: built and measured once, then timed in replayed windows.

What it is: `build_stepper(spec, **extra)` (the one place that builds the thing a step runs:
the engine over the checkpoint in the spec's shape), `probe_guard_kind` (explain one step before
compiling: guards on step-varying Python values mean `value`) and `CompileSession`, the worker
session this module serves when run (`python -m nanobench.compile.session`), handed a
`WorkerSpec`'s fields. Opening it resets dynamo, probes the guard kind, builds the engine in
the spec's mode and runs the first pass (the `steps` decode steps whose builds, reuse,
fall-back and recompile reasons the row reports, `compile.ledger`). `open_session` applies the
spec's `threads` first, for the engine's session and a `--target`'s
(`compile.target_session`) alike. Each request then replays the same prompts and steps as one
timed window (`compile.windows`); `finish` adds what the windows built. Given tune's batch mix,
a pass decodes `steps` at each size of it, a step the mix's mean; given a capture list, the
engine records it up front and its steps replay. A later worker sets up
cheaper (its row gives only its status and, for the second, its warm compile seconds): no
guard-kind probe, `off` on one thread (`set_up_threads`), and past the second its floats traced
as constants, kept only when every graph came from the first's cache (`all_from_cache`).
What it is not: the sweep, the statistics or the report.
Invariant: dynamo's state is this process's alone (one mode per worker); a window replays the
first pass's shape history, so it presents no shape the first pass did not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters

from engine.attention import UnplannedDecode
from engine.engine import Engine
from engine.plan import plan_decode
from nanobench.compile.dynamo import compiler_for, predict, quiet_dynamo
from nanobench.compile.ledger import first_pass
from nanobench.compile.spec import WorkerSpec
from nanobench.compile.target_session import TargetSession
from nanobench.compile.windows import WindowServer
from nanobench.harness.cli.choices import REDUCE_OVERHEAD
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.step.dynamo_call import trace_call
from nanobench.harness.step.dynamo_explain import (
    ExplainRow,
    break_table,
    explained_counts,
    per_call,
    seeded_prompts,
    value_guards,
)
from nanobench.harness.step.knobs import applied, compile_options
from nanobench.harness.step.output_check import fingerprint
from nanobench.harness.workers.finite import FiniteWatch
from nanobench.harness.workers.fresh import serve_main
from nanobench.harness.workers.rounds import time_steps
from nanobench.harness.workers.threads import apply_threads, threads_applied


def build_stepper(spec: WorkerSpec, **extra) -> Engine:
    """The engine a compile worker steps, in the spec's shape (`extra`: its compile options);
    with a capture list, its buckets are the list's sizes and it records their CUDA graphs."""
    graphs = {}
    if spec.capture_sizes:
        graphs = dict(capture_decode=True, capture_sizes=spec.capture_sizes)
    return Engine.from_checkpoint(
        spec.model,
        max_batch_size=spec.capture_sizes[-1] if spec.capture_sizes else spec.max_batch,
        max_model_len=spec.max_model_len,
        block_size=spec.block_size,
        dtype=spec.dtype,
        device=spec.device,
        bucket_decode=spec.bucketed or bool(spec.capture_sizes),
        width_multiple=spec.width_multiple,
        decode_path=spec.decode_path,
        **graphs,
        **extra,
    )


def probe_guard_kind(engine: Engine, tokens: list[int]) -> tuple[str, list[str], dict]:
    """Before compiling: explain one step; guards on step-varying Python values mean `value`.
    Also the step's one-call counts (`dynamo_explain.per_call`), as `explain` reports them."""
    rows = engine.active_rows
    input_ids = torch.tensor(tokens, device=engine.cache.device).view(-1, 1)  # (B, 1)
    if engine.config.decode_path == "unplanned":
        view = UnplannedDecode(engine.cache, rows)
        fn = engine.unplanned_forward
    else:
        view = plan_decode(
            engine.cache, list(rows), engine.buckets, engine.inputs, engine.width_free
        )
        fn = engine.planned_forward
    out = trace_call(fn, input_ids, view)
    found = value_guards(out.out_guards)
    counts = explained_counts(out, break_table(out), found)
    return ("value" if found else "shape"), found, per_call(ExplainRow(None, "", "", **counts))


@contextmanager
def set_up_threads(spec: WorkerSpec) -> Iterator[None]:
    """One thread for a later `off` worker's build and first pass, the spec's for everything else.

    Later workers set up side by side, and two OpenMP teams of two threads on two cores wait on
    each other's descheduled threads: off's build and first pass took 0.08 s alone and 2.7 s
    beside another. A later worker's first pass is only warm-up (its row gives its status), and
    a mode that compiles has its thread count in every kernel's cache key, so only `off` may.
    """
    if spec.mode != "off" or spec.process == 1:
        yield
        return
    with threads_applied(1):
        yield
    # OpenMP starts its team at the first parallel region, on that thread's cores: started in a
    # window (its timing thread pinned, `fresh.pin_this_thread`) both threads shared one core and
    # a step took 164 ms, not 1.8. Started here, unpinned, the team keeps every core.
    torch.ones(1 << 20).add_(1.0)  # (W,): above ATen's grain, so the team runs it


def open_session(payload: dict, progress: Callable[[dict], None] = lambda e: None):
    """The worker's session: the engine's, or a user's `--target` step's; a WorkerSpec's fields."""
    spec = rebuild(WorkerSpec, payload)
    # Before either session builds or times anything: both rows read the count back themselves.
    apply_threads(spec.threads)
    applied(spec.knob)  # a --try side's config, for the whole process
    if spec.target:
        return TargetSession(spec, progress)
    return CompileSession(spec, progress)


def all_from_cache() -> bool:
    """Every graph this process compiled came from AOTAutograd's cache, none compiled anew: the
    cache is keyed by the graph, so each is one the first worker compiled and timed."""
    aot, inductor = counters["aot_autograd"], counters["inductor"]
    anew = aot["autograd_cache_miss"] + aot["autograd_cache_bypass"]
    return aot["autograd_cache_hit"] > 0 and anew + inductor["fxgraph_cache_miss"] == 0


class CompileSession(WindowServer):
    def __init__(self, spec: WorkerSpec, progress: Callable[[dict], None] = lambda e: None):
        quiet_dynamo()
        self.spec = spec
        guard_kind_expected, expected_guards, self.counts = "shape", [], {}
        # A later worker's row gives only its status and compile seconds: the probe is the first's.
        if spec.mode != "off" and spec.process == 1 and spec.probe:
            probe = build_stepper(spec)
            prompts = seeded_prompts(
                spec.rows, spec.prompt_len, probe.model_config.vocab_size, spec.seed
            )
            tokens = probe.prefill(prompts).argmax(-1).tolist()
            guard_kind_expected, expected_guards, self.counts = probe_guard_kind(probe, tokens)
            del probe
        prediction = predict(spec, guard_kind_expected)
        shortcut = spec.process > 2 and spec.mode != "off" and spec.backend == "inductor"
        times, built = self.first_pass(progress, specialize_float=shortcut)
        if shortcut and not all_from_cache():
            times, built = self.first_pass(progress, specialize_float=False)
        self.frames_after_first_pass = counters["frames"]["ok"]
        self.ready = self.ledger(times, built, prediction, guard_kind_expected, expected_guards)

    def first_pass(
        self, progress: Callable[[dict], None], specialize_float: bool
    ) -> tuple[list[float], list[int]]:
        """A fresh dynamo, the engine built in the spec's mode, and its first pass.

        `specialize_float`: floats traced as constants from the start. Under dynamic=True the
        engine's compile traces them symbolic, then restarts its trace to specialize them
        (TensorifyScalarRestartAnalysis: 2.8 s of a 6.5 s warm start); a worker past the
        second (whose warm start is the row's `compile_warm_s`) goes straight to that graph.
        """
        spec = self.spec
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        # Only the shortcut patches it: otherwise a --try side's setting (or torch's) holds.
        floats = (
            torch._dynamo.config.patch(specialize_float=True) if specialize_float else nullcontext()
        )
        with set_up_threads(spec), floats:
            compiler = compiler_for(spec.backend, compile_options(spec.knob))
            self.engine = build_stepper(spec, compile_decode=spec.mode, compiler=compiler)
            # Up front, before any request, as a server records its list: every step replays.
            self.record_s = round(self.engine.capture().total_s, 4) if spec.capture_sizes else None
            self.prompts = seeded_prompts(
                max(b for b, _ in spec.batches()), spec.prompt_len,
                self.engine.model_config.vocab_size, spec.seed,
            )  # fmt: skip
            self.sync = torch.cuda.synchronize if spec.device == "cuda" else (lambda: None)

            def report(i: int, built: int) -> None:
                progress({"step": i, "steps": spec.steps, "built": built})

            return self.run(report, keep=True)

    def run(self, report: Callable[[int, int], None] = lambda i, b: None, keep: bool = False
            ) -> tuple[list[float], list[int]]:  # fmt: skip
        """The workload's `steps` decode steps: at --rows, or at each batch size of the mix,
        step i's ms the mix's mean (each size's step i by its share) and its builds summed."""
        ms, built = [0.0] * self.spec.steps, [0] * self.spec.steps
        if keep:
            self.outputs = []
        for rows, share in self.spec.batches():
            times, builds = self.pass_at(self.prompts[:rows], report, keep)
            ms = [total + share * t for total, t in zip(ms, times)]
            built = [total + b for total, b in zip(built, builds)]
        return ms, built

    def pass_at(self, prompts: list, report: Callable[[int, int], None], keep: bool
                ) -> tuple[list[float], list[int]]:  # fmt: skip
        """Prefill `prompts` (untimed), then `steps` timed decode steps: ms and builds of each;
        `keep`: each step's output fingerprinted into `outputs`."""
        watch = FiniteWatch()
        logits = self.engine.prefill(prompts)  # (B, V)
        watch.see(logits)
        state = {"tokens": logits.argmax(-1).tolist(), "i": 0}
        # The first pass's logits (`keep`), held (not copied) until the timing is done: a timed
        # window keeps none, so it does no work the first pass's output check alone needs.
        kept = []
        # a CUDA graph (reduce-overhead's, a capture list's) overwrites its output at the next
        # replay
        replayed = self.spec.mode == REDUCE_OVERHEAD or bool(self.spec.capture_sizes)

        calls = self.engine.compiled.builds_per_call

        def step() -> int:
            # what this step's compiled calls built: a replayed graph calls nothing
            before = len(calls)
            logits = self.engine.decode_step(state["tokens"])  # (B, V)
            state["tokens"] = logits.argmax(-1).tolist()
            watch.see(logits)
            if keep:
                kept.append(logits.clone() if replayed else logits)
            state["i"] += 1
            built = sum(calls[before:])
            report(state["i"], built)
            return built

        ms, built = time_steps(step, self.spec.steps, clock=time.perf_counter, sync=self.sync)
        self.engine.release_all()
        watch.check()
        if keep:
            self.outputs += [fingerprint(x) for x in kept]
        return ms, built

    def ledger(
        self, times: list, built: list, prediction: dict, kind_expected: str, expected: list
    ) -> dict:
        """The first pass as dynamo's counters and compilation metrics record it."""
        row, self.steady = first_pass(
            self.spec.mode,
            times,
            built,
            shapes=self.engine.compiled.distinct,
            predicted_shapes=prediction["shapes"],
            predicted_fall_back=prediction["predicted_fall_back"],
            predicted_guard_kind=kind_expected,
            expected_value_guards=expected,
            outputs=self.outputs,
        )
        rule = "rule: the step's shape history and guard kind (cost.compile)"
        return {
            **asdict(row),
            **self.counts,
            "predicted_by": rule if self.spec.mode != "off" else None,
            "record_s": self.record_s,
        }


if __name__ == "__main__":
    serve_main(open_session)
