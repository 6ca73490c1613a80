"""Each kernel's and op's user line (`nanobench.profile.user_lines`): the generated module and the
provenance below are cut from what Inductor wrote for the corpus's gpt-fast-style step
(tests/corpus/static_kv.py, torch 2.13 on a CPU, provenance tracking at level 1), not written for
this test; the eager call sites come from the profiler's own call tree of a small module here."""

from __future__ import annotations

import inspect
import os
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from nanobench.harness.runs.rows import RowSchemaError, columns, rebuild
from nanobench.profile.attribution import events_from_profiler
from nanobench.profile.rows import Event, KernelRow
from nanobench.profile.user_lines import (
    LIBRARY,
    NO_NODE,
    NO_PROVENANCE,
    NO_STACK,
    NO_TRACE,
    CallLines,
    Generated,
    Site,
    call_sites,
    calls_handled,
    innermost_user,
    is_library,
    kernel_lines,
    lines_of,
    site_of,
    worded,
)

FILE = "cmg2vbdhhuwdyvzdecnmcxn2kxyjgwafb4ptcigzaomq7kooyayr.py"
MODEL = str(Path(__file__).resolve().parent / "corpus" / "gptfast.py")
MODULE = """
cpp_fused_embedding_0 = async_compile.cpp_pybinding(['const int64_t*', 'const float*', 'float*'], r'''
{
    torch::aot_inductor::RAIIAtenRecordFunctionHandle record_graph_0_cpp_fused_embedding_0_("graph_0_cpp_fused_embedding_0", nullptr);
}
''')


class Runner:
    def call(self, args):
        buf0 = empty_strided_cpu((2, 1, 32), (32, 32, 1), torch.float32)
        assert_size_stride(arg2_1, (96, 32), (32, 1), 'input')
        # [Provenance debug handles] cpp_fused_embedding_0:1
        cpp_fused_embedding_0(arg0_1, arg1_1, buf0)
        del arg0_1
        buf1 = empty_strided_cpu((2, 96), (96, 1), torch.float32)
        # Topologically Sorted Source Nodes: [x, linear], Original ATen: [aten.embedding, aten.view, aten.t, aten.mm]
        # [Provenance debug handles] extern_kernels.mm:2
        extern_kernels.mm(reinterpret_tensor(buf0, (2, 32), (32, 1), 0), reinterpret_tensor(arg2_1, (32, 96), (1, 32), 0), out=buf1)
        del arg2_1
        buf8 = empty_strided_cpu((2, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [transpose_3, reshape, linear_1], Original ATen: [aten.transpose, aten.view, aten.t, aten.mm]
        # [Provenance debug handles] extern_kernels.mm:5
        extern_kernels.mm(reinterpret_tensor(buf6, (2, 32), (32, 1), 0), reinterpret_tensor(arg7_1, (32, 32), (1, 32), 0), out=buf8)
"""


def trace(*frames: tuple[str, int, str, str]) -> str:
    """A stack trace as Inductor keeps one (`node.meta["stack_trace"]`), outermost first."""
    return "".join(f'  File "{p}", line {n}, in {fn}\n    {code}\n' for p, n, fn, code in frames)


FORWARD = (MODEL, 59, "forward", "q, k, v = self.project(idx)")
PROVENANCE = {
    "cpp_fused_embedding_0:1": [
        trace(FORWARD, (MODEL, 49, "project", "x = self.tok_embeddings(idx)  # (B, S, DIM)"))
    ],
    "extern_kernels.mm:2": [
        trace(FORWARD, (MODEL, 50, "project", "q, k, v = self.wqkv(x).split(DIM, dim=-1)"))
    ],
    # a node dynamo traced through a library's Python: its innermost user frame is the model's
    "extern_kernels.mm:5": [
        trace(
            (MODEL, 62, "forward", "return self.attend(q, k, v, mask)"),
            (MODEL, 56, "attend", "return self.output(self.wo(y.transpose(1, 2)))"),
            ("/x/lib/python3.11/site-packages/torch/nn/functional.py", 2300, "linear", "..."),
        )
    ],
}


