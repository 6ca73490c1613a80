"""The decode comparison: the engine against transformers, one fresh process per system.

What it is: `run_worker(spec)`, the worker body (a bandwidth probe, or one system: build it,
warm it up, time `repeat` greedy generations token by token); `sweep(...)`, the probe and then
each system in its own process; `derive(rows)`, which sets every row against the reference
tokens, the transformers rows and the memory floor; the floor arithmetic (`weight_bytes`,
`kv_read_bytes`, `floor_ms`) and the `check_*` functions the gates run.
What it is not: the CLI or the report, and not a unit test: its milliseconds are what this
machine measured in this run.
Invariant: every system runs the same checkpoint, the same seeded prompts and the same number
of greedy steps on the same thread count. The first token (the prefill) is timed on its own
and never enters `ms_per_step`. A system whose tokens differ from the reference's is a failed
row whatever its speed: it did not compute the same thing.
"""

from __future__ import annotations

import logging
import math
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

SYSTEMS = ("engine-eager", "engine-compiled", "engine-captured", "hf-eager", "hf-static-compiled")
ENGINE_SYSTEMS = ("engine-eager", "engine-compiled", "engine-captured")
HF_SYSTEMS = ("hf-eager", "hf-static-compiled")
PROBE = "bandwidth-probe"
# The reference whose tokens every row is compared with, in order of preference.
REFERENCES = ("engine-eager", "hf-eager")
BACKENDS = ("inductor", "aot_eager", "eager")
HF_ATTENTION = ("sdpa", "eager")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

PROBE_READS = 9
# A step reading fewer weight bytes than this is host-bound on a CPU (launches and Python).
HOST_BOUND_BYTES = 256 << 20


@dataclass(frozen=True)
class DecodeTargets:
    """The step-time ratios a comparison promises; None: not a target for this model.

    The engine eager is never slower than transformers eager. A host-bound model (a few MB of
    weights) must show what compiling buys: the compiled engine well under transformers' own
    best CPU configuration (static cache, compiled forward). A bandwidth-bound model (GBs per
    step) is held to the memory floor instead: no compiler makes a weight read faster.
    """

    eager_vs_hf_eager: float | None = 1.0
    compiled_vs_hf_compiled: float | None = None
    best_vs_floor: float | None = None


HOST_BOUND = DecodeTargets(compiled_vs_hf_compiled=0.7)
BANDWIDTH_BOUND = DecodeTargets(best_vs_floor=1.5)
TARGETS: dict[str, DecodeTargets] = {"tiny": HOST_BOUND, "llama-3.2-1b": BANDWIDTH_BOUND}


def targets_for(model: str, weight_bytes: int) -> DecodeTargets:
    """A preset's own targets; a checkpoint directory's by the weight bytes a step reads."""
    if model in TARGETS:
        return TARGETS[model]
    return HOST_BOUND if weight_bytes < HOST_BOUND_BYTES else BANDWIDTH_BOUND


class DecodeGateFailed(RuntimeError):
    """A decode comparison whose promise broke: tokens differ, or a target ratio is missed."""


# -- floor arithmetic (numbers in, numbers out) -------------------------------------------------


def weight_bytes(config, dtype_bytes: int) -> int:
    """Bytes of weights one decode step reads: every matrix once.

    A tied head reads the embedding matrix as the head; an untied one reads the head and only
    one embedding row per token, which is noise beside it.
    """
    params = config.num_params
    if not config.tie_word_embeddings:
        params -= config.vocab_size * config.hidden_size
    return params * dtype_bytes


def kv_read_bytes(config, dtype_bytes: int, rows: int, prompt_len: int, steps: int) -> int:
    """Mean bytes of K and V one decode step attends over, across the steps of the run.

    Decode step i (1..steps-1) of a row attends over prompt_len + i tokens.
    """
    decode_steps = steps - 1
    if decode_steps < 1:
        return 0
    mean_ctx = prompt_len + (decode_steps + 1) / 2
    per_token = 2 * config.num_layers * config.kv_size * dtype_bytes
    return int(rows * mean_ctx * per_token)


