"""profile.attribution: self times from nesting, categories and kernel costs, each against a hand
count, a brute-force count or torch.profiler's own self times."""

from __future__ import annotations

import inspect
import random
from collections import defaultdict

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from nanobench.profile.attribution import (
    attribute,
    category,
    events_from_profiler,
    nest,
    self_times_us,
    user_frames,
)
from nanobench.profile.op_cost import (
    addmm_bytes,
    addmm_flops,
    floor_ms,
    mm_bytes,
    mm_flops,
    op_cost,
    sdpa_flops,
)
from nanobench.profile.rows import CATEGORIES, FORWARD_RANGE, STEP_RANGE, Event

MM = ((4, 64), (64, 128))  # (M, K) x (K, N): M 4, K 64, N 128
FLOATS = ("float", "float")


def ev(name, start, end, thread=0, shapes=(), dtypes=(), stack=()) -> Event:
    return Event(name, float(start), float(end), thread, shapes, dtypes, stack)


def compiled_step(t0: float) -> list[Event]:
    """One hand-built compiled step of 100 us; each line's self time in the comment."""
    return [
        ev(STEP_RANGE, t0, t0 + 100),  # 100 - forward 80 - argmax 5 = 15
        ev(FORWARD_RANGE, t0 + 10, t0 + 90),  # 80 - lookup 4 - region 67 = 9
        ev("TorchDynamo Cache Lookup", t0 + 12, t0 + 16),  # 4
        ev("Torch-Compiled Region: 0/0", t0 + 18, t0 + 85),  # 67 - 2 - 2 - 55 = 8
        ev("Pregraph bytecode", t0 + 19, t0 + 21),  # 2
        ev("AOTDispatcher Runtime Wrapper Prologue", t0 + 22, t0 + 24),  # 2
        ev("## Call CompiledFxGraph abc ##", t0 + 25, t0 + 80),  # 55 - 10 - 20 - 2 - 13 = 10
        ev("graph_1_cpp_fused_add_mul_3", t0 + 27, t0 + 37, stack=("gen.py:40",)),  # 10
        ev("aten::mm", t0 + 40, t0 + 60, shapes=MM, dtypes=FLOATS, stack=("model.py:41",)),  # 20
        ev("aten::empty", t0 + 62, t0 + 64),  # 2
        ev("aten::linear", t0 + 65, t0 + 78),  # 13 - 9 = 4
        ev("aten::mm", t0 + 67, t0 + 76, shapes=MM, dtypes=FLOATS),  # 9
        ev("aten::argmax", t0 + 92, t0 + 97),  # 5
    ]


SELF_US = [15, 9, 4, 8, 2, 2, 10, 10, 20, 2, 4, 9, 5]
# The same step by category, us: each a sum of the self times above.
CATEGORY_US = {
    "guards": 4,
    "dynamo entry": 2 + 2 + 8,
    "wrapper python": 10,
    "fused kernels": 10,
    "extern kernels": 20 + 9,
    "eager ops": 4,  # aten::linear's own
    "copies and allocation": 2,
    "forward python": 9,
    "outside the forward": 15 + 5,  # the step's own and argmax
    "unattributed": 0,
}
CATEGORY_CALLS = {
    "guards": 1,
    "dynamo entry": 3,
    "wrapper python": 1,
    "fused kernels": 1,
    "extern kernels": 2,
    "eager ops": 1,
    "copies and allocation": 1,
    "forward python": 1,
    "outside the forward": 2,
    "unattributed": 0,
}
WARMUP = [  # a building step: 5000 us, nearly all one mm
    ev(STEP_RANGE, 0, 5000),  # 5000 - 4980 = 20
    ev(FORWARD_RANGE, 10, 4990),  # 4980 - 4880 = 100
    ev("aten::mm", 20, 4900, shapes=MM, dtypes=FLOATS),  # 4880
]


