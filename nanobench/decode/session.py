"""One decode system in its own worker: built and warmed up once, then timed a generation a round.

What it is: `TokenClock` (wall and CPU time at every token on the host, and the frames dynamo
built by then), the systems (`engine_system`: the engine eager, compiled or captured;
`hf_system`: transformers' `generate`, default cache or static cache + compiled forward) and
`DecodeSession`, the session this module serves (`python -m nanobench.decode.session`, the probe's
too): set-up builds the system and runs one untimed warm-up generation (where compiling happens);
each request is one timed greedy generation, a window of `steps - 1` decode steps, or one
slice of a generation that the systems take turns at (`nanobench.harness.workers.slices`); `finish` reports
tokens, determinism and what was built while timed.
What it is not: the sweep, the floor or the gates (`nanobench.decode.bench`).
Invariant: every system runs the same checkpoint, seeded prompts and number of greedy steps
on the same thread count. The first token (the prefill) is timed on its own and never enters a
decode step's time. Dynamo's state is this process's alone.
"""

from __future__ import annotations

import logging
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

from engine.engine import Engine
from engine.recorders import eager_recorder
from engine.weights import DTYPES
from nanobench.decode.bench import ENGINE_SYSTEMS, DecodeGateFailed
from nanobench.decode.clock import TokenClock
from nanobench.decode.roofline import PROBE, ProbeSession
from nanobench.decode.rows import RunSpec
from nanobench.decode.samples import text_prompts, tokenizer_for
from nanobench.harness.cli.choices import VLLM_SYSTEMS
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.step.dynamo_explain import seeded_prompts
from nanobench.harness.step.knobs import applied, compile_options
from nanobench.harness.workers.finite import FiniteWatch
from nanobench.harness.workers.fresh import serve_main
from nanobench.harness.workers.rounds import Window
from nanobench.harness.workers.slices import SlicedGeneration, slice_bounds

# -- systems ----------------------------------------------------------------------------------


def quiet_libraries() -> None:
    """Dynamo's recompile warnings and transformers' notices are not this command's output."""
    for name in ("torch._dynamo", "torch._inductor", "torch.fx", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)


def prompts_for(spec: RunSpec, vocab: int) -> list[list[int]]:
    """Real text when the checkpoint ships a tokenizer, else seeded random ids."""
    tokenizer = tokenizer_for(spec.model)
    if tokenizer is not None:
        return text_prompts(tokenizer, spec.rows, spec.prompt_len)
    return seeded_prompts(spec.rows, spec.prompt_len, vocab, spec.seed)


def compiler_for(backend: str, options: dict | None = None) -> Callable:
    """The engine's compiler: `options` is a --try side's (`knobs.compile_options`)."""

    def compile_with(fn, mode):
        return torch.compile(fn, dynamic=(mode == "dynamic"), backend=backend, **(options or {}))

    return compile_with


def engine_system(spec: RunSpec) -> tuple[Callable[[TokenClock], list], dict]:
    """A generation function over the engine in the system's mode, and the facts of its build."""
    system = spec.system
    options: dict = {}
    if system == "engine-compiled":
        options = dict(compile_decode="dynamic")
        # Inductor is the engine's own compiler: measure exactly what the engine runs.
        if spec.backend != "inductor":
            options["compiler"] = compiler_for(spec.backend, compile_options(spec.knob))
    elif system == "engine-captured":
        options = dict(capture_decode=True, bucket_decode=True, width_multiple=spec.width_multiple)
        if spec.device == "cpu":
            # No device to record on: capture semantics (fixed buffers, no-argument replays).
            options["recorder"] = eager_recorder
    engine = Engine.from_checkpoint(
        spec.model,
        max_batch_size=spec.rows,
        max_model_len=spec.max_model_len,
        dtype=spec.dtype,
        device=spec.device,
        **options,
    )
    prompts = prompts_for(spec, engine.model_config.vocab_size)
    info: dict = {"attention": engine.attention, "linear_layout": engine.linear_layout}
    if system == "engine-captured":
        recorder = options.get("recorder")
        info["recorder"] = recorder.__name__ if recorder is not None else "default_recorder"
        # Up front, before any request, as a server would: every later step is a replay.
        stats = engine.capture()
        info["capture_s"] = round(stats.total_s, 4)
        info["captured_shapes"] = stats.count

    def generate(clock: TokenClock) -> list:
        watch = FiniteWatch()
        clock.begin()
        logits = engine.prefill(prompts)  # (B, V)
        tokens = logits.argmax(-1).tolist()
        clock.token()
        watch.see(logits)
        out = [[t] for t in tokens]
        for _ in range(spec.steps - 1):
            # argmax + tolist is the greedy sampler and puts the tokens on the host, as
            # transformers' streamer does: both clocks stop at the same point of a step.
            logits = engine.decode_step(tokens)  # (B, V)
            tokens = logits.argmax(-1).tolist()
            clock.token()
            # One on-device flag per step, as transformers' side pays in its logits processor.
            watch.see(logits)
            for row, t in zip(out, tokens):
                row.append(t)
        engine.release_all()
        watch.check()
        return out

    def finish(row: dict) -> None:
        if engine.decode_graphs is not None:
            row["recorded_mid_run"] = engine.decode_graphs.recorded_mid_run

    info["finish"] = finish
    return generate, info