def floor_ms(step_bytes: int, bandwidth_gbs: float) -> float:
    """The time a step cannot beat on this machine: its bytes over the measured bandwidth."""
    return step_bytes / (bandwidth_gbs * 1e9) * 1e3


# -- timing -----------------------------------------------------------------------------------


class TokenClock:
    """Wall and thread-CPU time at the start of a generation and at every token on the host.

    For transformers it is the streamer `generate` calls: once with the prompt, then once per
    generated token after it has been picked and copied to the host.
    """

    def __init__(self) -> None:
        self.start = self.start_cpu = 0.0
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.puts = 0

    def begin(self) -> None:
        self.start, self.start_cpu = time.perf_counter(), time.thread_time()

    def token(self) -> None:
        self.wall.append(time.perf_counter())
        self.cpu.append(time.thread_time())

    # the transformers streamer protocol
    def put(self, value) -> None:
        self.puts += 1
        if self.puts > 1:  # the first put is the prompt
            self.token()

    def end(self) -> None:
        pass

    def summary(self) -> dict:
        """prefill ms (start to first token) and the decode phase (every later token)."""
        if len(self.wall) < 2:
            raise DecodeGateFailed(f"{len(self.wall)} tokens timed: a decode phase needs two")
        steps = [(b - a) * 1e3 for a, b in zip(self.wall, self.wall[1:])]
        n = len(steps)
        return {
            "prefill_ms": (self.wall[0] - self.start) * 1e3,
            "step_ms": steps,
            "median_ms": statistics.median(steps),
            "mean_ms": (self.wall[-1] - self.wall[0]) * 1e3 / n,
            "cpu_ms": (self.cpu[-1] - self.cpu[0]) * 1e3 / n,
        }


# -- systems ----------------------------------------------------------------------------------


def quiet_libraries() -> None:
    """Dynamo's recompile warnings and transformers' notices are not this command's output."""
    for name in ("torch._dynamo", "torch._inductor", "torch.fx", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)


def prompts_for(spec: dict, vocab: int) -> list[list[int]]:
    """Real text when the checkpoint ships a tokenizer, else seeded random ids."""
    from nanobench.explain import seeded_prompts
    from nanobench.samples import text_prompts, tokenizer_for

    tokenizer = tokenizer_for(spec["model"])
    if tokenizer is not None:
        return text_prompts(tokenizer, spec["rows"], spec["prompt_len"])
    return seeded_prompts(spec["rows"], spec["prompt_len"], vocab, spec.get("seed", 0))


def compiler_for(backend: str) -> Callable:
    def compile_with(fn, mode):
        import torch

        return torch.compile(fn, dynamic=(mode == "dynamic"), backend=backend)

    return compile_with


