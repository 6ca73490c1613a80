"""Kernel timing: the Triton paged decode read against the reference read and against HBM.

What it is: `bench_kernels(points, ...)`, which for each `(rows, context)` point builds random
K/V pools and a slot table whose blocks are scattered through the pool the way the engine's
allocator hands them out, gives every row exactly `context` tokens, and times both reads:
`paged_attention_batched_reference(validated=True)` and `paged_attention_triton` over the same
table, in interleaved rounds (`nanobench.harness.workers.rounds.run_rounds`: one timer call per kernel per
round, reference and triton alternating, the order rotating each round). On CUDA the timer is
`triton.testing.do_bench` (CUDA events, L2 flushed before every call, the median kept); on CPU
(tests, under the interpreter) a host clock; any `Timer` can be injected. Each row carries
every round's ms, their median, the bytes a decode read must move (`decode_read_bytes`), the
GB/s that makes, its fraction of the HBM bandwidth measured in the same run by a
device-to-device copy (`copy_bandwidth_gbps`) with a 95% interval over rounds, the Triton
kernel's speedup over the reference with its 95% interval paired by round, and its error
against an fp32 oracle. `kernel_bandwidth_gate` judges the fraction at GATE_POINT on its
interval: pass, fail or inconclusive.
What it is not: a model benchmark or a ragged-batch study (every row has the same length), and
not a printer: it returns frozen rows and the caller reports them.
Invariant: both kernels are held to the same byte count (what a decode read must move), so
their GB/s compare on one scale; the reference moves more than that (gather, GQA repeat, score
rectangle), which is the point. A point whose reference working set is over
`max_reference_bytes` gets a reference row with no time and a note, never an out-of-memory.
Drift between rounds hits both kernels of a round alike, so the speedup is paired by round.
Every point is timed under `threads` torch threads (0: as the caller left them; restored after),
and each row's `threads` is the count torch reported while it was timed.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from kernels.reference import paged_attention_batched_reference
from kernels.triton_decode import paged_attention_triton
from nanobench.harness.runs.gates import Gate, interval_gate
from nanobench.harness.statistics.stats import (
    MIN_ROUNDS,
    Interval,
    ratio_interval,
    verdict_at_least,
)
from nanobench.harness.workers.rounds import Comparison, RoundPlan, Window, intervals, run_rounds
from nanobench.harness.workers.threads import threads_applied

INDEX_BYTES = 8  # the engine's slot table and lengths are int64
ERR_ROWS = 4  # rows checked against the fp32 oracle: the oracle's pool is only their slots
WARMUP_MS, REP_MS = 25, 100  # do_bench's own defaults, spelled out
HOST_REPEAT = 3
REFERENCE_MAX_BYTES = 24 * 10**9  # the reference's gathered and repeated K/V, on one H200
GATE_POINT = (64, 8192)
GATE_FRACTION = 0.5
REFERENCE, TRITON = "reference", "triton"
SPEEDUP = Comparison("speedup", REFERENCE, TRITON)  # reference ms / triton ms
# MIN_ROUNDS rounds give the first interval; a do_bench call is ~0.13 s, so a point costs
# about 1.3 s at 5 rounds and the budget caps the largest points' slow reference.
KERNEL_PLAN = RoundPlan(min_rounds=MIN_ROUNDS, max_rounds=8, rel_ci=0.02, budget_s=4.0)

Timer = Callable[[Callable[[], object]], float]


@dataclass(frozen=True)
class KernelTiming:
    """One kernel at one point; ms and the rates are None when the kernel was not run."""

    rows: int
    context: int
    kernel: str
    dtype: str
    read_bytes: int
    ms: float | None
    gbps: float | None
    hbm_fraction: float | None
    speedup: float | None  # reference / triton, geometric mean over rounds
    max_err: float | None
    note: str = ""
    round_ms: tuple[float, ...] = ()  # the timer's ms of each round; ms is their median
    rounds: int = 0
    speedup_low: float | None = None  # 95% bootstrap interval, paired by round
    speedup_high: float | None = None
    hbm_fraction_low: float | None = None  # 95% bootstrap interval over rounds
    hbm_fraction_high: float | None = None
    threads: int | None = None  # torch.get_num_threads() while this point was timed

    def __post_init__(self) -> None:
        object.__setattr__(self, "round_ms", tuple(self.round_ms))  # rebuilt from JSON lists


def decode_read_bytes(
    rows: int, context: int, heads: int, kv_heads: int, head_dim: int, elem_bytes: int
) -> int:
    """2*rows*context*kv_heads*head_dim*elem + rows*context*8 + 2*rows*heads*head_dim*elem + rows*8."""
    kv = 2 * rows * context * kv_heads * head_dim * elem_bytes
    q_out = 2 * rows * heads * head_dim * elem_bytes
    return kv + rows * context * INDEX_BYTES + q_out + rows * INDEX_BYTES


def reference_working_bytes(
    rows: int, context: int, heads: int, kv_heads: int, head_dim: int, elem_bytes: int
) -> int:
    """2*rows*context*(kv_heads + heads)*head_dim*elem: gathered plus head-repeated K and V."""
    return 2 * rows * context * (kv_heads + heads) * head_dim * elem_bytes


def cuda_ms(fn: Callable[[], object]) -> float:
    """Median ms by triton.testing.do_bench: CUDA events, L2 flushed before each call."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))


