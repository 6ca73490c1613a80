"""The roofline floor of a decode step: what this machine cannot beat, measured in the same run.

What it is: the step's cost in bytes and flops (`weight_bytes`, `kv_read_bytes`,
`matmul_params`, `step_flops`; numbers in, numbers out), `roofline_ms` (the larger of bytes /
bandwidth and flops / GEMM rate, and which bound it is), the probes that measure both rates on
the device (`probe_bandwidth`: the fastest full read of a weight-sized tensor; `probe_gemm`: the
peak rate of a large square GEMM, never the step's own small products), `floor_beaten` (a
measured step below its floor fails the probe) and `ProbeSession`, the worker session that
runs the probes at set-up and once a round (a window: that round's floor).
What it is not: a model of the step. Launches, Python and attention's softmax are above it.
Invariant: both rates are peaks probed in this run on this device and dtype; a floor says
which bound it is held to, and a floor above a measured step is a failed probe (the row says
so), never a fast step.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

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


def probe_data(spec: RunSpec):
    """The weight-sized tensor the bandwidth probe reads: fp32 whatever the model dtype, a plain
    vectorised read, never a conversion-bound one."""
    import torch

    nbytes = max(int(spec.weight_bytes), 1 << 20)
    return torch.rand(math.ceil(nbytes / 4), device=spec.device)


def probe_bandwidth(spec: RunSpec, data=None) -> dict:
    """Read a weight-sized tensor on the device: GB/s of the fastest of several full sums.

    The fastest, not the median: the floor is what the machine can do, and on a shared machine
    a slow read measures the neighbours (a median floor once came out above a measured step).
    """
    import torch

    sync = torch.cuda.synchronize if spec.device == "cuda" else (lambda: None)
    data = probe_data(spec) if data is None else data
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


# The square GEMM's side: large enough that packing and launches are noise beside the flops
# (2 n^3: 2.1 GFLOP on a CPU, 137 GFLOP on a GPU), small enough to run in a second or so.
GEMM_SIDE = {"cpu": 1024, "cuda": 4096}
GEMM_FIRST_SIDE = 128  # where the side starts doubling towards GEMM_SIDE
GEMM_PASS_S = 0.25  # the most one multiply of the probe may take, as the last one foretells it


def gemm_side(multiply_s: Callable[[int], float], largest: int) -> int:
    """The probe's side: doubled from GEMM_FIRST_SIDE up to `largest` while the next side's one
    multiply, 8x the last one's `multiply_s(n)`, would fit GEMM_PASS_S. A dtype the CPU only
    emulates is probed on a smaller square: bfloat16 on an AVX2 core takes 2.2 s a 1024 multiply
    (float32: 0.03 s), 20 s for the probe's passes, in every worker of a bfloat16 run."""
    n = min(GEMM_FIRST_SIDE, largest)
    while n < largest and 8 * multiply_s(n) <= GEMM_PASS_S:
        n *= 2
    return min(n, largest)


def probe_gemm(spec: RunSpec) -> dict:
    """The device's peak GEMM rate: GFLOP/s of a large square matmul in the step's dtype.

    Never the step's own products: at a handful of rows those are bandwidth-bound, slower than
    the peak, and a floor drawn from them is an achieved rate that a compiled step can beat (a
    compiled step once ran at 0.78x of such a "floor"). The fastest of several passes, for the
    reason the bandwidth probe takes its fastest read.
    """
    import torch

    from engine.weights import DTYPES

    dtype, device = DTYPES[spec.dtype], spec.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def multiply_s(side: int) -> float:
        a = torch.randn(side, side, device=device).to(dtype)  # (n, n)
        a @ a  # the first picks the kernel
        sync()
        t0 = time.perf_counter()
        a @ a  # (n, n)
        sync()
        return time.perf_counter() - t0

    n = gemm_side(multiply_s, GEMM_SIDE[device])
    a = torch.randn(n, n, device=device).to(dtype)  # (n, n)
    b = torch.randn(n, n, device=device).to(dtype)  # (n, n)
    seconds = []
    for i in range(GEMM_REPEATS + 2):
        sync()
        t0 = time.perf_counter()
        a @ b  # (n, n)
        sync()
        if i >= 2:  # the first passes warm the caches and pick the kernels
            seconds.append(time.perf_counter() - t0)
    flops = 2 * n**3
    return {
        "gemm_flops": flops,
        "gemm_side": n,
        "gemm_gflops": round(flops / min(seconds) / 1e9, 3),
        "gemm_median_gflops": round(flops / statistics.median(seconds) / 1e9, 3),
        "gemm_ms": round(min(seconds) * 1e3, 4),
    }


def floor_beaten(system: str, ms_per_step: float | None, floor: float | None) -> str | None:
    """A measured step below its floor: the probe did not find the peak, so it failed.

    A floor is a lower bound; a step that beats it proves a probe ran slow (a busy neighbour, a
    rate that was not a peak), never that the step is faster than the machine.
    """
    if ms_per_step is None or not floor or ms_per_step >= floor:
        return None
    return (
        f"failed: {system} ran {ms_per_step:.3f} ms/step, below the {floor:.3f} ms floor, "
        "so a probed rate was not this machine's peak"
    )


class ProbeSession:
    """Both probes at set-up (its ready row), then again in every round: a window is that
    round's floor, `roofline_ms` of the round's two peaks, so the floor's own spread is in every
    ratio to it; the final row's rates are the median of the rounds' peaks."""

    def __init__(self, spec: RunSpec, progress: Callable[[dict], None] = lambda e: None) -> None:
        import torch

        if spec.threads:
            torch.set_num_threads(spec.threads)
        self.spec, self.data = spec, probe_data(spec)
        progress({"phase": "bandwidth probe", "i": 0, "of": 2})
        row = probe_bandwidth(spec, self.data)
        progress({"phase": "GEMM probe", "i": 1, "of": 2})
        row.update(probe_gemm(spec))
        row["threads"] = torch.get_num_threads()
        self.ready = {**row, "status": "ok"}
        self.rounds: list[dict] = []

    def serve(self, request: dict) -> dict:
        """One round's floor as a window of one step (a slice request is answered whole)."""
        found = {**probe_bandwidth(self.spec, self.data), **probe_gemm(self.spec)}
        self.rounds.append(found)
        step_bytes = self.spec.weight_bytes + self.spec.kv_bytes
        floor, _ = roofline_ms(
            step_bytes, found["bandwidth_gbs"], self.spec.step_flops, found["gemm_gflops"]
        )
        return {"round": request["round"], "status": "ok", "ms": [floor], "built": [0],
                "steady": [True]}  # fmt: skip

    def finish(self) -> dict:
        if not self.rounds:
            return self.ready
        rates = ("bandwidth_gbs", "bandwidth_median_gbs", "gemm_gflops", "gemm_median_gflops")
        medians = {k: statistics.median(r[k] for r in self.rounds) for k in rates}
        return {**self.ready, **medians, "rounds": len(self.rounds)}
