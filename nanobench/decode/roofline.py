"""The roofline floor of a decode step: what this machine cannot beat, measured in the same run.

What it is: the step's cost in bytes and flops (`weight_bytes`, `kv_read_bytes`,
`matmul_params`, `step_flops`; numbers in, numbers out), `roofline_ms` (the larger of bytes /
bandwidth and flops / GEMM rate, and which bound it is), the probes that measure both rates on
the device (`probe_bandwidth`: the fastest full read of a weight-sized tensor; `probe_gemm`: the
step's own matmuls, one layer's weights at the step's rows, every layer and the head) and
`ProbeSession`, the worker session that runs them.
What it is not: a model of the step. Launches, Python and attention's softmax are above it.
Invariant: both rates come from this run on this device and dtype; a floor says which bound
it is held to, and a floor above a measured step is a probe that ran slow, not a fast step.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from nanobench.decode.rows import RunSpec

PROBE = "roofline-probe"
PROBE_READS = 9
GEMM_REPEATS = 7


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


def matmul_params(config) -> int:
    """Weights a decode step multiplies by: q, k, v, o and the MLP of every layer, and the head."""
    h, q, kv = config.hidden_size, config.q_size, config.kv_size
    layer = h * (q + 2 * kv) + q * h + 3 * h * config.intermediate_size
    return config.num_layers * layer + config.vocab_size * h


def step_flops(config, rows: int, prompt_len: int, steps: int) -> int:
    """2 rows matmul_params + 4 rows mean_ctx q_size layers: the matmuls, then scores and values.

    mean_ctx as in kv_read_bytes: decode step i (1..steps-1) attends over prompt_len + i tokens.
    """
    mean_ctx = prompt_len + steps / 2 if steps > 1 else prompt_len
    attention = 4 * rows * mean_ctx * config.q_size * config.num_layers
    return int(2 * rows * matmul_params(config) + attention)


def roofline_ms(
    step_bytes: int, bandwidth_gbs: float | None, flops: int, gemm_gflops: float | None
) -> tuple[float | None, str | None]:
    """max(step_bytes / bandwidth, flops / GEMM rate) in ms, and "memory" or "compute"."""
    memory = floor_ms(step_bytes, bandwidth_gbs) if bandwidth_gbs else None
    compute = flops / (gemm_gflops * 1e9) * 1e3 if gemm_gflops else None
    if memory is None and compute is None:
        return None, None
    if compute is None or (memory is not None and memory >= compute):
        return memory, "memory"
    return compute, "compute"


def probe_bandwidth(spec: RunSpec) -> dict:
    """Read a weight-sized tensor on the device: GB/s of the fastest of several full sums.

    The fastest, not the median: the floor is what the machine can do, and on a shared machine
    a slow read measures the neighbours (a median floor once came out above a measured step).
    """
    import torch

    nbytes = max(int(spec.weight_bytes), 1 << 20)
    device = spec.device
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


def probe_gemm(spec: RunSpec, config) -> dict:
    """GFLOP/s of the step's own matmuls: rows x hidden through one layer's weights, every layer.

    One layer's matrices stand for all of them (the same shapes); the fastest of several passes,
    for the reason the bandwidth probe takes its fastest read.
    """
    import torch

    from engine.weights import DTYPES

    dtype, device = DTYPES[spec.dtype], spec.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    h, q, kv, inter = config.hidden_size, config.q_size, config.kv_size, config.intermediate_size
    rows = spec.rows

    def rand(*shape):
        return torch.randn(*shape, device=device).to(dtype)

    w_qkv, w_o, w_gu, w_down = rand(h, q + 2 * kv), rand(q, h), rand(h, 2 * inter), rand(inter, h)
    w_head = rand(h, config.vocab_size)
    x, a, m = rand(rows, h), rand(rows, q), rand(rows, inter)  # (B, hidden), (B, q), (B, inter)

    def one_pass() -> None:
        for _ in range(config.num_layers):
            x @ w_qkv, a @ w_o, x @ w_gu, m @ w_down
        x @ w_head

    seconds = []
    for i in range(GEMM_REPEATS + 2):
        sync()
        t0 = time.perf_counter()
        one_pass()
        sync()
        if i >= 2:  # the first passes warm the caches and the kernels
            seconds.append(time.perf_counter() - t0)
    flops = 2 * rows * matmul_params(config)
    return {
        "gemm_flops": flops,
        "gemm_gflops": round(flops / min(seconds) / 1e9, 3),
        "gemm_median_gflops": round(flops / statistics.median(seconds) / 1e9, 3),
        "gemm_ms": round(min(seconds) * 1e3, 4),
    }


class ProbeSession:
    """Both probes at set-up; its ready row is its whole answer."""

    def __init__(self, spec: RunSpec, progress: Callable[[dict], None] = lambda e: None) -> None:
        import torch

        from engine.weights import read_config

        if spec.threads:
            torch.set_num_threads(spec.threads)
        progress({"phase": "bandwidth probe", "i": 0, "of": 2})
        row = probe_bandwidth(spec)
        progress({"phase": "GEMM probe", "i": 1, "of": 2})
        row.update(probe_gemm(spec, read_config(Path(spec.model))))
        row["threads"] = torch.get_num_threads()
        self.ready = row

    def serve(self, request: dict) -> dict:
        raise ValueError("the probe answers once, at set-up")

    def finish(self) -> dict:
        return self.ready