def line_of(text: str, start: str) -> int:
    """The 1-based line of `text` that starts (indentation aside) with `start`."""
    (found,) = [i for i, ln in enumerate(text.splitlines(), 1) if ln.lstrip().startswith(start)]
    return found


def test_each_call_line_has_the_handle_right_above_it_and_no_other_line_has_one():
    handled = calls_handled(MODULE)
    assert handled == {
        line_of(MODULE, "cpp_fused_embedding_0(arg0_1"): "cpp_fused_embedding_0:1",
        line_of(MODULE, "extern_kernels.mm(reinterpret_tensor(buf0"): "extern_kernels.mm:2",
        line_of(MODULE, "extern_kernels.mm(reinterpret_tensor(buf6"): "extern_kernels.mm:5",
    }


def test_a_fused_kernel_names_its_fx_nodes_lines_by_its_profiled_name():
    generated = Generated.of({FILE: MODULE}, [PROVENANCE])
    # the profiled name carries the graph's id; the module's code records that very name
    fused = Event("graph_0_cpp_fused_embedding_0", 0.0, 1.0)
    assert lines_of(fused, None, generated) == {("gptfast.py", 49)}
    # a name no module records whole (a Triton kernel's, or another graph id's): every call of
    # the bare kernel name in every module
    other = Event("graph_7_cpp_fused_embedding_0", 0.0, 1.0)
    assert lines_of(other, None, generated) == {("gptfast.py", 49)}


def test_an_extern_call_names_its_fx_nodes_lines_through_the_handle_above_its_generated_line():
    generated = Generated.of({FILE: MODULE}, [PROVENANCE])
    mm = Event("aten::mm", 0.0, 1.0)

    def at(start: str) -> Site:
        return Site(f"/tmp/torchinductor_me/mg/{FILE}", line_of(MODULE, start), "call")

    assert lines_of(mm, at("extern_kernels.mm(reinterpret_tensor(buf0"), generated) == {
        ("gptfast.py", 50)
    }
    # a library's frame inside the trace is passed over for the model's own
    assert lines_of(mm, at("extern_kernels.mm(reinterpret_tensor(buf6"), generated) == {
        ("gptfast.py", 56)
    }
    # a line Inductor wrote with no kernel call of an FX node's: its own buffer
    assert lines_of(mm, at("buf1 = empty_strided_cpu"), generated) == NO_NODE
    # handles, but no graph's provenance holds them all: no provenance, never a guess
    partial = {k: v for k, v in PROVENANCE.items() if k != "extern_kernels.mm:5"}
    assert lines_of(mm, at("extern_kernels.mm(reinterpret_tensor(buf0"),
                    Generated.of({FILE: MODULE}, [partial])) == NO_PROVENANCE  # fmt: skip
    # a module with no handle at all was built without provenance tracking
    unhandled = MODULE.replace("# [Provenance debug handles]", "#")
    assert lines_of(mm, at("extern_kernels.mm(reinterpret_tensor(buf0"),
                    Generated.of({FILE: unhandled}, [PROVENANCE])) == NO_PROVENANCE  # fmt: skip
    # a handle whose FX nodes carry no stack trace
    bare = {**PROVENANCE, "extern_kernels.mm:2": []}
    assert lines_of(mm, at("extern_kernels.mm(reinterpret_tensor(buf0"),
                    Generated.of({FILE: MODULE}, [bare])) == NO_TRACE  # fmt: skip


def test_an_eager_op_names_its_call_line_or_says_why_not():
    generated = Generated.of({}, [])
    op = Event("aten::index_put_", 0.0, 1.0)
    assert lines_of(op, Site(MODEL, 31, "update"), generated) == {("gptfast.py", 31)}
    assert lines_of(op, Site(MODEL, 30, "update", called=False), generated) == (
        "none: an operator in update() (gptfast.py:30 def), lines in off only"
    )
    assert lines_of(op, Site(), generated) == LIBRARY
    assert lines_of(op, None, generated) == NO_STACK


