"""The capture memory of the user's own decode step (`--target`), priced per capture size.

What it is: `size_memory`, which calls the target's factory at `rows` = one capture size on the
`meta` device (inside a `torch.device("meta")` context, with `device="meta"` passed to the
factory, so a factory that builds a module and calls `.to(dtype)` runs as written; tensors carry
shapes and no storage, so a 70B step prices on a laptop) under the live-bytes tracker
(`nanobench.memory.live_bytes.LiveBytes`), then runs one decode step under a fresh tracker, and
reports `state_bytes` (what the factory left allocated: weights, KV caches, buffers, anything a
prefill it ran left behind), `workspace_bytes` (the step's peak of transient bytes: what a
graph's pool must hold), `outputs_bytes` (what the step returns: what a recorded graph keeps)
and the allocation sequence itself (for the allocator model in `nanobench.memory.reserved`).
`list_memory` does that for every size of a capture list; `TargetListMemory` combines them as
a capture does: a shared pool is the largest workspace, private pools their sum, outputs summed
per graph unless the target declares `shared_output = True` (it writes one buffer).
On the meta device `scaled_dot_product_attention` would take its math path (a materialised
score matrix) where a real device takes a fused kernel; `_fused_attention_mode` routes it to the
fused kernel the priced device (`as_device`, cpu or cuda) picks, whose meta kernel allocates
what the real one does (on CPU the tests hold this exact against real tensors).
What it is not: a real capture (`nanobench.gpu.capture` records on CUDA) or a timing.
Invariant: nothing that existed before the step is workspace: the factory's allocations are
state, the step inputs are inputs, and a view or an in-place write allocates nothing. A factory
or step that cannot run on the meta device is one line naming the call and what to change; an
index past the step's own cache (an `IndexError`) names the prompt length the target was built
with and the caller's option that set it (`length_option`).
"""

from __future__ import annotations

import gc
import traceback
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from nanobench.harness.errors import BadInput
from nanobench.harness.step.forward_raised import user_frame
from nanobench.harness.step.targets import TargetError, _one_line, inputs_at, make_target
from nanobench.memory.live_bytes import LiveBytes
from nanobench.memory.reserved import reserved_bytes, shared_reserved_bytes


@dataclass(frozen=True)
class SizeMemory:
    """One capture size of a target: what it holds, what its step needs, what it returns."""

    rows: int
    state_bytes: int  # live after the factory returned: weights, caches, buffers
    workspace_bytes: int  # the step's peak of transient bytes, its outputs left out
    outputs_bytes: int  # storages the step created and returned
    peak_bytes: int  # the step's peak with its outputs counted
    allocations: int  # new storages the step created
    events: tuple[tuple[int, int], ...]  # (storage serial, +bytes / -bytes) in step order
    kept: frozenset[int]  # serials of the returned storages


@dataclass(frozen=True)
class TargetListMemory:
    """A capture list of a target: one SizeMemory per size, ascending, combined as captured."""

    sizes: tuple[SizeMemory, ...]
    shared_output: bool  # the target declares one output buffer every graph writes

    @property
    def state_bytes(self) -> int:
        """The state at the largest size: one set of weights and caches serves every graph."""
        return self.sizes[-1].state_bytes

    @property
    def shared_pool_bytes(self) -> int:
        return max(s.workspace_bytes for s in self.sizes)

    @property
    def private_pools_bytes(self) -> int:
        return sum(s.workspace_bytes for s in self.sizes)

    @property
    def outputs_bytes(self) -> int:
        """Every graph keeps its own outputs, unless they are one declared shared buffer."""
        outputs = [s.outputs_bytes for s in self.sizes]
        return max(outputs) if self.shared_output else sum(outputs)

    @property
    def shared_reserved_bytes(self) -> int:
        """Segments one pool reserves when every graph records into it, the largest first (as
        vLLM captures), each graph's outputs staying allocated while the next records."""
        return shared_reserved_bytes([s.events for s in reversed(self.sizes)])

    @property
    def private_reserved_bytes(self) -> int:
        """Segments a pool per graph reserves, summed."""
        return sum(reserved_bytes(s.events) for s in self.sizes)

    @property
    def total_bytes(self) -> int:
        """state + shared pool + outputs: what the capture list needs beside nothing else."""
        return self.state_bytes + self.shared_pool_bytes + self.outputs_bytes


