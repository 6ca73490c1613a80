"""A GPU step's device side, on recorded events: kernels joined to their launches by correlation
id, through them to the op that owns them; busy time as a union; launches, graph replays and
the share of device time inside them; the kernel rows' device time and floors; and Inductor's
cudagraph skips caught with their reasons. Every figure here is counted by hand from the events
below, which no GPU is needed to replay."""

from __future__ import annotations

import logging

import pytest

from nanobench.profile.attribution import attribute
from nanobench.profile.device import busy_us, skip_reasons
from nanobench.profile.rows import FORWARD_RANGE, STEP_RANGE, Event

MM = ((4, 64), (64, 128))  # 2·4·64·128 = 65,536 flops; (4·64 + 64·128 + 4·128)·4 = 35,840 bytes


def host(name, start, end, correlation=0, shapes=(), dtypes=()) -> Event:
    return Event(name, float(start), float(end), 0, shapes, dtypes, (), False, correlation)


def device(name, start, end, correlation) -> Event:
    return Event(name, float(start), float(end), 7, (), (), (), True, correlation)


WARMUP = [  # a building step: its launch and kernel count nowhere
    host(STEP_RANGE, -500, -400),
    host(FORWARD_RANGE, -490, -410),
    host("aten::mm", -480, -420, shapes=MM, dtypes=("float", "float")),
    host("cudaLaunchKernel", -470, -460, correlation=5),
    device("gemm_warm", -450, -300, correlation=5),
]
STEP = [
    host(STEP_RANGE, 0, 100),
    host(FORWARD_RANGE, 10, 90),
    host("aten::mm", 20, 30, shapes=MM, dtypes=("float", "float")),
    host("cudaLaunchKernel", 22, 25, correlation=11),
    host("triton_poi_fused_add_0", 40, 45),
    host("cuLaunchKernel", 41, 44, correlation=12),
    host("cudaGraphLaunch", 60, 70, correlation=13),  # a replay, straight from the forward
    device("sm90_gemm", 30, 80, correlation=11),  # 50 us
    device("triton_poi_fused_add_0", 70, 90, correlation=12),  # 20 us, overlapping the GEMM
    device("graph_kernel_a", 90, 120, correlation=13),  # 30 us
    device("graph_kernel_b", 120, 130, correlation=13),  # 10 us
    device("stray", 130, 140, correlation=0),  # no launch to join: counted nowhere
]


def test_device_time_joins_each_kernel_to_its_launch_and_the_launch_to_its_op():
    _, kernels, facts = attribute(WARMUP + STEP, [False, True], peaks=(100.0, 1000.0))
    # 50 + 20 + 30 + 10 = 110 us of kernels in the one steady step
    assert facts["device_ms_per_step"] == pytest.approx(0.110)
    # busy: [30, 90] and [90, 130] = 100 us, over the host's 100 us step
    assert facts["device_busy_share"] == pytest.approx(1.0)
    assert facts["launches_per_step"] == 2  # cudaLaunchKernel and cuLaunchKernel
    assert facts["graph_replays_per_step"] == 1
    assert facts["graph_device_share"] == pytest.approx(40 / 110)
    by = {k.name: k for k in kernels}
    assert by["aten::mm"].device_ms_per_step == pytest.approx(0.050)
    assert by["triton_poi_fused_add_0"].device_ms_per_step == pytest.approx(0.020)
    # the GEMM's floor is held to its device time: 65,536 flops at 1000 GFLOP/s is 0.0655 us,
    # 35,840 bytes at 100 GB/s 0.3584 us: 50 / 0.3584
    assert by["aten::mm"].floor_ratio == pytest.approx(50 / 0.3584)
    assert by["aten::mm"].gflops == pytest.approx(65536 / 50e-6 / 1e9)


def test_an_op_that_put_nothing_on_the_device_gets_no_floor_on_a_gpu():
    extra = [host("aten::addmm", 50, 55, shapes=((128,), *MM), dtypes=("float",) * 3)]
    _, kernels, _ = attribute(STEP + extra, [True], peaks=(100.0, 1000.0))
    (addmm,) = [k for k in kernels if k.name == "aten::addmm"]
    assert addmm.device_ms_per_step is None and addmm.floor_ratio is None
    assert addmm.flops is not None  # its cost is still said; only the floor needs device time


def test_busy_time_is_the_union_of_the_spans():
    assert busy_us([(0, 10), (5, 15), (20, 30)]) == 25
    assert busy_us([(20, 30), (0, 40)]) == 40
    assert busy_us([]) == 0


def test_inductors_cudagraph_skips_are_caught_with_their_reasons_inside_the_block_only():
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    from nanobench.compile.dynamo import quiet_dynamo

    names = ("torch._dynamo", "torch._inductor", "torch.fx")
    levels = {name: logging.getLogger(name).level for name in names}
    quiet_dynamo()  # as a compile session does first: torch._inductor's warnings off
    try:
        with skip_reasons() as found:
            log_cudagraph_skip_and_bump_counter(
                "skipping cudagraphs due to mutated inputs (1 instances)"
            )
        log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to cpu device (x)")
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    assert found == ["skipping cudagraphs due to mutated inputs (1 instances)"]