def three_steps() -> list[Event]:
    return WARMUP + compiled_step(5000) + compiled_step(5100)


def test_self_time_is_the_duration_less_the_direct_children():
    events = compiled_step(0)
    assert self_times_us(events, nest(events)) == SELF_US
    assert sum(SELF_US) == 100  # one well-nested thread: the selves tile the step


def test_a_steady_step_by_category_against_the_hand_count():
    rows, _, facts = attribute(three_steps(), [False, True, True])
    assert [r.category for r in rows] == list(CATEGORIES)
    for r in rows:
        assert r.ms_per_step == pytest.approx(CATEGORY_US[r.category] / 1e3), r.category
        assert r.share == pytest.approx(CATEGORY_US[r.category] / 100), r.category
        assert r.calls_per_step == CATEGORY_CALLS[r.category], r.category
    assert facts == pytest.approx(
        {
            "profiled_step_ms": 0.1,
            "steps_profiled": 2,
            "forward_share": 0.8,  # the forward's 80 us of 100
            "host_share": (4 + 12 + 10 + 9 + 20) / 100,
            "attributed_ms": 0.1,
            "unattributed_ms": 0.0,
            "kernels": 4,  # aten::mm, the fused kernel, aten::linear, aten::empty
            "fused_kernels": 1,
            # no device record: every device figure None, never 0
            "device_ms_per_step": None,
            "device_busy_share": None,
            "launches_per_step": None,
            "graph_replays_per_step": None,
            "graph_device_share": None,
        }
    )


def test_kernel_rows_carry_time_shapes_cost_rate_floor_and_source():
    _, kernels, _ = attribute(three_steps(), [False, True, True], peaks=(100.0, 1000.0))
    assert [(k.name, k.kind) for k in kernels] == [
        ("aten::mm", "extern kernels"),  # 29 us a step
        ("graph_1_cpp_fused_add_mul_3", "fused kernels"),  # 10
        ("aten::linear", "eager ops"),  # 4
        ("aten::empty", "copies and allocation"),  # 2
    ]
    mm, fused = kernels[0], kernels[1]
    assert (mm.calls_per_step, mm.ms_per_step) == (2, pytest.approx(0.029))
    # (4, 64) x (64, 128) float: 2*4*64*128 flops; (256 + 8192 + 512) * 4 bytes.
    assert (mm.flops, mm.bytes) == (65536, 35840)
    # 14.5 us a call: 35840 B / 14.5 us = 2.4717 GB/s; 65536 / 14.5 us = 4.5197 GFLOP/s.
    assert mm.gbs == pytest.approx(2.47172, rel=1e-5)
    assert mm.gflops == pytest.approx(4.51972, rel=1e-5)
    # At 100 GB/s and 1000 GFLOP/s a call needs max(358.4 ns, 65.5 ns): 2 calls, 0.0007168 ms.
    assert mm.floor_ms == pytest.approx(0.0007168)
    assert mm.floor_ratio == pytest.approx(0.029 / 0.0007168)
    assert mm.source == "model.py:41"
    assert (fused.bytes, fused.flops, fused.gbs, fused.floor_ms, fused.source) == (
        None,
        None,
        None,
        None,
        "gen.py:40",
    )
    _, unpeaked, _ = attribute(three_steps(), [False, True, True])
    assert unpeaked[0].floor_ms is None and unpeaked[0].floor_ratio is None


def test_steps_that_built_are_left_out():
    # Only the warm-up: its mm's 4880 us, the forward's 100, the step's 20.
    rows, kernels, facts = attribute(three_steps(), [True, False, False])
    ms = {r.category: r.ms_per_step for r in rows}
    assert ms["extern kernels"] == pytest.approx(4.88)
    assert ms["forward python"] == pytest.approx(0.1)
    assert ms["outside the forward"] == pytest.approx(0.02)
    assert ms["guards"] == ms["fused kernels"] == 0.0
    assert facts["profiled_step_ms"] == pytest.approx(5.0)
    assert [k.name for k in kernels] == ["aten::mm"]
    # And the other way round: none of the warm-up's 5000 us leaks into the steady steps.
    rows, _, facts = attribute(three_steps(), [False, True, True])
    assert {r.category: r.ms_per_step for r in rows}["extern kernels"] == pytest.approx(0.029)