def test_a_kernel_rows_lines_are_every_line_its_ops_came_from_and_its_shapes_part_it():
    sites = {1: Site(MODEL, 31, "update"), 2: Site(MODEL, 32, "update"), 3: Site(MODEL, 61, "f"),
             4: Site()}  # fmt: skip
    ops = [
        Event("aten::index_put_", 0, 1, shapes=((2, 8), (2,)), correlation=1),
        Event("aten::index_put_", 1, 2, shapes=((2, 8), (2,)), correlation=2),
        Event("aten::index_put_", 2, 3, shapes=((4, 8), (4,)), correlation=3),
        Event("aten::empty", 3, 4, correlation=4),  # a library's own
        Event("aten::empty", 4, 5, correlation=1),  # ... and the same row from the user's line
        Event("aten::zeros", 5, 6, correlation=4),
    ]
    assert kernel_lines(ops, sites, {}, []) == {
        ("aten::index_put_", ((2, 8), (2,)), ()): "gptfast.py:31,32",
        ("aten::index_put_", ((4, 8), (4,)), ()): "gptfast.py:61",
        ("aten::empty", (), ()): "gptfast.py:31",  # a line beats a reason
        ("aten::zeros", (), ()): LIBRARY,
    }


def test_lines_are_worded_by_file_and_traces_read_inside_out():
    assert worded({("b.py", 3), ("a.py", 12), ("a.py", 2)}) == "a.py:2,12; b.py:3"
    assert innermost_user(PROVENANCE["extern_kernels.mm:5"][0]) == ("gptfast.py", 56)
    stdlib = inspect.getfile(inspect)
    assert innermost_user(trace((stdlib, 81, "inner", "..."))) is None


def test_library_frames_are_torchs_packages_pythons_and_nanobenchs_own():
    import nanobench.profile.session as harness

    assert is_library(torch.nn.functional.__file__)
    assert is_library("/x/lib/python3.11/site-packages/transformers/models/llama.py")
    assert is_library(inspect.getfile(inspect))  # Python's own library
    assert is_library(harness.__file__)  # nanobench's ranges around the user's step
    assert is_library("<eval_with_key>.3") and is_library("")
    assert not is_library(MODEL) and not is_library("engine/model.py")
    assert not is_library(f"/tmp/torchinductor_me/mg/{FILE}")  # generated code: read, not skipped


class Cache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("k", torch.zeros(2, 4, 8))

    def forward(self, pos, x):
        self.k[:, pos] = self.proj(x)[:, None]  # a subscript: no call of its own to profile
        return self.k.sum(1)


def sited(mode) -> dict[str, set[Site]]:
    """Each op's call sites in one profiled forward of `Cache`, by op name."""
    model, x, pos = Cache(), torch.ones(2, 8), torch.tensor([1])
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        with mode:
            model(pos, x)
    sites, found = call_sites(prof), {}
    for e in prof.events():
        if e.id in sites:
            found.setdefault(e.name, set()).add(sites[e.id])
    return found


def test_an_eager_ops_site_is_the_line_that_called_it_not_its_functions_first():
    lines, first = inspect.getsourcelines(Cache.forward)
    subscript = first + next(i for i, ln in enumerate(lines) if "self.k[:, pos] =" in ln)
    summed = first + next(i for i, ln in enumerate(lines) if "self.k.sum(1)" in ln)
    here = os.path.basename(__file__)
    found = sited(CallLines())
    # the Linear's GEMM: called from the subscript's line, through nn.Module and F.linear
    assert {(os.path.basename(s.path), s.line, s.called) for s in found["aten::addmm"]} == {
        (here, subscript, True)
    }
    assert {s.line for s in found["aten::index_put_"]} == {subscript}
    assert {s.line for s in found["aten::sum"]} == {summed}
    # without the mode a subscript makes no Python call: the op ran in forward itself, whose
    # first line is all the profiler names
    plain = sited(torch.autograd.profiler.record_function("plain"))
    assert {(s.line, s.called) for s in plain["aten::index_put_"]} == {(first, False)}
    assert {s.line for s in plain["aten::sum"]} == {summed}  # a method call is a call


