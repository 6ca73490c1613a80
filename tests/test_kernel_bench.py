"""Kernel timing rows: bytes counted by hand, rates from an injected clock, errors from the oracle.

The CPU tests run the Triton kernel under the interpreter (marked `interpreter`: conftest turns
it on only without CUDA); the `gpu` test times both kernels on the device with do_bench. The
rounds tests drive the bench with fake timers of known distributions: no timing claim here.
"""

import numpy as np
import pytest
import torch

import nanobench.gpu.kernel_bench as kernel_bench
from kernels.reference import paged_attention_batched_reference
from nanobench.gpu.kernel_bench import (
    KernelTiming,
    bench_kernels,
    copy_bandwidth_gbps,
    cuda_ms,
    decode_read_bytes,
    kernel_bandwidth_gate,
)
from nanobench.harness.workers.rounds import RoundPlan

SMALL = dict(heads=4, kv_heads=2, head_dim=32)
# rows=2, context=40, H=4, Hkv=2, D=32, fp32, int64 indices, counted by hand:
SMALL_BYTES = (
    2 * 40 * 2 * 32 * 4  # K: rows * context * Hkv * D * 4 bytes = 20480
    + 2 * 40 * 2 * 32 * 4  # V: 20480
    + 2 * 40 * 8  # slot table: rows * context * 8 = 640
    + 2 * 4 * 32 * 4  # q: rows * H * D * 4 = 1024
    + 2 * 4 * 32 * 4  # out: 1024
    + 2 * 8  # context_lens: 16
)
# Against an fp32 oracle on the same inputs (tests/test_triton_decode.py's fp32 tolerance).
FP32_ATOL = 1e-4


def clock(*ms):
    """A timer that runs fn once and reports the given milliseconds in call order."""
    times = iter(ms)

    def timer(fn):
        fn()
        return next(times)

    return timer


def per_kernel(reference, triton, noise=0.0, seed=0, calls=None):
    """A timer reporting each kernel's ms (told apart by fn.__name__) times 1 + noise * N(0, 1).

    Runs nothing: the rounds logic is under test, not the kernels. `calls` records the order.
    """
    rng = np.random.default_rng(seed)
    mean = {"reference": reference, "triton": triton}

    def timer(fn):
        if calls is not None:
            calls.append(fn.__name__)
        return mean[fn.__name__] * (1 + noise * rng.standard_normal())

    return timer


ONE_ROUND = RoundPlan(min_rounds=1, max_rounds=1, rel_ci=0.5, budget_s=60.0)
ROUNDS = RoundPlan(min_rounds=5, max_rounds=12, rel_ci=0.001, budget_s=60.0)


def test_decode_read_bytes_counted_by_hand():
    assert SMALL_BYTES == 43664
    assert decode_read_bytes(2, 40, elem_bytes=4, **SMALL) == SMALL_BYTES
    # bf16 at the gate point: K/V 2 * 64 * 8192 * 8 * 128 * 2 = 2 GiB dominate the count.
    assert (
        decode_read_bytes(64, 8192, 32, 8, 128, 2)
        == 2**31 + 64 * 8192 * 8 + 2 * 64 * 32 * 128 * 2 + 64 * 8
    )


@pytest.mark.interpreter
def test_rows_carry_rates_from_the_clock_and_the_measured_bandwidth():
    # reference 4 ms, triton 2 ms; measured HBM 0.05 GB/s
    rows = bench_kernels(
        [(2, 40)],
        device="cpu",
        dtype=torch.float32,
        timer=clock(4.0, 2.0),
        hbm_gbps=0.05,
        plan=ONE_ROUND,
        **SMALL,
    )
    ref, tri = rows
    assert (ref.kernel, tri.kernel) == ("reference", "triton")
    assert (ref.ms, tri.ms) == (4.0, 2.0)
    assert ref.read_bytes == tri.read_bytes == 43664
    assert tri.gbps == pytest.approx(43664 / 0.002 / 1e9)  # 0.021832 GB/s
    assert tri.hbm_fraction == pytest.approx(0.021832 / 0.05)
    assert ref.gbps == pytest.approx(0.010916)
    assert tri.speedup == pytest.approx(2.0) and ref.speedup is None
    assert (tri.rows, tri.context, tri.dtype) == (2, 40, "float32")
    assert (ref.round_ms, tri.round_ms) == ((4.0,), (2.0,)) and tri.rounds == 1
    # One round: a point estimate and no interval, never a made-up one.
    assert tri.speedup_low is None and tri.hbm_fraction_low is None


@pytest.mark.interpreter
def test_triton_error_is_measured_against_the_oracle(monkeypatch):
    (_, tri) = bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, timer=clock(1, 1), plan=ONE_ROUND, **SMALL
    )
    assert tri.max_err < FP32_ATOL, tri

    # A kernel that is off by 1% must show in its row: the error is not read off the kernel itself.
    def off_by_one_percent(*args):
        return paged_attention_batched_reference(*args, validated=True) * 1.01

    monkeypatch.setattr(kernel_bench, "paged_attention_triton", off_by_one_percent)
    (_, bad) = bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, timer=clock(1, 1), plan=ONE_ROUND, **SMALL
    )
    assert bad.max_err > 1e-3, bad


@pytest.mark.interpreter
def test_reference_over_its_memory_cap_is_a_row_with_a_note():
    ref, tri = bench_kernels(
        [(2, 40)],
        device="cpu",
        dtype=torch.float32,
        timer=clock(2.0),
        max_reference_bytes=1,
        plan=ONE_ROUND,
        **SMALL,
    )
    assert ref.ms is None and ref.gbps is None and ref.note.startswith("not run: working set")
    assert tri.ms == 2.0 and tri.speedup is None and ref.round_ms == ()


