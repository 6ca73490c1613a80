"""What a recorded decode graph holds, traced from the engine's own forward under fake tensors.

What it is: `DecodeMemory`, which builds the engine (model, KV cache of one block, slot table,
step inputs) from a `ModelConfig` alone under `FakeTensorMode`, so nothing is allocated and no
weight exists, drives its real decode forward on the synthetic all-padding batch a capture
records (`padding_plan`), and counts live tensor bytes with `nanobench.memory.live_bytes`. Per shape
it reports the workspace (the peak of the forward's intermediates: what a graph's pool must
hold), the outputs (the logits a graph returns, kept for its life unless the capture copies them
into the engine's one shared buffer) and the peak with both (a graph whose logits are copied
out holds them in its pool until the copy).
Two exact shortcuts make a 70B list price in seconds, each checked in tests/test_capture_memory:
the forward is traced at `TRACE_LAYERS` layers (every layer frees its intermediates before the
next starts, so depth past two repeats the same peak), and per row count at two widths only:
the forward runs the same operators at every width and each tensor has at most one width
axis, so every allocation is affine in the width and the event list at any width follows.
What it is not: a measurement of a device allocator (rounding, segments, library scratch);
`nanobench.gpu.check` holds the figure against a real capture through `cuda_capture_check`.
Invariant: a shape's figures are those of the event list traced (or followed) at that shape;
nothing here is a formula of the config.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch

from engine.captured import padding_plan
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from engine.model import Llama
from engine.weights import DTYPES
from nanobench.memory.live_bytes import LiveBytes

# Two layers: the first (which also builds the per-step read index) and one steady layer.
TRACE_LAYERS = 2


@dataclass(frozen=True)
class ShapeMemory:
    """One recorded shape's bytes: its pool workspace and the output buffer it keeps."""

    kernel: str
    rows: int
    width: int
    workspace_bytes: int  # peak of the forward's intermediates, the output left out
    outputs_bytes: int  # the logits buffer the graph returns (kept, unless copied out)
    peak_bytes: int  # peak with the output counted: a private pool, or the pool of a graph
    # whose logits are copied into a shared buffer and freed (capture_output="shared")


@dataclass(frozen=True)
class Trace:
    """A forward's allocation events (serial, +bytes / -bytes) and the serials it returned."""

    events: tuple[tuple[int, int], ...]
    kept: frozenset[int]


def engine_config(
    kernel: str, dtype: str, max_batch: int, max_model_len: int, device: str = "cpu"
) -> EngineConfig:
    """The engine a capture list is recorded on: one KV block, dense GEMM weights."""
    return EngineConfig(
        device=device,
        max_batch_size=max_batch,
        max_model_len=max_model_len,
        num_blocks=1,
        dtype=dtype,
        attention=kernel,
        bucket_decode=True,
        persist_inputs=True,
        linear_layout="dense",
    )


