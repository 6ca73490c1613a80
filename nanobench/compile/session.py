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
timed window (`compile.windows`); `finish` adds what the windows built.
What it is not: the sweep, the statistics or the report.
Invariant: dynamo's state is this process's alone (one mode per worker); a window replays the
first pass's shape history, so it presents no shape the first pass did not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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
from nanobench.harness.dynamo_explain import seeded_prompts, value_guards
from nanobench.harness.finite import FiniteWatch
from nanobench.harness.fresh import serve_main
from nanobench.harness.rounds import time_steps
from nanobench.harness.rows import rebuild
from nanobench.harness.threads import apply_threads


def build_stepper(spec: WorkerSpec, **extra) -> Engine:
    """The engine a compile worker steps, in the spec's shape (`extra`: its compile options)."""
    return Engine.from_checkpoint(
        spec.model,
        max_batch_size=spec.max_batch,
        max_model_len=spec.max_model_len,
        block_size=spec.block_size,
        dtype=spec.dtype,
        device=spec.device,
        bucket_decode=spec.bucketed,
        width_multiple=spec.width_multiple,
        decode_path=spec.decode_path,
        **extra,
    )


def probe_guard_kind(engine: Engine, tokens: list[int]) -> tuple[str, list[str]]:
    """Before compiling: explain one step; guards on step-varying Python values mean `value`."""
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
    out = torch._dynamo.explain(fn)(input_ids, view)
    found = value_guards(out.out_guards)
    return ("value" if found else "shape"), found


def open_session(payload: dict, progress: Callable[[dict], None] = lambda e: None):
    """The worker's session: the engine's, or a user's `--target` step's; a WorkerSpec's fields."""
    spec = rebuild(WorkerSpec, payload)
    # Before either session builds or times anything: both rows read the count back themselves.
    apply_threads(spec.threads)
    if spec.target:
        return TargetSession(spec, progress)
    return CompileSession(spec, progress)


class CompileSession(WindowServer):
    def __init__(self, spec: WorkerSpec, progress: Callable[[dict], None] = lambda e: None):
        quiet_dynamo()
        self.spec = spec
        guard_kind_expected, expected_guards = "shape", []
        # A later worker's row gives only its status and compile seconds: the probe is the first's.
        if spec.mode != "off" and spec.process == 1:
            probe = build_stepper(spec)
            prompts = seeded_prompts(
                spec.rows, spec.prompt_len, probe.model_config.vocab_size, spec.seed
            )
            tokens = probe.prefill(prompts).argmax(-1).tolist()
            guard_kind_expected, expected_guards = probe_guard_kind(probe, tokens)
            del probe
        prediction = predict(spec, guard_kind_expected)
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        self.engine = build_stepper(
            spec, compile_decode=spec.mode, compiler=compiler_for(spec.backend)
        )
        self.prompts = seeded_prompts(
            spec.rows, spec.prompt_len, self.engine.model_config.vocab_size, spec.seed
        )
        self.sync = torch.cuda.synchronize if spec.device == "cuda" else (lambda: None)

        def report(i: int) -> None:
            built = self.engine.compiled.builds_per_call[-1]
            progress({"step": i, "steps": spec.steps, "built": built})

        times, built = self.run(report)
        self.frames_after_first_pass = counters["frames"]["ok"]
        self.ready = self.ledger(times, built, prediction, guard_kind_expected, expected_guards)

    def run(self, report: Callable[[int], None] = lambda i: None) -> tuple[list[float], list[int]]:
        """Prefill (untimed), then `steps` timed decode steps: ms and builds of each."""
        watch = FiniteWatch()
        logits = self.engine.prefill(self.prompts)  # (B, V)
        watch.see(logits)
        state = {"tokens": logits.argmax(-1).tolist(), "i": 0}

        def step() -> int:
            logits = self.engine.decode_step(state["tokens"])  # (B, V)
            state["tokens"] = logits.argmax(-1).tolist()
            watch.see(logits)
            state["i"] += 1
            report(state["i"])
            return self.engine.compiled.builds_per_call[-1]

        ms, built = time_steps(step, self.spec.steps, clock=time.perf_counter, sync=self.sync)
        self.engine.release_all()
        watch.check()
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
        )
        return asdict(row)


if __name__ == "__main__":
    serve_main(open_session)
