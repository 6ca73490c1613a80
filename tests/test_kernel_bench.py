"""Kernel timing rows: bytes counted by hand, rates from an injected clock, errors from the oracle.

The CPU tests run the Triton kernel under the interpreter (marked `interpreter`: conftest turns
it on only without CUDA); the `gpu` test times both kernels on the device with do_bench.
"""

import pytest
import torch

import nanobench.kernel_bench as kernel_bench
from kernels.reference import paged_attention_batched_reference
from nanobench.kernel_bench import (
    KernelTiming,
    KernelTooSlow,
    bench_kernels,
    check_kernel_bandwidth,
    copy_bandwidth_gbps,
    cuda_ms,
    decode_read_bytes,
)

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
        [(2, 40)], device="cpu", dtype=torch.float32, timer=clock(4.0, 2.0), hbm_gbps=0.05, **SMALL
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


@pytest.mark.interpreter
def test_triton_error_is_measured_against_the_oracle(monkeypatch):
    (_, tri) = bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, timer=clock(1, 1), **SMALL
    )
    assert tri.max_err < FP32_ATOL, tri

    # A kernel that is off by 1% must show in its row: the error is not read off the kernel itself.
    def off_by_one_percent(*args):
        return paged_attention_batched_reference(*args, validated=True) * 1.01

    monkeypatch.setattr(kernel_bench, "paged_attention_triton", off_by_one_percent)
    (_, bad) = bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, timer=clock(1, 1), **SMALL
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
        **SMALL,
    )
    assert ref.ms is None and ref.gbps is None and ref.note.startswith("not run: working set")
    assert tri.ms == 2.0 and tri.speedup is None


def test_copy_bandwidth_counts_a_read_and_a_write():
    # 1000 bytes copied in 1 ms: 2000 bytes moved, 0.002 GB/s
    assert copy_bandwidth_gbps("cpu", 1000, clock(1.0)) == pytest.approx(0.002)


def timing(rows, context, kernel="triton", fraction=None):
    return KernelTiming(rows, context, kernel, "bfloat16", 1, 1.0, 1.0, fraction, None, 0.0)


def test_bandwidth_gate():
    assert check_kernel_bandwidth([timing(64, 8192, fraction=0.6)]) == 0.6
    with pytest.raises(KernelTooSlow, match="49% of measured HBM bandwidth, expected at least 50%"):
        check_kernel_bandwidth([timing(64, 8192, fraction=0.49), timing(8, 8192, fraction=0.9)])
    with pytest.raises(KernelTooSlow, match="no Triton timing"):
        check_kernel_bandwidth([timing(64, 8192, kernel="reference", fraction=0.9)])
    with pytest.raises(KernelTooSlow, match="no Triton timing"):
        check_kernel_bandwidth([timing(64, 8192, fraction=None)])


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
    assert check_kernel_bandwidth(rows) >= 0.5
