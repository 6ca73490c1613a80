"""The engine: admit prompts, prefill them eagerly, decode through one call site, generate.

What it is: `Engine`, the public API the commands and outside checks rely on:
`Engine.from_checkpoint(path_or_preset, ...)`, `generate(prompts, max_new_tokens, ...)`, and the
step-level `prefill` / `decode_step` / `decode_forward` a benchmark drives.
What it is not: a server or a scheduler. A batch is admitted whole into rows 0..n-1 and
decoded together, which is what keeps every read a window on the slot table.
Invariant: every decode forward, eager, compiled or captured, goes through `decode_forward`;
the prefill stays eager on purpose (its shape moves on every admission).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.attention import PlannedDecode, Prefill, UnplannedDecode, make_read
from engine.buckets import DecodeBuckets
from engine.cache import BatchedPagedKVCache
from engine.captured import CapturedDecode, CaptureStats
from engine.compiled import CompiledDecode
from engine.config import EngineConfig, ModelConfig
from engine.inputs import StepInputs
from engine.model import Llama
from engine.packed import PACK_MIN_BYTES, pack_model, resolve_layout
from engine.plan import DecodePlan, PlanUnsound, check_plan_current, plan_decode
from engine.sampler import SamplingParams, sample
from engine.sources import load_model, resolve_model
from engine.weights import DTYPES


class EngineLimitError(ValueError):
    """A request the engine's limits cannot hold (prompt too long, too many rows, ...)."""


def resolve_attention(attention: str, device: str) -> str:
    if attention == "auto":
        return "triton" if torch.device(device).type == "cuda" else "reference"
    return attention