def size_memory(
    spec: str,
    *,
    rows: int,
    prompt_len: int,
    steps: int,
    dtype: str,
    step: int = 0,
    model: str = "",
    device: str = "meta",
    as_device: str = "cpu",
    length_option: str = "",
) -> tuple[SizeMemory, bool]:
    """(the target at `rows` priced on `device`, whether it declares a shared output).

    `device="meta"` prices without memory, attention as `as_device`'s fused kernel;
    `device="cpu"` runs the same tracker over real tensors (what the tests hold meta against).
    `length_option` is the caller's option that set `prompt_len` ("--max-model-len 8192"), named
    when the target indexes past its own cache.
    """
    protocol = {"rows": rows, "prompt_len": prompt_len, "steps": steps, "dtype": dtype}
    built = _Built(prompt_len, steps, length_option)
    state = LiveBytes()
    with torch.device(device), _named(spec, "the factory", device, built):
        with state:
            target = make_target(spec, model=model, device=device, **protocol)
            made = target.forward
            gc.collect()  # a cycle the factory dropped dies here, inside the count
    _check_on(spec, made, device)
    with torch.device(device), _named(spec, f"step_inputs({step})", device, built):
        args, kwargs = inputs_at(target, step)
    tracker = LiveBytes()
    with torch.device(device), _named(spec, "the step (forward)", device, built):
        with torch.no_grad(), _fused_attention_mode()(as_device), tracker:
            out = target.forward(*args, **kwargs)
    fp = tracker.footprint(out)
    found = SizeMemory(
        rows=rows,
        state_bytes=sum(delta for _, delta in state.events),
        workspace_bytes=fp.workspace_bytes,
        outputs_bytes=fp.output_bytes,
        peak_bytes=fp.peak_bytes,
        allocations=fp.allocations,
        events=tuple(tracker.events),
        kept=frozenset(tracker.serials(out)),
    )
    return found, bool(getattr(target, "shared_output", False))


def list_memory(spec: str, sizes: tuple[int, ...], **protocol) -> TargetListMemory:
    """size_memory at each capture size (ascending), one target alive at a time."""
    priced, shared = [], False
    for rows in sorted(sizes):
        found, shared = size_memory(spec, rows=rows, **protocol)
        priced.append(found)
        gc.collect()
    return TargetListMemory(tuple(priced), shared)


def largest_fitting(memory: TargetListMemory, usable_bytes: int) -> tuple[int, ...]:
    """The longest prefix of the list (ascending sizes) whose state + pool + outputs fits."""
    best: tuple[int, ...] = ()
    for n in range(1, len(memory.sizes) + 1):
        prefix = TargetListMemory(memory.sizes[:n], memory.shared_output)
        if prefix.total_bytes <= usable_bytes:
            best = tuple(s.rows for s in prefix.sizes)
    return best


def _fused_attention_mode():
    """The TorchFunctionMode class, built on first use so importing this module imports no torch."""

    class FusedAttention(TorchFunctionMode):
        def __init__(self, as_device: str) -> None:
            super().__init__()
            self.as_device = as_device

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is not F.scaled_dot_product_attention or args[0].device.type != "meta":
                return func(*args, **kwargs)
            return _fused(self.as_device, torch, *args, **kwargs)

    return FusedAttention


