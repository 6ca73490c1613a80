"""One compile mode in its own worker: built and measured once, then timed in replayed windows.

What it is: `build_stepper(spec, **extra)` (the one place that builds the thing a step runs:
the engine over the checkpoint in the spec's shape; a user's own step plugs in here),
`probe_guard_kind` (explain one step before compiling: guards on step-varying Python values
mean `value`), `steady_mask` (which steps of a run are timed as steady) and `CompileSession`, the
worker session this module serves when run (`python -m nanobench.compile.session`). Opening it resets dynamo, probes the guard kind,
builds the engine in the spec's mode and runs the first pass (the `steps` decode steps whose
builds, reuse, fall-back and recompile reasons the row reports, from dynamo's own counters and
`get_compilation_metrics()`). `open_session` applies the spec's `threads` first, for the
engine's session and a `--target`'s alike. Each request then replays the same prompts and
steps as one timed window; `finish` adds what the windows built.
What it is not: the sweep, the statistics or the report.
Invariant: dynamo's state is this process's alone (one mode per worker); a window replays the
first pass's shape history, so it presents no shape the first pass did not, and the steps it
marks steady are the ones that built nothing in the first pass (and, past a fall-back, only
the steps after dynamo gave up: they run eagerly after checking every cached guard set).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict

from nanobench.compile.bench import (
    compiler_for,
    predict,
    quiet_dynamo,
    recompile_limit,
    short_reason,
)
from nanobench.cost.compile import classify_guard
from nanobench.compile.reduce_overhead import cudagraph_counts
from nanobench.harness.rounds import Window, time_steps


def build_stepper(spec: dict, **extra):
    """The engine a compile worker steps, in the spec's shape (`extra`: its compile options)."""
    from engine.engine import Engine

    return Engine.from_checkpoint(
        spec["model"],
        max_batch_size=spec["max_batch"],
        max_model_len=spec["max_model_len"],
        block_size=spec.get("block_size", 16),
        dtype=spec["dtype"],
        device=spec["device"],
        bucket_decode=spec["bucketed"],
        width_multiple=spec["width_multiple"],
        decode_path=spec.get("decode_path", "planned"),
        **extra,
    )


def probe_guard_kind(engine, tokens) -> tuple[str, list[str]]:
    """Before compiling: explain one step; guards on step-varying Python values mean `value`."""
    import torch

    from engine.attention import UnplannedDecode
    from nanobench.harness.dynamo_explain import value_guards

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


def steady_mask(builds_per_step: list[int], fell_back: bool) -> list[bool]:
    """Steps that built nothing; after a fall-back, only the steps past the last build."""
    if fell_back:
        last = max((i for i, b in enumerate(builds_per_step) if b), default=-1)
        return [i > last for i in range(len(builds_per_step))]
    return [b == 0 for b in builds_per_step]


def open_session(spec: dict, progress: Callable[[dict], None] = lambda e: None):
    """The worker's session: the engine's, or a user's `--target` step's (`target_bench`)."""
    from nanobench.harness.common import apply_threads

    # Before either session builds or times anything: both rows read the count back themselves.
    apply_threads(int(spec["threads"]))
    if spec.get("target"):
        from nanobench.harness.target_bench import TargetSession

        return TargetSession(spec, progress)
    return CompileSession(spec, progress)


class WindowServer:
    """What a compile worker session does after its first pass: timed windows, then its row.

    A session sets `spec`, `ready`, `steady` (the first pass's steady-step mask) and
    `frames_after_first_pass`, and defines `run()` -> (ms, builds) of one pass.
    """

    def serve(self, request: dict) -> dict:
        """One timed window: the first pass's steps again."""
        ms, built = self.run()
        window = Window(
            self.spec["mode"],
            int(request["round"]),
            "ok",
            tuple(ms),
            tuple(built),
            tuple(self.steady),
        )
        return asdict(window)

    def finish(self) -> dict:
        from torch._dynamo.utils import counters

        return {
            **self.ready,
            "builds_in_windows": counters["frames"]["ok"] - self.frames_after_first_pass,
        }


