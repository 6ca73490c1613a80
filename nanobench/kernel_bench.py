"""Kernel timing: the reference paged decode read against the Triton kernel, point by point.

What it is: `bench_kernels(points, ...)`, which for each `(rows, context)` point builds random
K/V pools and a slot table whose blocks are scattered through the pool the way the engine's
allocator hands them out, gives every row exactly `context` tokens, and times both reads:
`paged_attention_batched_reference(validated=True)` over the `[rows, context]` mapping and
`paged_attention_triton` over the same table. Each kernel is warmed up (the Triton kernel builds
on its first launch), then timed `repeat` times with the device synchronised around every call;
the row reports the median. `max_err` is the largest absolute difference from the reference run
in fp32 on the same (already rounded) inputs, so in fp32 the reference's own row reads 0 and in
bf16 it shows how far the native-dtype reference drifts.
What it is not: a model benchmark or a ragged-batch study (every row has the same length, so
padding plays no part), and not a printer: it returns rows and the caller reports them.
Invariant: `kv_bytes` is the K and V a decode step must read, `2 * rows * context * kv_heads *
head_dim * element_size`, the same for both kernels, so `gbps` compares them on one scale; the
reference moves more than that (gather, GQA repeat, score rectangle), which is the point.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from functools import partial

import torch

from engine.config import KERNELS
from kernels.reference import paged_attention_batched_reference
from kernels.triton_decode import paged_attention_triton

WARMUP = 2


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return value


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(fn: Callable[[], torch.Tensor], device: torch.device, repeat: int) -> float:
    for _ in range(WARMUP):
        fn()
    _sync(device)
    times = []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _point_inputs(
    rows: int,
    context: int,
    *,
    device: torch.device,
    dtype: torch.dtype,
    heads: int,
    kv_heads: int,
    head_dim: int,
    block_size: int,
    seed: int,
) -> tuple[torch.Tensor, ...]:
    """q, pools, a [rows, context] slot table over shuffled blocks, and lengths all = context."""
    gen = torch.Generator(device=device).manual_seed(seed)
    blocks_per_row = -(-context // block_size)
    num_blocks = rows * blocks_per_row
    S = num_blocks * block_size + 1  # the last row is the sink, as in the engine's cache
    k_pool = torch.randn(S, kv_heads, head_dim, generator=gen, device=device, dtype=dtype)
    v_pool = torch.randn(S, kv_heads, head_dim, generator=gen, device=device, dtype=dtype)
    q = torch.randn(rows, heads, head_dim, generator=gen, device=device, dtype=dtype)  # (B, H, D)
    blocks = torch.randperm(num_blocks, generator=gen, device=device).view(rows, blocks_per_row)
    pos = torch.arange(context, device=device)  # (W,)
    table = blocks[:, pos // block_size] * block_size + pos % block_size  # (B, W)
    lens = torch.full((rows,), context, dtype=torch.int64, device=device)  # (B,)
    return q, k_pool, v_pool, table, lens  # pools: (S, Hkv, D)


def bench_kernels(
    points: Iterable[tuple[int, int]],
    *,
    device: str | torch.device,
    dtype: torch.dtype,
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    block_size: int = 16,
    repeat: int = 20,
) -> list[dict]:
    """One row per (point, kernel): rows, context, kernel, dtype, ms, kv_bytes, gbps, max_err.

    points: (rows, context) pairs. The Triton kernel needs CUDA, or CPU under TRITON_INTERPRET=1.
    """
    device = torch.device(device)
    for name, value in (
        ("heads", heads),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("block_size", block_size),
        ("repeat", repeat),
    ):
        _positive_int(name, value)
    if heads % kv_heads:
        raise ValueError(f"kv_heads: {kv_heads} does not divide heads {heads}")
    points = [(_positive_int("rows", r), _positive_int("context", c)) for r, c in points]
    elem = torch.empty((), dtype=dtype).element_size()
    results: list[dict] = []
    for seed, (rows, context) in enumerate(points):
        q, k_pool, v_pool, table, lens = _point_inputs(
            rows,
            context,
            device=device,
            dtype=dtype,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            block_size=block_size,
            seed=seed,
        )
        with torch.no_grad():
            want = paged_attention_batched_reference(
                q.float(), k_pool.float(), v_pool.float(), table, lens, validated=True
            )  # (B, H, D) fp32 oracle on the rounded inputs
            args = (q, k_pool, v_pool, table, lens)
            calls = {
                "reference": partial(paged_attention_batched_reference, *args, validated=True),
                "triton": partial(paged_attention_triton, *args),
            }
            kv_bytes = 2 * rows * context * kv_heads * head_dim * elem
            for kernel in KERNELS:
                fn = calls[kernel]
                out = fn()  # (B, H, D)
                max_err = float((out.float() - want).abs().max())
                ms = _median_ms(fn, device, repeat)
                results.append(
                    {
                        "rows": rows,
                        "context": context,
                        "kernel": kernel,
                        "dtype": str(dtype).removeprefix("torch."),
                        "ms": ms,
                        "kv_bytes": kv_bytes,
                        "gbps": kv_bytes / (ms * 1e-3) / 1e9,
                        "max_err": max_err,
                    }
                )
        del q, k_pool, v_pool, table, lens, want, out, args, calls
    return results