class Engine:
    def __init__(
        self,
        model: Llama,
        config: EngineConfig,
        *,
        compiler: Callable | None = None,
        build_counter: Callable[[], int] | None = None,
        recorder: Callable | None = None,
    ) -> None:
        self.model = model
        self.model_config: ModelConfig = model.config
        self.config = config
        self.linear_layout = resolve_layout(config)
        if self.linear_layout == "packed" and not model.packed:
            # An explicit `packed` packs every matrix; auto only those worth it (PACK_MIN_BYTES).
            bar = 0 if config.linear_layout == "packed" else PACK_MIN_BYTES
            if pack_model(model, min_bytes=bar) == 0:
                self.linear_layout = "dense"  # every matrix is under the bar
        self.attention = resolve_attention(config.attention, config.device)
        self.cache = BatchedPagedKVCache(self.model_config, config, DTYPES[config.dtype])
        self.inputs = (
            StepInputs(config.max_batch_size, config.device) if config.persist_inputs else None
        )
        self.width_free = self.attention == "triton"
        self.buckets = (
            DecodeBuckets(
                config.max_batch_size,
                config.max_model_len,
                config.width_multiple,
                width_free=self.width_free,
                row_sizes=config.capture_sizes,
            )
            if config.bucket_decode
            else None
        )
        self._read = make_read(self.attention)
        forward = (
            self.planned_forward if config.decode_path == "planned" else self.unplanned_forward
        )
        self.compiled = CompiledDecode(
            forward, config.compile_decode, compiler=compiler, build_counter=build_counter
        )
        # In front of CompiledDecode, not instead of it: a recording runs the compiled forward.
        self.last_plan: DecodePlan | None = None
        self.decode_graphs = (
            CapturedDecode(
                self.compiled,
                self.cache,
                self.inputs,
                self.buckets,
                recorder=recorder,
                fallback=self.unplanned_forward,
                output_buffer=self._capture_output_buffer(),
            )
            if config.capture_decode
            else None
        )

    def _capture_output_buffer(self) -> torch.Tensor | None:
        """The one fp32 logits buffer every recorded graph writes; None when each keeps its own.

        Allocated here, before any recording, so it lives outside every graph pool.
        """
        if self.config.capture_output != "shared":
            return None
        rows = max(self.buckets.rows)
        vocab = self.model_config.vocab_size
        return torch.empty(rows, vocab, dtype=torch.float32, device=self.config.device)  # (B, V)

    @classmethod
    def build(
        cls,
        model_config: ModelConfig,
        tensors: dict[str, torch.Tensor] | None,
        config: EngineConfig,
        **seams,
    ) -> Engine:
        """An engine over the given weights (random, seeded, when tensors is None)."""
        dtype = DTYPES[config.dtype]
        with torch.device(config.device):
            torch.manual_seed(0)
            model = Llama(model_config, config.max_model_len)
        if tensors is not None:
            model.load_state_dict(tensors, strict=False, assign=False)
        model = model.to(dtype=dtype).eval().requires_grad_(False)
        model.rope_cos = model.rope_cos.float()
        model.rope_sin = model.rope_sin.float()
        return cls(model, config, **seams)

    @classmethod
    def from_checkpoint(
        cls,
        path_or_preset: str,
        *,
        max_batch_size: int = 8,
        max_model_len: int = 2048,
        block_size: int = 16,
        dtype: str = "float32",
        device: str = "cpu",
        attention: str = "reference",
        **options,
    ) -> Engine:
        seams = {
            k: options.pop(k) for k in ("compiler", "build_counter", "recorder") if k in options
        }
        config = EngineConfig(
            max_batch_size=max_batch_size,
            max_model_len=max_model_len,
            block_size=block_size,
            dtype=dtype,
            device=device,
            attention=attention,
            **options,
        )
        model_config, tensors = load_model(resolve_model(str(path_or_preset)), DTYPES[dtype])
        return cls.build(model_config, tensors, config, **seams)

    # -- the traced region -------------------------------------------------------------------

    def planned_forward(self, input_ids: torch.Tensor, plan) -> torch.Tensor:
        attn = PlannedDecode(plan, self.cache.k_pools, self.cache.v_pools, self._read)
        return self.model(input_ids, plan.positions, attn)  # (B, V)

    def unplanned_forward(self, input_ids: torch.Tensor, view: UnplannedDecode) -> torch.Tensor:
        tables = [view.cache.tables[r] for r in view.rows]
        positions = torch.tensor([[t.num_tokens - 1] for t in tables], device=input_ids.device)
        return self.model(input_ids, positions, view)  # (B, V)

    def decode_forward(self, input_ids: torch.Tensor, view) -> torch.Tensor:
        """The one call site for eager, compiled and captured decode forwards."""
        if self.decode_graphs is not None:
            return self.decode_graphs(input_ids, view)
        return self.compiled(input_ids, view)

    @torch.no_grad()
    def capture(self, buckets=None) -> CaptureStats:
        """Record the whole capture list before any request, largest shape first.

        Each shape is driven by a synthetic all-padding batch that writes only the sink slot,
        so the first real decode afterwards is a replay. `buckets` defaults to the engine's.
        """
        if self.decode_graphs is None:
            raise EngineLimitError("capture() needs capture_decode=True")
        if self.active_rows:
            raise EngineLimitError("capture before admitting a batch: the engine holds rows")
        return self.decode_graphs.capture_all((buckets or self.buckets).shapes)

    # -- steps -------------------------------------------------------------------------------

    @property
    def active_rows(self) -> tuple[int, ...]:
        return tuple(self.cache.active_rows())

    def check_prompts(self, prompts: list[list[int]], max_new_tokens: int = 1) -> None:
        cfg = self.config
        if not prompts:
            raise EngineLimitError("prompts: expected at least one prompt")
        if len(prompts) > cfg.max_batch_size:
            raise EngineLimitError(
                f"{len(prompts)} prompts at once, but max_batch_size is {cfg.max_batch_size}"
            )
        for i, p in enumerate(prompts):
            if not p:
                raise EngineLimitError(f"prompt {i} is empty: a decode needs at least one token")
            if len(p) + max_new_tokens > cfg.max_model_len:
                raise EngineLimitError(
                    f"prompt {i}: {len(p)} tokens + {max_new_tokens} new exceed "
                    f"max_model_len {cfg.max_model_len}"
                )
            bad = [t for t in p if not 0 <= t < self.model_config.vocab_size]
            if bad:
                raise EngineLimitError(
                    f"prompt {i}: token {bad[0]} outside the vocabulary (0..{self.model_config.vocab_size - 1})"
                )
        need = sum(-(-(len(p) + max_new_tokens) // cfg.block_size) for p in prompts)
        if need > self.cache.allocator.num_free:
            raise EngineLimitError(
                f"out of KV blocks: the batch needs {need}, {self.cache.allocator.num_free} are free"
            )

    @torch.no_grad()
    def prefill(self, prompts: list[list[int]]) -> torch.Tensor:
        """Admit prompts into rows 0..n-1 and run them eagerly; returns last-token logits (B, V)."""
        if self.active_rows:
            raise EngineLimitError("the engine already holds a batch; release it first")
        self.check_prompts(prompts)
        device = self.cache.device
        lens = [len(p) for p in prompts]
        width = max(lens)
        slots: list[int] = []
        for row, p in enumerate(prompts):
            slots += self.cache.add(row, len(p))
        ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts], device=device)  # (B, W)
        positions = torch.arange(width, device=device).expand(len(prompts), width)  # (B, W)
        lens_t = torch.tensor(lens, device=device)  # (B,)
        mask = positions < lens_t[:, None]  # (B, W)
        attn = Prefill(
            self.cache.k_pools,
            self.cache.v_pools,
            torch.tensor(slots, dtype=torch.int64, device=device),
            mask,
            self.model_config.group_size,
        )
        return self.model(ids, positions, attn, last_index=lens_t - 1)

    @torch.no_grad()
    def decode_step(self, tokens: list[int]) -> torch.Tensor:
        """Feed one token per active row; returns the real rows' logits (B, V), fp32.

        On a captured engine the result is a view of the replay's output buffer (with
        capture_output="shared", one buffer every graph writes): it lives one step, so
        consume it (sample, or clone) before the next decode_step.
        """
        rows = self.active_rows
        if len(tokens) != len(rows):
            raise PlanUnsound(f"{len(tokens)} tokens for {len(rows)} active rows")
        if self.config.decode_path == "unplanned":
            self._grow(rows)
            input_ids = torch.tensor(tokens, device=self.cache.device).view(-1, 1)  # (B, 1)
            return self.decode_forward(input_ids, UnplannedDecode(self.cache, rows))
        input_ids, plan = self.plan_step(tokens)
        logits = self.decode_forward(input_ids, plan)  # (B, V) incl. padded rows
        return logits[: plan.batch_size]  # padded rows dropped outside the region

    def plan_step(self, tokens: list[int]) -> tuple[torch.Tensor, DecodePlan]:
        """Plan the next step and write its token ids: the inputs decode_forward takes."""
        plan = plan_decode(
            self.cache, list(self.active_rows), self.buckets, self.inputs, self.width_free
        )
        ids = list(tokens) + [0] * plan.pad_rows
        if self.inputs is not None:
            self.inputs.write_ids(ids)
            input_ids = self.inputs.input_ids[: plan.graph_rows]  # (B, 1)
        else:
            input_ids = torch.tensor(ids, device=self.cache.device).view(-1, 1)  # (B, 1)
        check_plan_current(plan, self.cache)
        self.last_plan = plan
        return input_ids, plan

    def _grow(self, rows) -> None:
        tables = [self.cache.tables[r] for r in rows]
        positions = [t.num_tokens for t in tables]
        slots = [t.append_tokens(1, self.cache.allocator)[0] for t in tables]
        self.cache.slots.write_step(list(rows), positions, slots)

    def release_all(self) -> None:
        self.cache.release_all()

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        sampling: SamplingParams | None = None,
        stop_token_ids: list[int] | None = None,
    ) -> list[list[int]]:
        """New tokens per prompt: exactly max_new_tokens unless a stop id ends a row early.

        A stopped row keeps decoding with the batch (rows stay a prefix) but adds no tokens.
        """
        if max_new_tokens < 1:
            raise EngineLimitError(f"max_new_tokens: expected >= 1, got {max_new_tokens}")
        self.check_prompts(prompts, max_new_tokens)
        stops = set(stop_token_ids or ())
        generator = None
        if sampling is not None:
            generator = torch.Generator(device=self.cache.device).manual_seed(sampling.seed)
        try:
            tokens = sample(self.prefill(prompts), sampling, generator)
            out = [[t] for t in tokens]
            done = [t in stops for t in tokens]
            for _ in range(max_new_tokens - 1):
                if all(done):
                    break
                tokens = sample(self.decode_step(tokens), sampling, generator)
                for i, t in enumerate(tokens):
                    if not done[i]:
                        out[i].append(t)
                        done[i] = t in stops
            return out
        finally:
            self.release_all()