def test_every_category_is_kept_and_the_shares_sum_to_one():
    eager_only = [ev(STEP_RANGE, 0, 50), ev(FORWARD_RANGE, 5, 45), ev("aten::relu", 10, 30)]
    rows, _, _ = attribute(eager_only, [True])
    assert [r.category for r in rows] == list(CATEGORIES)
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert sum(r.ms_per_step == 0.0 for r in rows) == len(CATEGORIES) - 3  # zeros kept
    rows, _, _ = attribute(three_steps(), [False, True, True])
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_overlapping_siblings_count_time_twice_as_negative_unattributed():
    # B starts inside A and ends after it: it is A's child, clipped to A. The forward's own time
    # then holds B's overhang [60, 80] that B counts too: 20 us twice.
    events = [
        ev(STEP_RANGE, 0, 100),  # 100 - 80 = 20
        ev(FORWARD_RANGE, 10, 90),  # 80 - A's 40 = 40
        ev("aten::relu", 20, 60),  # A: 40 - B's [40, 60] = 20
        ev("aten::mul", 40, 80),  # B: 40
    ]
    rows, _, facts = attribute(events, [True])
    assert facts["attributed_ms"] == pytest.approx(0.12)
    assert facts["unattributed_ms"] == pytest.approx(-0.02)
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_an_event_running_past_its_step_leaves_its_part_unattributed():
    # X starts in the forward at 80 and ends at 120, past the step: the forward's self loses
    # [80, 90], and X, not inside the step, is not attributed: 10 us no category holds.
    events = [
        ev(STEP_RANGE, 0, 100),  # 100 - 80 = 20
        ev(FORWARD_RANGE, 10, 90),  # 80 - 10 = 70
        ev("aten::relu", 80, 120),
    ]
    rows, _, facts = attribute(events, [True])
    assert facts["unattributed_ms"] == pytest.approx(0.01)
    assert rows[-1].category == "unattributed" and rows[-1].share == pytest.approx(0.1)
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_another_threads_events_count_only_inside_a_steady_step():
    events = compiled_step(0) + [
        ev("aten::linear", 30, 50, thread=2),  # in the step and its forward: 20 - 10 = 10
        ev("aten::mm", 35, 45, thread=2, shapes=MM, dtypes=FLOATS),  # 10
        ev("aten::mm", 150, 170, thread=2, shapes=MM, dtypes=FLOATS),  # after it: left out
    ]
    # Each thread its own tree: the linear is a root on its thread, the mm its child.
    assert nest(events)[-3:] == [-1, len(events) - 3, -1]
    rows, kernels, facts = attribute(events, [True])
    ms = {r.category: r.ms_per_step for r in rows}
    assert ms["extern kernels"] == pytest.approx(0.039)  # 29 + the other thread's 10
    assert ms["eager ops"] == pytest.approx(0.014)  # 4 + 10
    assert facts["unattributed_ms"] == pytest.approx(-0.02)  # it ran alongside the main one
    assert kernels[0].calls_per_step == 3