def _fused(as_device, torch, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
           scale=None, enable_gqa=False):  # fmt: skip
    """What the real device runs for sdpa, on meta tensors: q (B, H, S, D) -> (B, H, S, D)."""
    if enable_gqa or q.dim() != 4:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # As sdpa converts a boolean mask before its kernel: where(mask, 0, -inf), the two
        # scalars freed before the kernel allocates (held to its peak, they would be priced).
        attn_mask = torch.where(
            attn_mask,
            torch.scalar_tensor(0.0, dtype=q.dtype),
            torch.scalar_tensor(-float("inf"), dtype=q.dtype),
        )  # mask's shape, q's dtype
    aten = torch.ops.aten
    if as_device == "cpu":
        return aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
        )[0]
    if attn_mask is None:
        return aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, scale=scale)[
            0
        ]
    mask = attn_mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])  # (B, H, S, L)
    return aten._scaled_dot_product_efficient_attention(
        q, k, v, mask, False, dropout_p, is_causal, scale=scale
    )[0]


def _check_on(spec: str, forward, device: str) -> None:
    """A factory that ignores `device` would allocate for real: refuse it before the step."""
    if device != "meta" or not isinstance(forward, torch.nn.Module):
        return
    for name, t in [*forward.named_parameters(), *forward.named_buffers()]:
        if t.device.type != "meta":
            raise BadInput(
                f"--target {spec!r}: the factory put {name} on {t.device}, not on the device it "
                "was given; build every tensor on `device` (pricing passes device='meta')"
            )


@dataclass(frozen=True)
class _Built:
    """The length protocol a target was built with, and the caller's option that set it."""

    prompt_len: int
    steps: int
    option: str  # "--max-model-len 8192", or "" when the caller has none to name

    def remedy(self) -> str:
        """An index past the cache: the target's cache is shorter than the context priced."""
        via = f" (from {self.option})" if self.option else ""
        fix = f"give a smaller {self.option.split()[0]}" if self.option else "build it shorter"
        return (
            f"the target was built with prompt_len {self.prompt_len} and steps {self.steps}"
            f"{via}; its cache holds fewer positions: {fix}, or size its cache from "
            "prompt_len + steps"
        )


class _named:
    """A failure inside becomes one BadInput line: which call, where, and what to change."""

    def __init__(self, spec: str, phase: str, device: str, built: _Built) -> None:
        self.spec, self.phase, self.device, self.built = spec, phase, device, built

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, BadInput) or not isinstance(exc, Exception):
            return False
        if isinstance(exc, TargetError) and exc.__context__ is None:
            raise BadInput(str(exc)) from None  # a protocol mistake, not the meta device's
        # make_target and inputs_at re-raise one line `from None`; the original is the context.
        cause = exc.__context__ if exc.__suppress_context__ and exc.__context__ else exc
        # An index past the target's own cache is the length asked for, not the device.
        why = (
            "failed" if isinstance(cause, IndexError) else f"cannot run on the {self.device} device"
        )
        raise BadInput(
            f"--target {self.spec!r}: {self.phase} {why}: "
            f"{_one_line(cause)}{_where(cause)}; {_remedy(cause, self.built)}"
        ) from None


def _where(exc: BaseException) -> str:
    """' at file:line in func' of the innermost frame in the user's code, or ''."""
    frame = user_frame(traceback.extract_tb(exc.__traceback__))
    return f" at {frame.filename}:{frame.lineno} in {frame.name}" if frame else ""


def _remedy(exc: BaseException, built: _Built) -> str:
    text = str(exc).lower()
    if isinstance(exc, IndexError):
        return built.remedy()
    if isinstance(exc, OSError):
        return (
            "it opens a file: build the step from its shapes (priced bytes need no weights) "
            "or open the file outside the factory"
        )
    if any(word in text for word in ("item", "tolist", "data-dependent", "cannot be called")):
        return (
            "it reads a tensor's value on the host (.item(), .tolist(), int(), print, a branch "
            "on a value): keep values on the device, or derive them from the protocol's ints"
        )
    if "meta" in text:
        return (
            "it refuses the meta device: build the model from its config, not from weights "
            "(transformers: from_config, not from_pretrained); pricing needs shapes only"
        )
    return "make it run on device='meta' (tensors with shapes and no values)"