def hf_system(spec: RunSpec) -> tuple[Callable[[TokenClock], list], dict]:
    """transformers' `generate` over the same directory: default cache, or static + compiled."""
    # Only an hf worker pays for importing transformers (seconds): an engine worker never does.
    import transformers
    from transformers import AutoModelForCausalLM, LogitsProcessorList

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    model = (
        AutoModelForCausalLM.from_pretrained(
            spec.model, dtype=DTYPES[spec.dtype], attn_implementation=spec.hf_attn
        )
        .to(spec.device)
        .eval()
    )
    gen = model.generation_config
    # Exactly `steps` greedy tokens per row, as the engine makes: no stop token, no sampling
    # defaults a downloaded checkpoint's generation_config.json may carry.
    gen.eos_token_id = None
    gen.pad_token_id = 0
    gen.do_sample = False
    gen.temperature = gen.top_p = gen.top_k = None
    info = {"attention": model.config._attn_implementation, "hf_version": transformers.__version__}
    if spec.system == "hf-static-compiled":
        gen.cache_implementation = "static"
        # mode="reduce-overhead" means CUDA graphs; on CPU the default mode is the fair one.
        model.forward = torch.compile(model.forward, fullgraph=True, backend=spec.backend,
                                      **compile_options(spec.knob))  # fmt: skip
    vocab = model.config.vocab_size
    ids = torch.tensor(prompts_for(spec, vocab), device=spec.device)  # (B, P)
    mask = torch.ones_like(ids)

    def watch_scores(_input_ids, scores):  # a LogitsProcessor: sees every step's logits
        watch.see(scores)
        return scores

    watch = FiniteWatch()

    def generate(clock: TokenClock) -> list:
        clock.begin()
        out = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=spec.steps,
            streamer=clock,
            logits_processor=LogitsProcessorList([watch_scores]),
        )
        watch.check()
        tokens = out[:, ids.shape[1] :].tolist()
        if any(len(t) != spec.steps for t in tokens):
            raise DecodeGateFailed(
                f"transformers made {len(tokens[0])} tokens per row, expected {spec.steps}"
            )
        return tokens

    return generate, info


def vllm_system(spec: RunSpec) -> tuple[Callable[[TokenClock], list], dict]:
    """vLLM's engine in this process (`harness.step.vllm_target`): enforce_eager, or its default
    compile (on a CPU its platform makes it dynamo-trace-once), timed by vLLM's own clock."""
    from nanobench.harness.step.vllm_target import built_llm, generate_tokens, import_vllm

    mode = "off" if spec.system == "vllm-eager" else None
    llm, compile_s = built_llm(
        spec.model, mode, spec.rows, spec.prompt_len + spec.steps, spec.dtype
    )
    prompts = prompts_for(spec, llm.llm_engine.model_config.get_vocab_size())

    def generate(clock: TokenClock) -> list:
        clock.begin()
        return generate_tokens(llm, prompts, spec.steps, clock.token)

    info = {"vllm_version": import_vllm().__version__}
    return generate, info | ({"compile_s": round(compile_s, 4)} if mode is None else {})


