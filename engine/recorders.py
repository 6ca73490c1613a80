"""Recorders: how a decode step becomes a replay that takes no arguments.

What it is: `cuda_graph_recorder` (side-stream warm-up, `torch.cuda.CUDAGraph`, recorded into
one shared pool), `eager_recorder` (a capture's semantics with no device: it keeps the exact
argument objects, replays with no arguments, and copies into one buffer) and `default_recorder`,
which picks between them off the tensors' device. Every recorder takes `output`: the buffer a
replay writes, allocated by the caller outside any pool (a window of one buffer every graph
shares), or None for a buffer of the recording's own (in the pool, kept for the graph's life).
What it is not: the policy of when to record or replay; that is `captured.py`.
Invariant: a recording's output is a fixed buffer that every replay rewrites, on both paths;
a caller's `output` is that buffer itself, never a copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Recording:
    """What a recorder hands back: a no-argument replay, its output buffer, the pool it used."""

    replay: Callable[[], object]
    output: torch.Tensor
    pool: Hashable
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

    return Recording(replay, output, pool if pool is not None else EagerPool(), held)


def cuda_graph_recorder(
    fn: Callable,
    args: tuple,
    pool: Hashable | None = None,
    output: torch.Tensor | None = None,
    warmups: int = 1,
) -> Recording:
    """Warm up on a side stream, then record `fn(*args)` into `pool` (a fresh one when None).

    The side stream keeps warm-up allocations and lazy library initialisation (cuBLAS
    workspaces, Triton launches) out of the capture stream, as torch.cuda.graphs documents.
    With `output`, the graph ends by copying its logits there and the logits' own block goes
    back to the pool, where the next recording reuses it: the pool keeps no output.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    handle = pool if pool is not None else torch.cuda.graph_pool_handle()
    with torch.cuda.graph(graph, pool=handle):
        result = fn(*args)  # (B, V): storage in the pool
        if output is None:
            output = result  # kept: rewritten by every replay, held for the graph's life
        else:
            check_output_fits(output, result)
            output.copy_(result)
        del result
    return Recording(graph.replay, output, graph.pool(), graph)


def default_recorder(
    fn: Callable, args: tuple, pool: Hashable | None = None, output: torch.Tensor | None = None
) -> Recording:
    """cuda_graph_recorder when the step's tensors live on a CUDA device, else eager_recorder."""
    on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    recorder = cuda_graph_recorder if on_cuda else eager_recorder
    return recorder(fn, args, pool, output)
