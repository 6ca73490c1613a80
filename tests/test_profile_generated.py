"""Where a profiled kernel comes from, read off a generated module's text
(`nanobench.profile.generated`): the text below is cut from a module Inductor generated for the
built-in model's dynamic decode step (torch 2.13), not written for this test."""

from __future__ import annotations

from nanobench.profile.generated import defined_kernels, kernel_sources
from nanobench.profile.rows import Event

MODULE = """
cpp_fused_add_embedding_mean_mul_pow_rsqrt_0 = async_compile.cpp_pybinding(['const int64_t*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
''')


cpp_fused__unsafe_view_mul_silu_split_4 = async_compile.cpp_pybinding(['const float*'], r'''
''')


class Runner:
    def call(self, args):
        buf1 = empty_strided_cpu((s88, 1, 256), (256, 256, 1), torch.float32)
        cpp_fused_add_embedding_mean_mul_pow_rsqrt_0(arg2_1, arg0_1, arg7_1, buf0, buf1, s88)
        del arg7_1
        buf2 = empty_strided_cpu((s88, 512), (512, 1), torch.float32)
        # Topologically Sorted Source Nodes: [x, rms_norm, qkv], Original ATen: [aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf1, (s88, 256), (256, 1), 0), out=buf2)
        del arg8_1
        # Topologically Sorted Source Nodes: [gate_up, split, silu, mul_8], Original ATen: [aten.silu]
        cpp_fused__unsafe_view_mul_silu_split_4(buf20, buf21, s88)
"""
FILE = "cohhlb5o6c3cglqwc4k7cvtc2oykbig35dweykkkxz6rlsfy6rq6.py"
LINE_OF_MM = (
    MODULE.splitlines().index(
        "        extern_kernels.mm(reinterpret_tensor(buf1, (s88, 256), (256, 1), 0), out=buf2)"
    )
    + 1
)  # 1-based, as a stack frame names it


def test_each_defined_kernel_has_the_nodes_of_the_comment_above_its_call_or_none():
    kernels = defined_kernels({FILE: MODULE})
    assert kernels == {
        # the comment above the mm is the mm's: nothing sits between the call above and it
        "cpp_fused_add_embedding_mean_mul_pow_rsqrt_0": "",
        "cpp_fused__unsafe_view_mul_silu_split_4": "nodes: gate_up, split, silu, mul_8",
    }


def test_a_profiled_name_finds_its_origin_by_kernel_or_by_its_first_frame():
    events = [
        # Inductor's kernel profile prefixes the graph's id
        Event("graph_1_cpp_fused__unsafe_view_mul_silu_split_4", 0.0, 1.0),
        Event("aten::mm", 1.0, 2.0, stack=(f"{FILE}:{LINE_OF_MM}",)),
        Event("aten::argmax", 2.0, 3.0, stack=("engine.py:251",)),
        Event("aten::add", 3.0, 4.0),
        # a line below the mm's call: the mm's comment is not its own
        Event("aten::copy_", 4.0, 5.0, stack=(f"{FILE}:{LINE_OF_MM + 1}",)),
    ]
    # by kernel row (`attribution.group_key`): a fused kernel's name, an op's name and shapes
    assert kernel_sources(events, {FILE: MODULE}) == {
        ("graph_1_cpp_fused__unsafe_view_mul_silu_split_4",): "nodes: gate_up, split, silu, mul_8",
        ("aten::mm", (), ()): "nodes: x, rms_norm, qkv",
        ("aten::argmax", (), ()): "engine.py:251",
        ("aten::copy_", (), ()): f"{FILE}:{LINE_OF_MM + 1}",
    }
    # one op on two shapes is two rows, each with its own line
    other = Event("aten::mm", 5.0, 6.0, shapes=((4, 8), (8, 2)), stack=("model.py:7",))
    assert kernel_sources([*events, other], {FILE: MODULE})[other.name, other.shapes, ()] == (
        "model.py:7"
    )
