"""Recorders: how a decode step becomes a replay that takes no arguments.

What it is: `cuda_graph_recorder` (side-stream warm-up, `torch.cuda.CUDAGraph`, recorded into
one shared pool, on the one side stream and the one capture stream `STREAMS` keeps per device;
`warm_library_state` makes the libraries' per-stream state on both before anything is measured,
and `ordinary_pool_bytes` reads what they hold outside every graph's pool), `eager_recorder` (a capture's semantics with no device: it keeps the exact
argument objects, replays with no arguments, and copies into one buffer) and `default_recorder`,
which picks between them off the tensors' device. Every recorder takes `output`: the buffer a
replay writes, allocated by the caller outside any pool (a window of one buffer every graph
shares), or None for a buffer of the recording's own (in the pool, kept for the graph's life).
What it is not: the policy of when to record or replay; that is `captured.py`.
Invariant: a recording's output is a fixed buffer that every replay rewrites, on both paths;
a caller's `output` is that buffer itself, never a copy of it. Every CUDA recording on a device
warms up on the same side stream and records on the same capture stream.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Recording:
    """What a recorder hands back: a no-argument replay, its output buffer, the pool it used."""

    replay: Callable[[], object]
    output: torch.Tensor
    pool: Hashable
    recorder: str  # which recorder made it: what a recording's seconds were the seconds of
    # The CUDAGraph (or the held arguments) must outlive the replay callable's users.
    keepalive: object = None


class EagerPool:
    """The eager recorder's stand-in for a graph pool handle: one object per shared pool."""

    def __repr__(self) -> str:
        return f"EagerPool({id(self):#x})"


def check_output_fits(output: torch.Tensor, result: torch.Tensor) -> None:
    """The caller's buffer has the recorded result's shape, dtype and device."""
    if (output.shape, output.dtype, output.device) != (result.shape, result.dtype, result.device):
        raise ValueError(
            f"output buffer {tuple(output.shape)} {output.dtype} on {output.device}: the "
            f"forward returns {tuple(result.shape)} {result.dtype} on {result.device}"
        )


def eager_recorder(
    fn: Callable, args: tuple, pool: Hashable | None = None, output: torch.Tensor | None = None
) -> Recording:
    """Capture semantics without a device: hold the arguments, replay with none, one buffer.

    The buffer (the caller's `output`, or one allocated here) is filled with NaN at record
    time (the recording call's values are not a result, as on a device where nothing ran yet),
    so a caller that returns the recording call's output instead of a replay's shows it at once.
    """
    first = fn(*args)  # (B, V): only its shape and dtype are kept
    if output is None:
        output = torch.empty_like(first)  # (B, V)
    check_output_fits(output, first)
    output.fill_(float("nan"))
    held = tuple(args)

    def replay() -> torch.Tensor:
        return output.copy_(fn(*held))

    pool = pool if pool is not None else EagerPool()
    return Recording(replay, output, pool, "eager_recorder", held)


@dataclass
class RecorderStreams:
    """The side stream and the capture stream of each device, made once and reused after.

    cuBLAS keeps a workspace per (handle, stream), allocated through the caching allocator and
    never returned (32 MiB on Hopper): a fresh stream per recording would leave one workspace
    per graph in the ordinary pool, counted as allocated, beside a pool the list prices in KiB.
    `factory(device)` makes a stream (a seam: tests hand it a fake).
    """

    factory: Callable[[torch.device], object]
    made: dict[tuple[int, str], object] = field(default_factory=dict)
    warmed: set[int] = field(default_factory=set)

    def get(self, device: torch.device, role: str) -> object:
        """The one stream of `role` ("side" or "capture") on `device`, made on first use."""
        device = cuda_device(device)
        key = (device.index, role)
        if key not in self.made:
            self.made[key] = self.factory(device)
        return self.made[key]


def cuda_device(device: torch.device | str) -> torch.device:
    """`device` with its index: "cuda" alone is the current device, as torch reads it."""
    device = torch.device(device)
    if device.index is None:
        return torch.device(device.type, torch.cuda.current_device())
    return device


STREAMS = RecorderStreams(lambda device: torch.cuda.Stream(device=device))
# Tiny products, one per GEMM path a decode step may take (a plain product: cuBLAS; one with a
# bias: cuBLASLt), so each path's per-stream state exists before a recording is measured.
WARM_SHAPE = (16, 16)


def warm_library_state(device: torch.device, streams: RecorderStreams = STREAMS) -> None:
    """Once per device: a tiny matmul on the side and the capture stream, then synchronise.

    What a library makes per stream on first use (the cuBLAS handle's workspace) is then held
    before a caller reads memory, so it lands in no recording's window and in no graph's pool.
    """
    device = cuda_device(device)
    if device.index in streams.warmed:
        return
    dtypes = [torch.float32] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])
    for role in ("side", "capture"):
        stream = streams.get(device, role)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for dtype in dtypes:
                a = torch.ones(WARM_SHAPE, device=device, dtype=dtype)
                torch.mm(a, a)
                torch.addmm(a[0], a, a)
                del a
    torch.cuda.synchronize(device)
    streams.warmed.add(device.index)


def ordinary_pool_bytes(device: torch.device) -> int:
    """Bytes allocated on `device` outside every graph's private pool (pool id (0, 0)).

    Library state (cuBLAS workspaces) lives there; a recording's own allocations do not, so
    its growth around a recording is what a library took, not what the graph holds.
    """
    index = cuda_device(device).index
    return sum(
        s["allocated_size"]
        for s in torch.cuda.memory_snapshot()
        if s["device"] == index and tuple(s["segment_pool_id"]) == (0, 0)
    )


def cuda_graph_recorder(
    fn: Callable,
    args: tuple,
    pool: Hashable | None = None,
    output: torch.Tensor | None = None,
    warmups: int = 1,
) -> Recording:
    """Warm up on a side stream, then record `fn(*args)` into `pool` (a fresh one when None).

    The side stream keeps warm-up allocations and lazy library initialisation (cuBLAS
    workspaces, Triton launches) out of the capture stream, as torch.cuda.graphs documents; both
    streams are the device's own (`STREAMS`), so a list of N graphs makes two, not N.
    With `output`, the graph ends by copying its logits there and the logits' own block goes
    back to the pool, where the next recording reuses it: the pool keeps no output.
    """
    on = (a.device for a in args if isinstance(a, torch.Tensor) and a.is_cuda)
    device = cuda_device(next(on, "cuda"))
    warm_library_state(device)  # once per device; a caller that measures calls it first
    side = STREAMS.get(device, "side")
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn(*args)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    handle = pool if pool is not None else torch.cuda.graph_pool_handle()
    with torch.cuda.graph(graph, pool=handle, stream=STREAMS.get(device, "capture")):
        result = fn(*args)  # (B, V): storage in the pool
        if output is None:
            output = result  # kept: rewritten by every replay, held for the graph's life
        else:
            check_output_fits(output, result)
            output.copy_(result)
        del result
    return Recording(graph.replay, output, graph.pool(), "cuda_graph_recorder", graph)


def default_recorder(
    fn: Callable, args: tuple, pool: Hashable | None = None, output: torch.Tensor | None = None
) -> Recording:
    """cuda_graph_recorder when the step's tensors live on a CUDA device, else eager_recorder."""
    on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    recorder = cuda_graph_recorder if on_cuda else eager_recorder
    return recorder(fn, args, pool, output)