class CompileSession(WindowServer):
    def __init__(self, spec: dict, progress: Callable[[dict], None] = lambda e: None) -> None:
        import torch
        import torch._dynamo
        from torch._dynamo.utils import clear_compilation_metrics, counters

        from nanobench.harness.dynamo_explain import seeded_prompts

        quiet_dynamo()
        self.spec = spec
        mode = spec["mode"]
        guard_kind_expected, expected_guards = "shape", []
        if mode != "off":
            probe = build_stepper(spec)
            prompts = seeded_prompts(
                spec["rows"], spec["prompt_len"], probe.model_config.vocab_size, spec["seed"]
            )
            tokens = probe.prefill(prompts).argmax(-1).tolist()
            guard_kind_expected, expected_guards = probe_guard_kind(probe, tokens)
            del probe
        prediction = predict(spec, guard_kind_expected)
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        self.engine = build_stepper(
            spec, compile_decode=mode, compiler=compiler_for(spec["backend"])
        )
        self.prompts = seeded_prompts(
            spec["rows"], spec["prompt_len"], self.engine.model_config.vocab_size, spec["seed"]
        )
        self.sync = torch.cuda.synchronize if spec["device"] == "cuda" else (lambda: None)

        def report(i: int) -> None:
            built = self.engine.compiled.builds_per_call[-1]
            progress({"step": i, "steps": spec["steps"], "built": built})

        times, built = self.run(report)
        self.frames_after_first_pass = counters["frames"]["ok"]
        self.ready = self.ledger(mode, prediction, guard_kind_expected, expected_guards)
        self.ready["build_steps_s"] = round(sum(t for t, b in zip(times, built) if b) / 1e3, 4)
        self.ready["step_ms_all"] = [round(t, 4) for t in times]
        self.ready["builds_per_step"] = built
        self.steady = steady_mask(built, self.ready["fell_back"])
        steady = [t for t, s in zip(times, self.steady) if s]
        # The first pass alone: what a one-shot run reports; rounds replace it.
        self.ready["step_ms"] = round(statistics.median(steady), 4) if steady else None
        self.ready["steady_steps"] = len(steady)

    def run(self, report: Callable[[int], None] = lambda i: None) -> tuple[list[float], list[int]]:
        """Prefill (untimed), then `steps` timed decode steps: ms and builds of each."""
        from nanobench.harness.finite import FiniteWatch

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

        ms, built = time_steps(step, self.spec["steps"], clock=time.perf_counter, sync=self.sync)
        self.engine.release_all()
        watch.check()
        return ms, built

    def ledger(self, mode: str, prediction: dict, kind_expected: str, expected: list) -> dict:
        """The first pass as dynamo's counters and compilation metrics record it."""
        import torch
        from torch._dynamo.utils import counters, get_compilation_metrics

        metrics = list(get_compilation_metrics())
        compiled = [m for m in metrics if m.fail_type is None]
        reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
        kinds = {classify_guard(r) for r in reasons}
        guard_kind = "value" if "value" in kinds else ("shape" if "shape" in kinds else "none")
        return {
            "mode": mode,
            "status": "ok",
            "shapes": self.engine.compiled.distinct,
            "predicted_shapes": prediction["shapes"],
            "builds": counters["frames"]["ok"],
            "unique_graphs": counters["stats"]["unique_graphs"],
            "calls_captured": counters["stats"]["calls_captured"],
            "graph_breaks": sum(counters["graph_break"].values()),
            "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
            "reuse": self.engine.compiled.reuse,
            "fell_back": any("recompile limit" in (m.fail_reason or "") for m in metrics),
            "predicted_fall_back": prediction["predicted_fall_back"],
            "guard_kind": guard_kind if mode != "off" else "none",
            "predicted_guard_kind": kind_expected if mode != "off" else "none",
            "expected_value_guards": expected[:4],
            "recompile_reasons": [short_reason(r) for r in reasons],
            "recompile_limit": recompile_limit(),
            "compile_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4),
            "inductor_s": round(sum(m.inductor_compile_time_s or 0.0 for m in compiled), 4),
            "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
            "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
            **cudagraph_counts(mode),
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
        }


if __name__ == "__main__":
    from nanobench.harness.fresh import serve_main

    serve_main(open_session)