def build_engine(model: ModelConfig, config: EngineConfig) -> Engine:
    """An engine with random weights, built in its dtype (no conversion pass, so fake-safe)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[config.dtype])
    try:
        with torch.device(config.device):
            net = Llama(model, config.max_model_len).eval().requires_grad_(False)
    finally:
        torch.set_default_dtype(previous)
    return Engine(net, config)


def trace_forward(engine: Engine, rows: int, width: int) -> Trace:
    """Trace one decode forward of the all-padding (rows, width) batch a capture records."""
    input_ids, plan = padding_plan(engine.cache, engine.inputs, rows, width)
    tracker = LiveBytes()
    with torch.no_grad(), tracker:
        out = engine.decode_forward(input_ids, plan)  # (B, V)
    trace = Trace(tuple(tracker.events), frozenset(tracker.serials(out)))
    del out
    return trace


def replay(events, kept) -> tuple[int, int, int]:
    """(workspace, outputs, peak) bytes of an event list: peaks of live bytes without/with kept."""
    live = live_other = peak = peak_other = outputs = 0
    for serial, delta in events:
        live += delta
        if serial in kept:
            outputs += max(delta, 0)
        else:
            live_other += delta
        peak = max(peak, live)
        peak_other = max(peak_other, live_other)
    return peak_other, outputs, peak


def follow_width(a: Trace, wa: int, b: Trace, wb: int, width: int) -> list[tuple[int, int]]:
    """The event list at `width` from traces at widths wa != wb (each size affine in width)."""
    if [s for s, _ in a.events] != [s for s, _ in b.events] or a.kept != b.kept:
        raise ValueError("the forward ran different operators at two widths; trace every shape")
    out = []
    for (serial, da), (_, db) in zip(a.events, b.events, strict=True):
        slope, rest = divmod((db - da), (wb - wa))
        if rest:
            raise ValueError(f"an allocation of {da} / {db} bytes is not affine in the width")
        out.append((serial, da + slope * (width - wa)))
    return out


class DecodeMemory:
    """Per-shape capture memory of one model, kernel and dtype, traced under fake tensors."""

    def __init__(
        self,
        model: ModelConfig,
        kernel: str,
        dtype: str,
        max_batch: int,
        max_model_len: int,
        layers: int = TRACE_LAYERS,
    ) -> None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.kernel = kernel
        self.max_model_len = max_model_len
        self.fake = FakeTensorMode()
        traced = model.with_layers(min(layers, model.num_layers))
        with self.fake:
            self.engine = build_engine(
                traced, engine_config(kernel, dtype, max_batch, max_model_len)
            )
        self._traces: dict[tuple[int, int], Trace] = {}
        self._shapes: dict[tuple[int, int], ShapeMemory] = {}

    def trace(self, rows: int, width: int) -> Trace:
        if (rows, width) not in self._traces:
            with self.fake:
                self._traces[rows, width] = trace_forward(self.engine, rows, width)
        return self._traces[rows, width]

    def at(self, rows: int, width: int) -> ShapeMemory:
        """The shape's figures; the Triton read spans the whole slot table whatever `width`."""
        if (rows, width) not in self._shapes:
            self._shapes[rows, width] = self._at(rows, width)
        return self._shapes[rows, width]

    def _at(self, rows: int, width: int) -> ShapeMemory:
        if self.kernel == "triton" or self.max_model_len < 2:
            t = self.trace(rows, self.max_model_len)
            events, kept = t.events, t.kept
        else:
            # The two widest: nearest to the list's largest shapes, the ones that size the pool.
            wa, wb = self.max_model_len // 2, self.max_model_len
            a, b = self.trace(rows, wa), self.trace(rows, wb)
            events, kept = follow_width(a, wa, b, wb, width), a.kept
        workspace, outputs, peak = replay(events, kept)
        return ShapeMemory(self.kernel, rows, width, workspace, outputs, peak)


@dataclass(frozen=True)
class ListMemory:
    """A capture list's traced bytes: one shared pool against one pool per graph, and the
    outputs kept per graph against the one buffer every graph writes (the engine's default)."""

    shapes: int
    shared_workspace_bytes: int  # max workspace over the list: one pool every recording reuses
    private_workspace_bytes: int  # sum of workspaces: a pool per graph
    outputs_bytes: int  # sum of outputs: each graph keeps its own, shared pool or not
    # capture_output="shared": the logits are a transient of the pool (copied out, then freed),
    # so the pool is the largest peak with them counted, and one buffer holds every output.
    shared_output_pool_bytes: int  # max over the list of peak_bytes
    shared_output_bytes: int  # the largest shape's outputs: the one buffer's size

    @property
    def per_graph_bytes(self) -> int:
        """What a capture keeping each graph's logits holds: shared workspace + every output."""
        return self.shared_workspace_bytes + self.outputs_bytes

    @property
    def shared_bytes(self) -> int:
        """What the engine's capture holds (capture_output="shared"): its pool + one buffer."""
        return self.shared_output_pool_bytes + self.shared_output_bytes


def list_memory(memory: DecodeMemory, shapes) -> ListMemory:
    """The traced figures of every shape of a list, combined (max, sum, sum, max, max)."""
    found = [memory.at(rows, width) for rows, width in shapes]
    return ListMemory(
        shapes=len(found),
        shared_workspace_bytes=max((m.workspace_bytes for m in found), default=0),
        private_workspace_bytes=sum(m.workspace_bytes for m in found),
        outputs_bytes=sum(m.outputs_bytes for m in found),
        shared_output_pool_bytes=max((m.peak_bytes for m in found), default=0),
        shared_output_bytes=max((m.outputs_bytes for m in found), default=0),
    )


@functools.lru_cache(maxsize=16)
def decode_memory(
    model: ModelConfig, kernel: str, dtype: str, max_batch: int, max_model_len: int
) -> DecodeMemory:
    """One DecodeMemory per (model, kernel, dtype, list bounds), shared by every command row."""
    return DecodeMemory(model, kernel, dtype, max_batch, max_model_len)


def with_heads(model: ModelConfig, heads: int) -> ModelConfig:
    """The model with `heads` query heads (what `capture --heads` prices); KV heads unchanged."""
    return model if heads == model.num_heads else dataclasses.replace(model, num_heads=heads)
