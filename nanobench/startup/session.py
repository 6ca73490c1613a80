"""One start in its own fresh process: stamped from the interpreter's start to the first pass's end.

What it is: the worker `python -m nanobench.startup.session` runs (handed a `StartJob`'s fields):
stamp the clock before torch is imported, import, load a hot start's artifacts, build the step
(the engine over its checkpoint, or a `--target`'s factory), prefill, then the first pass (every
step once, so every shape the run presents is built; the first step's output is the first
compiled token), each step's share of torch's ledger recorded as it ran (`StepLedger`); a cold
start then saves its cache artifacts; a second pass gives the steady step. The ready row carries
wall-clock stamps and the ledger's raw figures: what they add up to is `startup.phases`.
What it is not: the phases' arithmetic, the run's order of starts or the report.
Invariant: the first stamp is taken before torch is imported; every figure a phase is built from
is either a wall-clock stamp or torch's own record of this process, never an estimate.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before torch: importing it is a phase of the start

import logging  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.utils import (  # noqa: E402
    compilation_time_metrics,
    counters,
    get_compilation_metrics,  # noqa: E402
)

from nanobench.compile.dynamo import compiler_for, quiet_dynamo  # noqa: E402
from nanobench.compile.reduce_overhead import compile_kwargs  # noqa: E402
from nanobench.compile.session import build_stepper  # noqa: E402
from nanobench.harness.runs.rows import rebuild  # noqa: E402
from nanobench.harness.step.dynamo_explain import seeded_prompts  # noqa: E402
from nanobench.harness.step.knobs import applied, compile_options  # noqa: E402
from nanobench.harness.step.self_compiled import SELF_COMPILED  # noqa: E402
from nanobench.harness.step.target_bench import call_step  # noqa: E402
from nanobench.harness.step.targets import inputs_at, make_target  # noqa: E402
from nanobench.harness.workers.finite import FiniteWatch  # noqa: E402
from nanobench.harness.workers.fresh import serve_main  # noqa: E402
from nanobench.harness.workers.threads import apply_threads  # noqa: E402
from nanobench.startup.ledger import (  # noqa: E402
    HASH_DETAILS,
    StepLedger,
    aot_compiled,
    frame_record,
)
from nanobench.startup.spec import StartJob  # noqa: E402

IMPORTED = time.time()


class HashDetails(logging.Handler):
    """The FX graph cache's key components, as Inductor logs them for each graph it looks up."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.graphs: list[list[str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith(HASH_DETAILS):
            self.graphs.append(text.split("\n")[1:])


def listen_for_hash_details() -> HashDetails:
    handler = HashDetails()
    log = logging.getLogger("torch._inductor.codecache")
    log.setLevel(logging.DEBUG)
    log.propagate = False  # the debug lines go to the handler, not to stderr
    log.addHandler(handler)
    return handler


class Stepper:
    """What a start steps: the engine's decode step, or a target's forward, compiled per mode."""

    def __init__(self, job: StartJob) -> None:
        if job.target:
            self.target = make_target(
                job.target,
                model=job.model,
                mode=job.mode,
                rows=job.rows,
                prompt_len=job.prompt_len,
                steps=job.steps,
                device=job.device,
                dtype=job.dtype,
            )
            fn = self.target.forward
            # a target that compiles itself did so in its factory, in this mode
            itself = job.mode == "off" or job.target in SELF_COMPILED
            self.forward = fn if itself else torch.compile(
                fn, **compile_kwargs(job.mode, job.backend), **compile_options(job.knob))  # fmt: skip
            self.engine = None
        else:
            self.target = None
            self.engine = build_stepper(
                job,
                compile_decode=job.mode,
                compiler=compiler_for(job.backend, compile_options(job.knob)),
            )
            vocab = self.engine.model_config.vocab_size
            self.prompts = seeded_prompts(job.rows, job.prompt_len, vocab, job.seed)
        self.watch = FiniteWatch()

    def prefill(self) -> None:
        if self.engine is not None:
            logits = self.engine.prefill(self.prompts)  # (B, V)
            self.watch.see(logits)
            self.tokens = logits.argmax(-1).tolist()

    def step(self, i: int) -> None:
        if self.engine is None:
            args, kwargs = inputs_at(self.target, i)
            with torch.no_grad():
                self.watch.see(call_step(self.target, i, self.forward, args, kwargs))
            return
        logits = self.engine.decode_step(self.tokens)  # (B, V)
        self.tokens = logits.argmax(-1).tolist()
        self.watch.see(logits)

    def release(self) -> None:
        if self.engine is not None:
            self.engine.release_all()
        self.watch.check()