class DecodeSession:
    def __init__(self, spec: RunSpec, progress: Callable[[dict], None] = lambda e: None) -> None:
        quiet_libraries()
        if spec.threads:
            torch.set_num_threads(spec.threads)
        torch._dynamo.reset()
        counters.clear()
        clear_compilation_metrics()
        self.spec = spec
        system = spec.system
        build = (
            engine_system if system in ENGINE_SYSTEMS
            else vllm_system if system in VLLM_SYSTEMS
            else hf_system
        )  # fmt: skip
        started = time.perf_counter()
        self.generate, info = build(spec)
        build_s = time.perf_counter() - started
        self.on_finish = info.pop("finish", None)
        progress({"phase": "warm-up", "i": 0, "of": 1})
        started = time.perf_counter()
        self.tokens = self.generate(TokenClock())
        warmup_s = time.perf_counter() - started
        compiled = [m for m in get_compilation_metrics() if m.fail_type is None]
        self.frames = lambda: counters["frames"]["ok"]
        self.frames_before = self.frames()
        self.deterministic = True
        self.clocks: list[dict] = []
        self.sliced = None  # the generation a sliced round is part-way through
        self.ready = {
            "system": system,
            "status": "ok",
            "compile_s": (
                round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4)
                if system in ("engine-compiled", "hf-static-compiled")
                else None
            ),
            "frames_compiled": len(compiled),
            "build_s": round(build_s, 4),
            "warmup_s": round(warmup_s, 4),
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
            **info,
        }

    def serve(self, request: dict) -> dict:
        """One timed generation: its decode steps are the window (all steady: warmed up).

        A request with `slice` k of `slices` n times only the k-th slice of a generation that
        slice 1 started (`nanobench.harness.workers.slices`): the systems take turns mid-generation.
        """
        if "slices" in request:
            return self.serve_slice(int(request["round"]), request["slice"], request["slices"])
        clock = TokenClock(self.frames)
        tokens = self.generate(clock)
        self.deterministic &= tokens == self.tokens
        summary = clock.summary()
        self.clocks.append(summary)
        return self.window(int(request["round"]), summary["step_ms"], summary["built"])

    def window(self, round_index: int, ms: list[float], built: list[int]) -> dict:
        steady = (True,) * len(ms)
        return asdict(Window(self.spec.system, round_index, "ok", tuple(ms), tuple(built), steady))

    def threaded(self, clock: TokenClock) -> list:
        """`generate` on a thread of its own: the same torch thread count as the main one."""
        if self.spec.threads:
            torch.set_num_threads(self.spec.threads)
        return self.generate(clock)

    def serve_slice(self, round_index: int, k: int, n: int) -> dict:
        """Slice k (from 1) of n of the current generation; slice 1 starts a new one."""
        if k == 1:
            bounds = slice_bounds(self.spec.steps - 1, n)
            self.sliced = SlicedGeneration(self.threaded, TokenClock(self.frames), bounds)
        ms, built = self.sliced.next_slice()
        if k == n:
            self.deterministic &= self.sliced.result() == self.tokens
            self.clocks.append(self.sliced.summary())
        return self.window(round_index, ms, built)

    def finish(self) -> dict:
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux reports KiB
        row = {
            **self.ready,
            "builds_measured": self.frames() - self.frames_before,
            "deterministic": self.deterministic,
            "tokens": self.tokens,
            "peak_rss_mb": round(rss_kib / 1024, 1),
            "peak_rss_bytes": rss_kib * 1024,
        }
        if self.clocks:
            row["prefill_ms"] = round(statistics.median(c["prefill_ms"] for c in self.clocks), 4)
            row["mean_ms_per_step"] = round(statistics.median(c["mean_ms"] for c in self.clocks), 4)
            row["cpu_ms_per_step"] = round(statistics.median(c["cpu_ms"] for c in self.clocks), 4)
        if self.on_finish is not None:
            self.on_finish(row)
        return row


def open_session(payload: dict, progress: Callable[[dict], None] = lambda e: None):
    """The probe's session or a system's, by the spec's `system`; the payload is a RunSpec's."""
    spec = rebuild(RunSpec, payload)
    applied(spec.knob)  # a --try side's config, for the whole process
    return (ProbeSession if spec.system == PROBE else DecodeSession)(spec, progress)


if __name__ == "__main__":
    serve_main(open_session)