def test_a_runtime_call_is_part_of_the_op_that_made_it():
    events = [
        ev(STEP_RANGE, 0, 100),
        ev(FORWARD_RANGE, 10, 90),
        ev("triton_poi_fused_relu_0", 20, 40),  # 20 us, 8 of them its launch
        ev("cuLaunchKernel", 25, 33),
        ev("aten::clamp_min", 50, 60),
        ev("cudaLaunchKernel", 52, 56),
    ]
    rows, kernels, _ = attribute(events, [True])
    assert [(k.name, k.calls_per_step, k.ms_per_step) for k in kernels] == [
        ("triton_poi_fused_relu_0", 1, pytest.approx(0.02)),
        ("aten::clamp_min", 1, pytest.approx(0.01)),
    ]
    ms = {r.category: r.ms_per_step for r in rows}
    assert (ms["fused kernels"], ms["eager ops"]) == (pytest.approx(0.02), pytest.approx(0.01))


def test_no_steady_step_is_an_error_in_one_line():
    with pytest.raises(ValueError, match="no steady step"):
        attribute(three_steps(), [False, False, False])
    with pytest.raises(ValueError, match="no steady step"):
        attribute([ev("aten::mm", 0, 5)], [])
    with pytest.raises(ValueError, match="3 nanobench::step ranges for 2 steps"):
        attribute(three_steps(), [True, True])


@pytest.mark.parametrize(
    "name, expected",
    [
        ("TorchDynamo Cache Lookup", "guards"),
        ("Torch-Compiled Region: 0/1", "dynamo entry"),
        ("Pregraph bytecode", "dynamo entry"),
        ("AOTDispatcher Runtime Wrapper Epilogue", "dynamo entry"),
        ("CompiledFunction", "dynamo entry"),
        ("## Call CompiledFxGraph fxbmgg545jjj ##", "wrapper python"),
        ("graph_1_cpp_fused_add_mul_3", "fused kernels"),
        ("cpp_fused_relu_0", "fused kernels"),
        ("triton_poi_fused_relu_0", "fused kernels"),
        ("aten::addmm", "extern kernels"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "extern kernels"),
        ("aten::_weight_int4pack_mm_for_cpu", "extern kernels"),
        ("mkldnn::_linear_pointwise", "extern kernels"),
        ("aten::linear", "eager ops"),
        ("aten::relu", "eager ops"),
        ("aten::copy_", "copies and allocation"),
        ("aten::empty_strided", "copies and allocation"),
        ("aten::to", "copies and allocation"),
        (FORWARD_RANGE, "forward python"),
        (STEP_RANGE, "outside the forward"),
    ],
)
def test_each_name_goes_to_its_category(name, expected):
    assert category(name, in_forward=True) == expected


def test_outside_the_forward_any_op_is_outside_the_forward():
    assert category("aten::mm", in_forward=False) == "outside the forward"
    assert category("TorchDynamo Cache Lookup", in_forward=False) == "outside the forward"


def test_costs_from_shapes_against_hand_counts():
    # mm (4, 64) x (64, 128) float: 2*4*64*128 = 65536; (256 + 8192 + 512) * 4 = 35840.
    assert op_cost("aten::mm", MM, FLOATS) == (35840, 65536)
    assert (mm_flops(4, 64, 128), mm_bytes(4, 64, 128, 4)) == (65536, 35840)
    # addmm, bias (128,): 65536 + 4*128 = 66048; (128 + 256 + 8192 + 512) * 4 = 36352.
    assert op_cost("aten::addmm", ((128,), *MM), ("float",) * 3) == (36352, 66048)
    assert (addmm_flops(4, 64, 128), addmm_bytes(128, 4, 64, 128, 4)) == (66048, 36352)
    # bmm (8, 4, 16) x (8, 16, 32) bf16: 2*8*4*16*32 = 32768; 8 * (64 + 512 + 128) * 2 = 11264.
    assert op_cost("aten::bmm", ((8, 4, 16), (8, 16, 32)), ("c10::BFloat16",) * 2) == (11264, 32768)
    # baddbmm, input (8, 4, 32) float: 32768 + 8*4*32 = 33792; (1024 + 8 * 704) * 4 = 26624.
    shapes = ((8, 4, 32), (8, 4, 16), (8, 16, 32))
    assert op_cost("aten::baddbmm", shapes, ("float",) * 3) == (26624, 33792)
    # sdpa q (1, 8, 1, 64), k and v (1, 2, 128, 64) half: 4*1*8*1*128*64 = 262144 flops;
    # q 512 + k 16384 + v 16384 + out 512 = 33792 elements * 2 = 67584 bytes.
    qkv = ((1, 8, 1, 64), (1, 2, 128, 64), (1, 2, 128, 64), (), ())
    name = "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert op_cost(name, qkv, ("c10::Half",) * 3) == (67584, 262144)
    assert sdpa_flops(1, 8, 1, 128, 64) == 262144