def recorded(work: Callable[[], object], cache_dir: str) -> tuple[object, dict]:
    """(what `work()` returned, the graphs it compiled with its share of torch's ledger and the
    kernels it built), its wall-clock span stamped around it."""
    ledger = StepLedger(compilation_time_metrics)
    frames, kernels = len(get_compilation_metrics()), kernels_on_disk(cache_dir)
    ledger.mark()
    began = time.time()
    result = work()
    ended = time.time()
    added = list(get_compilation_metrics())[frames:]
    record = ledger.since([])
    record["frames"] = aot_compiled([frame_record(m) for m in added], record)
    record["runtime_s"] = sum(runtime_s(m) for m in added if m.is_runtime)
    record["kernels_built"] = kernels_on_disk(cache_dir) - kernels
    return result, {**record, "began": began, "ended": ended}


def first_pass(stepper: Stepper, job: StartJob, sync, progress, cache_dir: str):
    """Every step once, each step's share of the ledger kept; the wall-clock stamps around each
    (what this worker reads of torch between steps is outside them: no server does it)."""
    steps = []
    for i in range(job.steps):
        _, step = recorded(lambda i=i: (stepper.step(i), sync()), cache_dir)
        steps.append(step)
        progress({"step": i + 1, "steps": job.steps, "built": len(step["frames"])})
    return steps


def runtime_s(m) -> float:
    """A first call's own costs, recorded apart from its frame: CUDA graph recording
    (reduce-overhead) and Triton's runtime autotuning."""
    us = (m.runtime_cudagraphify_time_us or 0) + (m.runtime_triton_autotune_time_us or 0)
    return us / 1e6


def steady_ms(stepper: Stepper, job: StartJob, sync) -> float | None:
    """The median step of a second pass over the same steps, those that built nothing."""
    stepper.prefill()
    times = []
    for i in range(job.steps):
        before = counters["frames"]["ok"]
        sync()
        t0 = time.perf_counter()
        stepper.step(i)
        sync()
        if counters["frames"]["ok"] == before:
            times.append((time.perf_counter() - t0) * 1e3)
    stepper.release()
    return round(statistics.median(times), 4) if times else None


def kernels_on_disk(cache_dir: str) -> int:
    """Built kernels (shared libraries) in the Inductor cache: a hit that adds some rebuilt them."""
    return sum(1 for _ in Path(cache_dir).rglob("*.so")) if cache_dir else 0


def run_start(job: StartJob, progress: Callable[[dict], None]) -> dict:
    """The start's stamps and ledger, in the order a server meets them."""
    import os

    stamps = {"started": STARTED, "imported": IMPORTED}
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    so_before = kernels_on_disk(cache_dir)
    pgo_found = pgo_state_found(cache_dir)  # before anything compiles: what this start read
    apply_threads(job.threads)
    applied(job.knob)  # its side's --try knob, for the whole process ("" none)
    quiet_dynamo()
    details = listen_for_hash_details()
    loaded = 0
    if job.load_artifacts:
        blob = Path(job.load_artifacts).read_bytes()
        loaded = len(blob)
        torch.compiler.load_cache_artifacts(blob)
    stamps["artifacts"] = time.time()
    sync = torch.cuda.synchronize if job.device == "cuda" else (lambda: None)
    # a target that compiles itself (vllm) compiles while it is made: those graphs are its own
    stepper, made = recorded(lambda: Stepper(job), cache_dir)
    stamps["built"] = made["ended"]
    stepper.prefill()
    sync()
    stamps["prefilled"] = time.time()
    steps = first_pass(stepper, job, sync, progress, cache_dir)
    stepper.release()
    saved = save_artifacts(job.save_artifacts) if job.save_artifacts else 0
    return {
        "mode": job.mode,
        "kind": job.kind,
        "run": job.run,
        "stamps": stamps,
        "steps": steps,
        "made": made,
        "hash_details": details.graphs,
        "counters": {k: dict(counters[k]) for k in ("inductor", "aot_autograd", "frames")},
        "artifact_bytes_loaded": loaded,
        "artifact_bytes_saved": saved,
        "kernels_built": kernels_on_disk(cache_dir) - so_before,
        "pgo_state_found": pgo_found,
        "target_compile_s": stepper.target.compile_s if stepper.target is not None else None,
        "target_import_s": stepper.target.import_s if stepper.target is not None else None,
        "step_ms": steady_ms(stepper, job, sync),
        "torch_version": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", ""),
        "threads": torch.get_num_threads(),
    }


def save_artifacts(path: str) -> int:
    """A cold start's cache artifacts on disk for the hot starts; their bytes (0: none)."""
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return 0
    Path(path).write_bytes(saved[0])
    return len(saved[0])


def pgo_state_found(cache_dir: str) -> bool:
    """Whether dynamo's automatic-dynamic state (PGO) sits in the cache this start read."""
    return bool(cache_dir) and any(Path(cache_dir, "dynamo").glob("code_state_*"))


class StartSession:
    """serve_main's session: the start runs as the session opens; no requests follow."""

    def __init__(self, payload: dict, progress: Callable[[dict], None]) -> None:
        self.ready = run_start(rebuild(StartJob, payload), progress)

    def finish(self) -> dict:
        return self.ready


if __name__ == "__main__":
    serve_main(StartSession)