def host_ms(fn: Callable[[], object]) -> float:
    """Median ms of HOST_REPEAT calls after one warm-up, by the host clock (CPU only)."""
    fn()
    times = []
    for _ in range(HOST_REPEAT):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def copy_bandwidth_gbps(device: str | torch.device, nbytes: int, timer: Timer) -> float:
    """2 * nbytes / copy seconds / 1e9: a device-to-device copy reads and writes nbytes."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)  # (nbytes,)
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return value


def point_inputs(rows, context, *, device, dtype, heads, kv_heads, head_dim, block_size, seed):
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


def oracle_error(out, q, k_pool, v_pool, table, lens) -> float:
    """Largest |out - fp32 reference| over the first ERR_ROWS rows.

    The oracle's pool is only those rows' slots, widened to fp32, so it costs ERR_ROWS rows of
    K/V at any point size instead of a second copy of the whole pool.
    """
    n, W = min(ERR_ROWS, table.shape[0]), table.shape[1]
    slots = table[:n].reshape(-1)  # (n*W,)
    own = torch.arange(n * W, device=table.device).view(n, W)  # (n, W) rows of the small pool
    want = paged_attention_batched_reference(
        q[:n].float(), k_pool[slots].float(), v_pool[slots].float(), own, lens[:n], validated=True
    )  # (n, H, D)
    return float((out[:n].float() - want).abs().max())


def bench_kernels(
    points: Iterable[tuple[int, int]],
    *,
    device: str | torch.device,
    dtype: torch.dtype,
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    block_size: int = 16,
    timer: Timer | None = None,
    hbm_gbps: float | None = None,
    max_reference_bytes: int = REFERENCE_MAX_BYTES,
    plan: RoundPlan = KERNEL_PLAN,
    threads: int = 0,
) -> list[KernelTiming]:
    """Two rows per point, reference then triton. timer: cuda_ms on CUDA, host_ms elsewhere.

    hbm_gbps: the bandwidth measured in the same run; without it hbm_fraction is None.
    plan: the rounds per point. threads: torch's threads while timing (0: as they are), undone
    after; each row reads the count back. The timed callables are named after their kernel
    (`fn.__name__` is "reference" or "triton"), so an injected timer can tell them apart.
    The Triton kernel needs CUDA, or CPU under TRITON_INTERPRET=1.
    """
    device = torch.device(device)
    for name, value in (
        ("heads", heads),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("block_size", block_size),
    ):
        _positive_int(name, value)
    if heads % kv_heads:
        raise ValueError(f"kv_heads: {kv_heads} does not divide heads {heads}")
    points = [(_positive_int("rows", r), _positive_int("context", c)) for r, c in points]
    timer = timer or (cuda_ms if device.type == "cuda" else host_ms)
    shape = dict(heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    results: list[KernelTiming] = []
    with threads_applied(threads):
        for seed, (rows, context) in enumerate(points):
            args = point_inputs(
                rows, context, device=device, dtype=dtype, block_size=block_size, seed=seed, **shape
            )
            with torch.no_grad():
                results += _bench_point(args, timer, hbm_gbps, max_reference_bytes, shape, plan)
            del args  # the pools of the largest points are tens of GB
    return results


def _timed(kernel: str, fn: Callable[[], object], timer: Timer) -> Callable[[int], Window]:
    """One kernel as a rounds system: each window is one timer call."""

    def window(round_index: int) -> Window:
        return Window(kernel, round_index, "ok", (float(timer(fn)),), (0,), (True,))

    return window


def _ends(interval: Interval | None) -> tuple[float | None, float | None, float | None]:
    if interval is None:
        return None, None, None
    ends = (interval.estimate, interval.low, interval.high)
    return tuple(None if math.isnan(v) else v for v in ends)


def _read_rate(round_ms: tuple[float, ...], read_bytes: int, hbm_gbps: float | None) -> tuple:
    """One kernel's rounds as (median ms, GB/s, HBM fraction, the fraction's 95% interval)."""
    ms = statistics.median(round_ms) if round_ms else None
    gbps = None if ms is None else read_bytes / (ms * 1e-3) / 1e9
    fraction = None if gbps is None or not hbm_gbps else gbps / hbm_gbps
    low = high = None
    if fraction is not None:
        # The fraction is ideal ms / measured ms: its interval is that ratio's over rounds.
        ideal_ms = read_bytes / (hbm_gbps * 1e9) * 1e3
        _, low, high = _ends(ratio_interval([ideal_ms] * len(round_ms), list(round_ms)))
    return ms, gbps, fraction, low, high


def _bench_point(args, timer, hbm_gbps, max_reference_bytes, shape, plan) -> list[KernelTiming]:
    q, _, _, table, _ = args
    rows, context = table.shape
    elem = q.element_size()
    read_bytes = decode_read_bytes(rows, context, elem_bytes=elem, **shape)
    working = reference_working_bytes(rows, context, elem_bytes=elem, **shape)

    def timing(kernel: str, windows, max_err, speedup=None, note="") -> KernelTiming:
        round_ms = tuple(w.ms[0] for w in windows if w.system == kernel)
        ms, gbps, fraction, low, high = _read_rate(round_ms, read_bytes, hbm_gbps)
        speedup, speedup_low, speedup_high = _ends(speedup)
        return KernelTiming(
            rows=rows,
            context=context,
            kernel=kernel,
            dtype=str(q.dtype).removeprefix("torch."),
            read_bytes=read_bytes,
            ms=ms,
            gbps=gbps,
            hbm_fraction=fraction,
            speedup=speedup,
            max_err=max_err,
            note=note,
            round_ms=round_ms,
            rounds=len(round_ms),
            speedup_low=speedup_low,
            speedup_high=speedup_high,
            hbm_fraction_low=low,
            hbm_fraction_high=high,
            threads=torch.get_num_threads(),  # read where the point is timed, not the option
        )

    def reference():
        return paged_attention_batched_reference(*args, validated=True)

    def triton():
        return paged_attention_triton(*args)

    systems = {}
    ref_err = None
    if working <= max_reference_bytes:
        ref_err = oracle_error(reference(), *args)
        systems[REFERENCE] = _timed(REFERENCE, reference, timer)
    tri_err = oracle_error(triton(), *args)
    systems[TRITON] = _timed(TRITON, triton, timer)
    both = [SPEEDUP] if REFERENCE in systems else []
    windows = run_rounds(systems, plan, both)
    speedup = intervals(windows, both)[SPEEDUP.name] if both else None
    if REFERENCE in systems:
        found = [timing(REFERENCE, windows, ref_err)]
    else:
        limit = f"{working / 1e9:.0f} GB over {max_reference_bytes / 1e9:.0f} GB"
        found = [timing(REFERENCE, [], None, note=f"not run: working set {limit}")]
    found.append(timing(TRITON, windows, tri_err, speedup))
    return found


def kernel_bandwidth_gate(
    timings: Iterable[KernelTiming],
    at: tuple[int, int] = GATE_POINT,
    min_fraction: float = GATE_FRACTION,
) -> Gate:
    """The Triton row at `at` reaches min_fraction of measured HBM bandwidth, on its interval.

    pass when the whole 95% interval over rounds is at or above min_fraction, fail when it is
    wholly below, else (or with fewer than MIN_ROUNDS rounds) inconclusive.
    """
    name = f"triton {at[0]}x{at[1]} >= {min_fraction:.0%} HBM"
    row = next((t for t in timings if t.kernel == TRITON and (t.rows, t.context) == at), None)
    if row is None or row.hbm_fraction is None:
        return Gate(name, False, f"no Triton timing with a measured bandwidth at {at[0]}x{at[1]}")
    interval = Interval.from_ends(estimate=row.hbm_fraction, low=row.hbm_fraction_low,
                                  high=row.hbm_fraction_high, rounds=row.rounds)  # fmt: skip
    verdict = verdict_at_least(interval, min_fraction)
    span = (
        f"[{interval.low:.0%}, {interval.high:.0%}] over {row.rounds} rounds"
        if math.isfinite(interval.low)
        else f"no interval ({row.rounds} rounds; one needs {MIN_ROUNDS})"
    )
    detail = (
        f"Triton decode read at {at[0]} rows x {at[1]} context: {row.gbps:.0f} GB/s, "
        f"{row.hbm_fraction:.0%} {span} of measured HBM bandwidth, expected at least "
        f"{min_fraction:.0%}"
    )
    if verdict == "inconclusive":
        detail += "; can't tell at this noise"
    return interval_gate(name, verdict, detail, interval, min_fraction)