def test_copy_bandwidth_counts_a_read_and_a_write():
    # 1000 bytes copied in 1 ms: 2000 bytes moved, 0.002 GB/s
    assert copy_bandwidth_gbps("cpu", 1000, clock(1.0)) == pytest.approx(0.002)


def timing(rows, context, kernel="triton", fraction=None, low=None, high=None, rounds=5):
    return KernelTiming(
        rows, context, kernel, "bfloat16", 1, 1.0, 1.0, fraction, None, 0.0,
        rounds=rounds, hbm_fraction_low=low, hbm_fraction_high=high,
    )  # fmt: skip


def test_bandwidth_gate_is_judged_on_the_interval():
    passed = kernel_bandwidth_gate([timing(64, 8192, fraction=0.6, low=0.55, high=0.65)])
    assert (passed.verdict, passed.estimate, passed.ci_low, passed.target) == (
        "pass",
        0.6,
        0.55,
        0.5,
    )
    failed = kernel_bandwidth_gate(
        [timing(64, 8192, fraction=0.45, low=0.44, high=0.49), timing(8, 8192, fraction=0.9)]
    )
    assert failed.verdict == "fail" and "45% [44%, 49%] over 5 rounds" in failed.detail
    # The estimate above the target is not enough: the interval reaches below it.
    straddle = kernel_bandwidth_gate([timing(64, 8192, fraction=0.52, low=0.47, high=0.57)])
    assert straddle.verdict == "inconclusive" and "can't tell" in straddle.detail
    # No interval (too few rounds) is never a pass, however high the point estimate.
    alone = kernel_bandwidth_gate([timing(64, 8192, fraction=0.9, rounds=1)])
    assert alone.verdict == "inconclusive" and "no interval (1 rounds" in alone.detail
    for rows in ([timing(64, 8192, kernel="reference", fraction=0.9)], [timing(64, 8192)]):
        missing = kernel_bandwidth_gate(rows)
        assert missing.verdict == "fail" and "no Triton timing" in missing.detail


def bench_with(timer, plan=ROUNDS, **kwargs):
    """bench_kernels at one small point on CPU, its kernels never timed for real."""
    return bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, timer=timer, plan=plan, **SMALL, **kwargs
    )


@pytest.mark.interpreter
def test_rounds_alternate_the_kernels_in_rotating_order():
    calls = []
    ref, tri = bench_with(per_kernel(4.0, 2.0, calls=calls), plan=RoundPlan(4, 4, 0.5, 60.0))
    # Round r starts at kernel r mod 2: reference first, then triton first, and so on.
    assert calls == ["reference", "triton", "triton", "reference"] * 2
    assert ref.round_ms == (4.0,) * 4 and tri.round_ms == (2.0,) * 4 and tri.rounds == 4


@pytest.mark.interpreter
def test_a_true_2x_speedup_under_1pct_noise_has_a_tight_interval_around_it():
    ref, tri = bench_with(per_kernel(4.0, 2.0, noise=0.01), hbm_gbps=0.05)
    assert tri.speedup_low < 2.0 < tri.speedup_high, tri
    assert tri.speedup_high - tri.speedup_low < 0.1, tri
    assert tri.speedup_low > 1.9 and len(tri.round_ms) == tri.rounds >= 5
    # The fraction at 2 ms: 43664 B / 2 ms = 0.021832 GB/s of 0.05 GB/s, about 44%.
    assert tri.hbm_fraction_low < 43664 / 0.002 / 1e9 / 0.05 < tri.hbm_fraction_high


@pytest.mark.interpreter
def test_the_bandwidth_gate_on_fake_timers_of_known_distributions():
    # Gate the small point: its triton read at 2 ms is 0.021832 GB/s.
    at = (2, 40)

    def gate(hbm, noise, seed=0):
        rows = bench_with(per_kernel(4.0, 2.0, noise=noise, seed=seed), hbm_gbps=hbm)
        return kernel_bandwidth_gate(rows, at=at)

    # A true 60% of HBM under 1% noise: pass; a true 40%: fail.
    assert gate(0.021832 / 0.6, 0.01).verdict == "pass"
    assert gate(0.021832 / 0.4, 0.01).verdict == "fail"
    # Exactly at 50% under 5% noise: no number of rounds here can decide it.
    for seed in range(3):
        assert gate(0.021832 / 0.5, 0.05, seed).verdict == "inconclusive", seed


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(points=[(0, 8)]), "rows: expected a positive integer"),
        (dict(points=[(1, 8)], heads=6, kv_heads=4), "kv_heads: 4 does not divide heads 6"),
        (dict(points=[(1, 8)], block_size=0), "block_size: expected a positive integer"),
    ],
)
def test_bench_kernels_rejects_bad_shapes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench_kernels(device="cpu", dtype=torch.float32, **kwargs)


@pytest.mark.gpu
def test_triton_on_cuda_is_right_and_reaches_half_the_copy_bandwidth():
    hbm = copy_bandwidth_gbps("cuda", 2**30, cuda_ms)
    rows = bench_kernels([(3, 300), (64, 8192)], device="cuda", dtype=torch.bfloat16, hbm_gbps=hbm)
    for t in rows:
        if t.kernel == "triton":
            assert t.max_err < 2e-2, t  # bf16 against the fp32 oracle, as test_triton_decode
            # 2 GiB at the gate point is far past L2: a read cannot beat HBM by half again.
            assert t.rows == 3 or t.hbm_fraction < 1.5, t
    assert kernel_bandwidth_gate(rows).verdict == "pass"