def engine_system(spec: dict) -> tuple[Callable[[], tuple[TokenClock, list]], dict]:
    """A generation function over the engine in the system's mode, and the facts of its build."""
    from engine.engine import Engine
    from nanobench.finite import FiniteWatch

    system = spec["system"]
    options: dict = {}
    if system == "engine-compiled":
        options = dict(compile_decode="dynamic")
        # Inductor is the engine's own compiler: measure exactly what the engine runs.
        if spec["backend"] != "inductor":
            options["compiler"] = compiler_for(spec["backend"])
    elif system == "engine-captured":
        options = dict(
            capture_decode=True, bucket_decode=True, width_multiple=spec["width_multiple"]
        )
        if spec["device"] == "cpu":
            from engine.recorders import eager_recorder

            # No device to record on: capture semantics (fixed buffers, no-argument replays).
            options["recorder"] = eager_recorder
    engine = Engine.from_checkpoint(
        spec["model"],
        max_batch_size=spec["rows"],
        max_model_len=spec["max_model_len"],
        dtype=spec["dtype"],
        device=spec["device"],
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

    def generate() -> tuple[TokenClock, list]:
        watch = FiniteWatch()
        clock = TokenClock()
        clock.begin()
        logits = engine.prefill(prompts)  # (B, V)
        tokens = logits.argmax(-1).tolist()
        clock.token()
        watch.see(logits)
        out = [[t] for t in tokens]
        for _ in range(spec["steps"] - 1):
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
        return clock, out

    def finish(row: dict) -> None:
        if engine.decode_graphs is not None:
            row["recorded_mid_run"] = engine.decode_graphs.recorded_mid_run

    info["finish"] = finish
    return generate, info


def hf_system(spec: dict) -> tuple[Callable[[], tuple[TokenClock, list]], dict]:
    """transformers' `generate` over the same directory: default cache, or static + compiled."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, LogitsProcessorList

    from engine.weights import DTYPES
    from nanobench.finite import FiniteWatch

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    model = (
        AutoModelForCausalLM.from_pretrained(
            spec["model"], dtype=DTYPES[spec["dtype"]], attn_implementation=spec["hf_attn"]
        )
        .to(spec["device"])
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
    if spec["system"] == "hf-static-compiled":
        gen.cache_implementation = "static"
        # mode="reduce-overhead" means CUDA graphs; on CPU the default mode is the fair one.
        model.forward = torch.compile(model.forward, fullgraph=True, backend=spec["backend"])
    vocab = model.config.vocab_size
    ids = torch.tensor(prompts_for(spec, vocab), device=spec["device"])  # (B, P)
    mask = torch.ones_like(ids)

    def watch_scores(_input_ids, scores):  # a LogitsProcessor: sees every step's logits
        watch.see(scores)
        return scores

    watch = FiniteWatch()

    def generate() -> tuple[TokenClock, list]:
        clock = TokenClock()
        clock.begin()
        out = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=spec["steps"],
            streamer=clock,
            logits_processor=LogitsProcessorList([watch_scores]),
        )
        watch.check()
        tokens = out[:, ids.shape[1] :].tolist()
        if any(len(t) != spec["steps"] for t in tokens):
            raise DecodeGateFailed(
                f"transformers made {len(tokens[0])} tokens per row, expected {spec['steps']}"
            )
        return clock, tokens

    return generate, info


def probe_bandwidth(spec: dict) -> dict:
    """Read a weight-sized tensor on the device: GB/s of the fastest of several full sums.

    The fastest, not the median: the floor is what the machine can do, and on a shared machine
    a slow read measures the neighbours (a median floor once came out above a measured step).
    """
    import torch

    nbytes = max(int(spec["weight_bytes"]), 1 << 20)
    device = spec["device"]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    # fp32 whatever the model dtype: a plain vectorised read, never a conversion-bound one.
    data = torch.rand(math.ceil(nbytes / 4), device=device)
    seconds = []
    for i in range(PROBE_READS + 2):
        sync()
        t0 = time.perf_counter()
        data.sum()
        sync()
        if i >= 2:  # the first reads fault the pages in and warm the caches
            seconds.append(time.perf_counter() - t0)
    nbytes = data.numel() * 4
    return {
        "system": PROBE,
        "probe_bytes": nbytes,
        "bandwidth_gbs": round(nbytes / min(seconds) / 1e9, 3),
        "bandwidth_median_gbs": round(nbytes / statistics.median(seconds) / 1e9, 3),
        "probe_ms": round(min(seconds) * 1e3, 4),
    }


def run_worker(spec: dict, progress: Callable[[dict], None] = lambda e: None) -> dict:
    """One system (or the probe) in this process: build, warm up, time `repeat` generations."""
    import resource

    import torch

    quiet_libraries()
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    if spec["system"] == PROBE:
        row = probe_bandwidth(spec)
        row["threads"] = torch.get_num_threads()
        return row

    import torch._dynamo
    from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    system = spec["system"]
    build = engine_system if system in ENGINE_SYSTEMS else hf_system
    started = time.perf_counter()
    generate, info = build(spec)
    build_s = time.perf_counter() - started
    finish = info.pop("finish", None)

    progress({"phase": "warm-up", "i": 0, "of": spec["repeat"]})
    started = time.perf_counter()
    _, warm_tokens = generate()
    warmup_s = time.perf_counter() - started
    compiled = [m for m in get_compilation_metrics() if m.fail_type is None]
    frames_before = counters["frames"]["ok"]

    runs = []
    for i in range(spec["repeat"]):
        progress({"phase": "repeat", "i": i + 1, "of": spec["repeat"]})
        clock, tokens = generate()
        runs.append((clock.summary(), tokens))
    builds_measured = counters["frames"]["ok"] - frames_before

    first = runs[0][1]
    deterministic = all(t == first for _, t in runs) and warm_tokens == first
    medians = [s["median_ms"] for s, _ in runs]
    ms = statistics.median(medians)
    row = {
        "system": system,
        "status": "ok",
        "ms_per_step": round(ms, 4),
        "tokens_per_s": round(spec["rows"] * 1e3 / ms, 2),
        "prefill_ms": round(statistics.median(s["prefill_ms"] for s, _ in runs), 4),
        "mean_ms_per_step": round(statistics.median(s["mean_ms"] for s, _ in runs), 4),
        "cpu_ms_per_step": round(statistics.median(s["cpu_ms"] for s, _ in runs), 4),
        "ms_per_step_repeats": [round(m, 4) for m in medians],
        "compile_s": (
            round(sum(m.entire_frame_compile_time_s or 0.0 for m in compiled), 4)
            if system in ("engine-compiled", "hf-static-compiled")
            else None
        ),
        "frames_compiled": len(compiled),
        "builds_measured": builds_measured,
        "build_s": round(build_s, 4),
        "warmup_s": round(warmup_s, 4),
        "deterministic": deterministic,
        "tokens": first,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        **info,
    }
    if finish is not None:
        finish(row)
    return row


# -- the sweep --------------------------------------------------------------------------------


def worker_env(threads: int) -> tuple[dict[str, str], str]:
    """A cold Inductor cache per system (returned for cleanup), offline transformers."""
    from nanobench.inductor_cache import fresh_dir

    cache = fresh_dir("decode")
    env = {
        "TORCHINDUCTOR_CACHE_DIR": cache,
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # A checkpoint directory never needs the network; a typo must not become a download.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env, cache


def run_one(
    spec: dict,
    system: str,
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda s, e: None,
) -> dict:
    from nanobench.fresh import run_fresh

    env, cache = worker_env(spec.get("threads") or 0)
    try:
        row = run_fresh(
            "nanobench.decode_worker",
            {**spec, "system": system},
            timeout=timeout,
            env=env,
            on_progress=lambda e: on_progress(system, e),
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    row.setdefault("system", system)
    return row


def sweep(
    spec: dict,
    systems: list[str],
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda s, e: None,
    on_row: Callable[[list[dict], dict | None], None] = lambda rows, probe: None,
) -> tuple[list[dict], dict]:
    """The probe, then each system in its own process; on_row sees the rows derived so far."""
    probe = run_one(spec, PROBE, timeout=timeout, on_progress=on_progress)
    rows: list[dict] = []
    for system in systems:
        rows.append(run_one(spec, system, timeout=timeout, on_progress=on_progress))
        on_row(derive(rows, spec, probe), probe)
    return derive(rows, spec, probe), probe


# -- derived columns ----------------------------------------------------------------------------


def first_difference(tokens: list[list[int]], ref: list[list[int]]) -> str | None:
    if len(tokens) != len(ref):
        return f"{len(tokens)} rows against {len(ref)}"
    for r, (a, b) in enumerate(zip(tokens, ref)):
        for s, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"row {r} step {s}: {x} vs {y}"
        if len(a) != len(b):
            return f"row {r}: {len(a)} tokens against {len(b)}"
    return None


def reference_row(rows: list[dict]) -> dict | None:
    for name in REFERENCES:
        for r in rows:
            if r.get("system") == name and r.get("status") == "ok" and r.get("tokens"):
                return r
    return None


def derive(rows: list[dict], spec: dict, probe: dict | None) -> list[dict]:
    """tokens_match against the reference, ratios to the transformers rows, the floor."""
    ref = reference_row(rows)
    by_name = {r.get("system"): r for r in rows if r.get("status") == "ok" and r.get("ms_per_step")}
    bandwidth = (probe or {}).get("bandwidth_gbs")
    bandwidth_median = (probe or {}).get("bandwidth_median_gbs")
    step_bytes = spec.get("weight_bytes", 0) + spec.get("kv_bytes", 0)
    floor = floor_ms(step_bytes, bandwidth) if bandwidth else None
    for r in rows:
        r["tokens_ref"] = ref["system"] if ref else None
        r["tokens_match"] = None
        r["first_mismatch"] = None
        if r.get("tokens") and ref is not None:
            diff = first_difference(r["tokens"], ref["tokens"])
            if diff is None and r.get("deterministic") is False:
                diff = "repeats of this system disagree with each other"
            r["tokens_match"] = diff is None
            r["first_mismatch"] = diff
        if r.get("tokens"):
            r["tokens_digest"] = digest(r["tokens"])
        ms = r.get("ms_per_step") if r.get("status") == "ok" else None
        for col, name in (
            ("ratio_vs_hf_eager", "hf-eager"),
            ("ratio_vs_hf_compiled", "hf-static-compiled"),
        ):
            other = by_name.get(name)
            r[col] = round(ms / other["ms_per_step"], 4) if ms and other else None
        r["bandwidth_gbs"] = bandwidth
        r["bandwidth_median_gbs"] = bandwidth_median
        r["weight_bytes"] = spec.get("weight_bytes")
        r["kv_bytes"] = spec.get("kv_bytes")
        r["step_bytes"] = step_bytes
        r["floor_ms"] = round(floor, 4) if floor else None
        r["ratio_vs_floor"] = round(ms / floor, 3) if ms and floor else None
        for key in ("rows", "prompt_len", "steps", "repeat", "dtype", "device", "model"):
            r.setdefault(key, spec.get(key))
    return rows


def digest(tokens: list[list[int]]) -> str:
    import hashlib

    return hashlib.sha256(repr(tokens).encode()).hexdigest()[:12]


# -- gates --------------------------------------------------------------------------------------


def check_tokens_match(system: str, row: dict) -> None:
    if row.get("tokens_match") is None:
        raise DecodeGateFailed(
            f"{system}: no reference tokens to compare with (run engine-eager or hf-eager too)"
        )
    if not row["tokens_match"]:
        raise DecodeGateFailed(
            f"{system}: greedy tokens differ from {row.get('tokens_ref')} at "
            f"{row.get('first_mismatch')}"
        )


def check_ratio_at_most(what: str, ratio: float | None, target: float) -> None:
    if ratio is None:
        raise DecodeGateFailed(f"{what}: not measured (both systems must run in the sweep)")
    if ratio > target:
        raise DecodeGateFailed(f"{what} is {ratio:.2f}x, the target is at most {target:.2f}x")


def best_engine_row(rows: list[dict]) -> dict | None:
    """The fastest engine row that ran and made the reference tokens, or None."""
    done = [
        r
        for r in rows
        if r.get("system") in ENGINE_SYSTEMS
        and r.get("status") == "ok"
        and r.get("tokens_match") is not False
        and r.get("ms_per_step")
    ]
    return min(done, key=lambda r: r["ms_per_step"]) if done else None


def check_nothing_built(system: str, builds: int) -> None:
    if builds:
        raise DecodeGateFailed(
            f"{system}: {builds} frames compiled during the measured repeats: the warm-up did "
            "not reach every shape, so these step times include compiling"
        )


def spec_for(**kw) -> dict:
    base = dict(
        rows=4,
        prompt_len=16,
        steps=128,
        repeat=3,
        dtype="float32",
        device="cpu",
        threads=0,
        seed=0,
        backend="inductor",
        hf_attn="sdpa",
        width_multiple=128,
        max_model_len=0,
    )
    base.update(kw)
    if not base.get("max_model_len"):
        base["max_model_len"] = base["prompt_len"] + base["steps"]
    base["model"] = str(base["model"])
    return base