def test_costs_the_shapes_do_not_say_are_none():
    assert op_cost("aten::mm", MM, ("c10::Float8_e4m3fn",) * 2) == (None, 65536)  # size unknown
    assert op_cost("aten::mm", MM, ()) == (None, 65536)
    assert op_cost("aten::mm", ((4, 64), (32, 128)), FLOATS) == (None, None)  # 64 != 32
    assert op_cost("aten::relu", ((4, 128),), ("float",)) == (None, None)
    assert op_cost("aten::linear", ((4, 64), (128, 64), (128,)), ("float",) * 3) == (None, None)
    assert floor_ms(2, None, None, 100.0, 1000.0) is None
    # Flops alone still bound the time: 2 calls * 65536 / 1e12 s = 1.31072e-4 ms.
    assert floor_ms(2, None, 65536, 100.0, 1000.0) == pytest.approx(1.31072e-4)


def test_user_frames_keep_the_users_code_as_file_and_line():
    frames = [
        "torch/nn/modules/module.py(1779): _call_impl",
        "/x/lib/python3.12/site-packages/transformers/models/llama.py(300): forward",
        "engine/model.py(120): forward",
        "<built-in method relu of type object at 0x7f>",
        "/home/me/bench.py(9): <module>",
    ]
    assert user_frames(frames) == ("model.py:120", "bench.py:9")


def brute_force_self_us(events: list[Event]) -> list[int]:
    """Each unit slot [t, t + 1) to the innermost event holding it: latest start, then shortest,
    then the later one of two alike (the deeper in the generator)."""
    owned = [0] * len(events)
    for t in range(int(max(e.end_us for e in events))):
        holding = [i for i, e in enumerate(events) if e.start_us <= t and t + 1 <= e.end_us]
        if holding:
            owned[max(holding, key=lambda i: (events[i].start_us, -events[i].end_us, i))] += 1
    return owned


NAMES = ["aten::mm", "aten::relu", "aten::copy_", "cpp_fused_add_0", "aten::linear", "## x ##"]


def random_tree(rng: random.Random, start: int, end: int, depth: int, out: list[Event]) -> None:
    t = start
    while t < end and depth < 4:
        length = rng.randint(0, min(12, end - t))
        out.append(ev(rng.choice(NAMES), t, t + length))
        random_tree(rng, t + rng.randint(0, 1), t + length, depth + 1, out)
        t += length + rng.randint(0, 3)


@pytest.mark.parametrize("seed", range(12))
def test_self_times_match_a_brute_force_count_on_random_trees(seed):
    rng = random.Random(seed)
    events = [ev(STEP_RANGE, 0, 60), ev(FORWARD_RANGE, 2, 58)]
    random_tree(rng, 3, 57, 2, events)
    assert self_times_us(events, nest(events)) == brute_force_self_us(events)
    rows, _, facts = attribute(events, [True])
    assert facts["unattributed_ms"] == 0.0
    assert sum(r.share for r in rows) == pytest.approx(1.0)


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.b = nn.Linear(128, 32)

    def forward(self, x, out):
        h = torch.relu(self.a(x))
        return out.copy_(self.b(h))