def test_events_from_profiler_take_the_call_line_as_an_ops_frame():
    model, x, pos = Cache(), torch.ones(2, 8), torch.tensor([1])
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        with CallLines():
            model(pos, x)
    sites = call_sites(prof)
    frames = {i: s.frame for i, s in sites.items() if s.path}
    lines, first = inspect.getsourcelines(Cache.forward)
    subscript = first + next(i for i, ln in enumerate(lines) if "self.k[:, pos] =" in ln)
    (put,) = [
        e for e in events_from_profiler(prof.events(), frames) if e.name == "aten::index_put_"
    ]
    assert put.stack == (f"test_profile_lines.py:{subscript}",)


def test_a_kernel_row_without_its_user_line_fails_loudly_when_rebuilt():
    row = KernelRow(name="aten::mm", kind="extern kernels", calls_per_step=1.0,
                    ms_per_step=0.5, user_line="gptfast.py:50")  # fmt: skip
    assert "user_line" in columns(KernelRow)
    payload = asdict(row)
    assert rebuild(KernelRow, payload) == row
    del payload["user_line"]
    with pytest.raises(RowSchemaError, match="user_line"):
        rebuild(KernelRow, payload)
    with pytest.raises(TypeError):
        KernelRow(name="aten::mm", kind="extern kernels", calls_per_step=1.0, ms_per_step=0.5)


def test_a_site_is_the_first_caller_outside_the_libraries_walking_out():
    py, c = "py", "c"

    def frame(path, line, fn="f"):
        return SimpleNamespace(file_name=path, line_number=line, function_name=fn)

    def event(tag, parent, caller, callsite=None):
        return SimpleNamespace(tag=tag, parent=parent,
                               extra_fields=SimpleNamespace(caller=caller, callsite=callsite))  # fmt: skip

    torch_file = torch.nn.functional.__file__
    project = event(py, None, frame(MODEL, 59), frame(MODEL, 47, "project"))
    module = event(py, project, frame(MODEL, 50), frame(torch_file, 1774))
    linear = event(c, module, frame(torch_file, 134))
    assert site_of(SimpleNamespace(parent=linear), py, c) == Site(MODEL, 50, "f")
    # an op right under the user's own function: its first line, and said so
    assert site_of(SimpleNamespace(parent=project), py, c) == Site(MODEL, 47, "project", False)
    assert site_of(SimpleNamespace(parent=None), py, c) == Site()


def test_each_kernel_row_carries_its_keys_user_line_or_says_it_was_not_traced():
    from nanobench.profile.attribution import NOT_TRACED, attribute
    from nanobench.profile.rows import FORWARD_RANGE, STEP_RANGE

    mm = ((4, 8), (8, 2))
    events = [
        Event(STEP_RANGE, 0, 100),
        Event(FORWARD_RANGE, 1, 99),
        Event("aten::mm", 2, 10, shapes=mm, dtypes=("float", "float")),
        Event("aten::mm", 10, 20, shapes=((1, 8), (8, 2)), dtypes=("float", "float")),
        Event("graph_0_cpp_fused_embedding_0", 20, 30),
    ]
    lines = {("aten::mm", mm, ("float", "float")): "gptfast.py:50",
             ("graph_0_cpp_fused_embedding_0",): "gptfast.py:49"}  # fmt: skip
    _, kernels, _ = attribute(events, [True], lines=lines)
    found = {(k.name, k.flops): k.user_line for k in kernels}
    assert found == {
        ("aten::mm", 2 * 4 * 8 * 2): "gptfast.py:50",
        ("aten::mm", 2 * 1 * 8 * 2): NOT_TRACED,  # another shape: another row, not seen
        ("graph_0_cpp_fused_embedding_0", None): "gptfast.py:49",
    }