def profiled(with_stack: bool):
    torch.manual_seed(0)
    model, x, out = Toy(), torch.randn(4, 64), torch.empty(4, 32)
    activity = [ProfilerActivity.CPU]
    with (
        torch.no_grad(),
        profile(activities=activity, record_shapes=True, with_stack=with_stack) as prof,
    ):
        for _ in range(3):
            with record_function(STEP_RANGE):
                with record_function(FORWARD_RANGE):
                    model(x, out)
                out.argmax(-1)
    return prof


def test_self_times_match_torch_profilers_own():
    prof = profiled(with_stack=False)
    theirs: dict[str, float] = defaultdict(float)
    for e in prof.events():
        theirs[e.name] += e.self_cpu_time_total
    events = events_from_profiler(prof.events())
    mine: dict[str, float] = defaultdict(float)
    for e, us in zip(events, self_times_us(events, nest(events))):
        mine[e.name] += us
    assert {"aten::addmm", "aten::relu", "aten::copy_", FORWARD_RANGE} <= set(mine)
    assert set(mine) == set(theirs)
    for name, us in theirs.items():
        assert mine[name] == pytest.approx(us, rel=0.01, abs=3.0), name
    # attribute() puts the same totals in its rows: a step is a third of the three.
    rows, kernels, _ = attribute(events, [True] * 3)
    ms = {r.category: r.ms_per_step for r in rows}
    assert ms["extern kernels"] == pytest.approx(theirs["aten::addmm"] / 3e3, rel=0.01, abs=1e-3)
    assert ms["forward python"] == pytest.approx(theirs[FORWARD_RANGE] / 3e3, rel=0.01, abs=1e-3)
    # Linear(64, 128) on (4, 64): addmm(bias (128,), (4, 64), (64, 128)): 2*4*64*128 + 4*128
    # flops; Linear(128, 32) on (4, 128): 2*4*128*32 + 4*32.
    addmms = sorted((k.flops, k.bytes) for k in kernels if k.name == "aten::addmm")
    assert addmms == [(32896, (32 + 512 + 4096 + 128) * 4), (66048, (128 + 256 + 8192 + 512) * 4)]


def test_python_frames_become_each_ops_source_not_events():
    events = events_from_profiler(profiled(with_stack=True).events())
    assert not any(".py(" in e.name or e.name.startswith("<built-in") for e in events)
    lines, first = inspect.getsourcelines(Toy.forward)
    _, kernels, _ = attribute(events, [True] * 3)
    addmm = next(k for k in kernels if k.name == "aten::addmm")
    file, _, line = addmm.source.partition(":")
    assert file == "test_profile_attribution.py"
    assert first <= int(line) < first + len(lines)  # a line of Toy.forward


def test_events_from_profiler_keeps_host_and_device_events_with_stack_shapes_dtypes_and_ids():
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    def made(name, device=DeviceType.CPU, **kw):
        return FunctionEvent(
            id=1, name=name, thread=7, start_us=2.0, end_us=9.5, device_type=device, **kw
        )

    stack = ["torch/nn/modules/module.py(1779): _call_impl", "engine/model.py(12): forward"]
    host = made(
        "aten::cat",
        input_shapes=[[[2, 3], [4, 3]], []],
        input_dtypes=["float", "Scalar"],
        stack=stack,
    )
    device = made("void gemm_kernel<float>", device=DeviceType.CUDA)
    frame = made("engine/model.py(12): forward", is_python_function=True)
    events = events_from_profiler([host, device, frame])
    shapes, dtypes = (((2, 3), (4, 3)), ()), ("float", "Scalar")
    # the device record keeps its correlation id (its launch's), and no stack or shapes
    assert events == [
        Event("aten::cat", 2.0, 9.5, 7, shapes, dtypes, ("model.py:12",), False, 1),
        Event("void gemm_kernel<float>", 2.0, 9.5, 7, (), (), (), True, 1),
    ]
    hash(events[0])  # a tensor list's shapes as tuples: the kernel rows group by them
