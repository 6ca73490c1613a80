"""Compile arithmetic, build prediction, guard classification and gates (Days 49-50)."""

from __future__ import annotations

import math

import pytest

from engine.buckets import DecodeBuckets
from nanobench.cost.buckets import open_shapes
from nanobench.cost.compile import (
    CompileUnsound,
    breakeven_steps,
    check_compile_amortised,
    check_graph_reused,
    check_no_fallback,
    check_shapes_bucketed,
    check_single_graph,
    classify_guard,
    compile_cost_s,
    distinct_shapes,
    net_saving_s,
    predicts_fall_back,
    requested_builds,
    saving_per_step_s,
    step_speedup,
    worth_compiling,
)

# --- arithmetic -------------------------------------------------------------------------------


def test_compile_cost_is_the_sum_of_frames():
    assert compile_cost_s([1.5, 2.25, 0.25]) == 4.0
    assert compile_cost_s([]) == 0.0
    with pytest.raises(ValueError, match="non-negative"):
        compile_cost_s([1.0, -0.1])


def test_amdahl_edges():
    assert step_speedup(3.0, 1.0) == pytest.approx(3.0)
    assert step_speedup(3.0, 0.0) == 1.0
    assert step_speedup(2.0, 0.5) == pytest.approx(1 / 0.75)


def test_amdahl_ceiling_is_one_over_the_loop_share():
    # Day 49: loop_share 0.0008 on CPU; an infinitely fast forward is capped at 1/loop_share.
    assert step_speedup(math.inf, 1 - 0.0008) == pytest.approx(1 / 0.0008)
    assert step_speedup(math.inf, 1.0) == math.inf


@pytest.mark.parametrize(("speedup", "share"), [(0.0, 0.5), (-1.0, 0.5), (2.0, 1.1), (2.0, -0.1)])
def test_amdahl_rejects_bad_inputs(speedup, share):
    with pytest.raises(ValueError):
        step_speedup(speedup, share)


def test_day50_compiled_step_never_pays_back():
    # Llama-3.2-1B on CPU: 861.81 ms eager, 863.34 ms compiled after 44.01 s of compile.
    saving = saving_per_step_s(0.86181, 0.86334)
    assert saving == pytest.approx(-0.00153)
    assert breakeven_steps(44.01, saving) == math.inf
    assert not worth_compiling(1_000_000, 44.01, saving)
    with pytest.raises(CompileUnsound, match="never"):
        check_compile_amortised(breakeven_steps(44.01, saving), 10_000)


def test_breakeven_and_net_saving():
    assert breakeven_steps(10.0, 0.5) == 20.0
    assert breakeven_steps(0.0, 0.5) == 0.0
    assert breakeven_steps(10.0, 0.0) == math.inf
    assert net_saving_s(20, 10.0, 0.5) == 0.0
    assert net_saving_s(30, 10.0, 0.5) == 5.0
    assert not worth_compiling(20, 10.0, 0.5)
    assert worth_compiling(21, 10.0, 0.5)
    check_compile_amortised(20.0, 20)
    with pytest.raises(CompileUnsound, match="after 20 steps, run plans 19"):
        check_compile_amortised(20.0, 19)


# --- build prediction -------------------------------------------------------------------------


def widths(steps: int, prompt_len: int = 16, rows: int = 4) -> list[tuple[int, int]]:
    return open_shapes(rows, prompt_len, steps)


def test_distinct_shapes():
    assert distinct_shapes(widths(11)) == 11
    assert distinct_shapes([(4, 128)] * 5 + [(4, 256)]) == 2
    assert distinct_shapes([]) == 0


def test_day50_shape_guard_sweep():
    history = widths(11)
    assert requested_builds(history, "off") == 0
    assert requested_builds(history, "dynamic") == 1
    assert requested_builds(history, "static") == 11
    assert not predicts_fall_back(history, "off")
    assert not predicts_fall_back(history, "dynamic")
    assert predicts_fall_back(history, "static", recompile_limit=8)


def test_day49_value_guard_rebuilds_in_both_modes():
    # tables[0].num_tokens == 13: dynamic=True cannot make a Python int symbolic.
    history = widths(9, rows=2)
    for mode in ("dynamic", "static"):
        assert requested_builds(history, mode, guard_kind="value") == 9
        assert predicts_fall_back(history, mode, 8, guard_kind="value")


def test_limit_is_inclusive():
    # Eight distinct shapes fill an 8-entry cache without falling back; the ninth does not fit.
    assert not predicts_fall_back(widths(8), "static", 8)
    assert predicts_fall_back(widths(9), "static", 8)


def test_bucketed_history_stays_under_the_limit():
    buckets = DecodeBuckets(8, 528, 128)
    history = [buckets.shape_for(r, w) for r, w in open_shapes(3, 16, 512)]
    assert requested_builds(history, "static") == 5
    assert not predicts_fall_back(history, "static")


@pytest.mark.parametrize(
    "rows",
    [(4,), (2, 4), (1,), (1, 4), (1, 2, 3, 4, 6, 8), (4, 1, 4, 1)],
    ids=["one-size", "sizes-above-1", "only-1", "1-and-4", "trace-1-to-8", "1-returns"],
)
def test_dynamic_builds_match_dynamo_counting_0_1_specialisation(rows):
    # The peer: dynamo's own CompileCounter over the same (rows, width) history, dynamic=True.
    import torch
    from torch._dynamo.testing import CompileCounter

    history = [s for r in rows for s in open_shapes(r, 16, 3)]
    counter = CompileCounter()
    torch._dynamo.reset()
    step = torch.compile(lambda x: (x * 2).sum(-1), backend=counter, dynamic=True)
    for r, w in history:
        step(torch.randn(r, w))  # (B, W)
    torch._dynamo.reset()
    assert requested_builds(history, "dynamic") == counter.frame_count
    assert counter.frame_count == (2 if 1 in rows and max(rows) > 1 else 1)


def test_no_failing_guard_builds_once_and_empty_history_builds_nothing():
    assert requested_builds(widths(11), "static", guard_kind="none") == 1
    assert requested_builds([], "static") == 0
    assert requested_builds([], "dynamic", guard_kind="value") == 0


@pytest.mark.parametrize(
    "kwargs",
    [dict(mode="eager"), dict(mode="static", guard_kind="size"), dict(mode="static", limit=0)],
)
def test_prediction_rejects_unknown_inputs(kwargs):
    limit = kwargs.pop("limit", 8)
    with pytest.raises(ValueError):
        predicts_fall_back(widths(3), recompile_limit=limit, **kwargs)


# --- recompile reasons ------------------------------------------------------------------------

# Shapes of the strings as dynamo writes them (torch 2.x recompile_reason), and as the logs quote.
SHAPE_REASONS = [
    "tensor 'L['plan'].slot_mapping' size mismatch at index 1. expected 17, actual 18",
    "tensor 'kwargs['cache'].plan.slot_mapping' size mismatch at index 1. expected 4, actual 5",
    "0/1: tensor 'plan.slot_mapping' size mismatch at index 1. expected 18, actual 19",
    "0/2: tensor 'L['x']' stride mismatch at index 0. expected 8, actual 16",
    "0/1: tensor 'L['x']' rank mismatch. expected 2, actual 3",
    "0/1: 2 <= plan.slot_mapping.size()[1]  # def f(plan, x): return plan.slot_mapping.sum() + x"
    "  # mp/rr.py:7 in f (user code shown is first use of this value--the guard itself is not due"
    " user code but due to 0/1 specialization in the framework)",
    # torch 2.13's note goes on "; to avoid specialization try ..." inside its parentheses: that
    # "; " joins no second guard (vLLM's evaluate_guards, a decode step of one row)
    "0/0: 2 <= input_ids.size()[0]  # return self.quant_method.embedding(self, input_.long())  #"
    " vllm/model_executor/layers/vocab_parallel_embedding.py:525 in forward (user code shown is"
    " first use of this value--the guard itself is not due user code but due to 0/1"
    " specialization in the framework; to avoid specialization try"
    " torch._dynamo.decorators.mark_unbacked(tensor, dim))",
]
VALUE_REASONS = [
    "kwargs['cache'].cache.tables[0].num_tokens == 13",
    "L['cache'].tables[0].num_tokens == 13",
    "0/0: t.num_tokens == 13                                       # def g(t, x): return x * "
    't.num_tokens  # mp/rr.py:8 in g\nUser stack trace:\n  File "/tmp/rr.py", line 8, in g\n'
    "    def g(t, x): return x * t.num_tokens",
    "0/0: len(rows) == 2                                           # def h(rows, x): return "
    "x[: len(rows)] + 1  # mp/rr.py:9 in h",
    "0/0: len(L['rows']) == 3",
    "0/3: ___check_obj_id(L['self'].mode, 140234117601408)",
    "0/0: ___check_type_id(m, 94152705526672), type=<class 'torch.nn.modules.activation.ReLU'>",
    "0/0: tensor 'x' dtype mismatch. expected Float, actual Double",
]


@pytest.mark.parametrize("reason", SHAPE_REASONS)
def test_size_guards_are_shape(reason):
    assert classify_guard(reason) == "shape"


@pytest.mark.parametrize("reason", VALUE_REASONS)
def test_python_value_guards_are_value(reason):
    assert classify_guard(reason) == "value"


@pytest.mark.parametrize("reason", [None, "", "   ", "\n"])
def test_no_reason_is_none(reason):
    assert classify_guard(reason) == "none"


def test_source_comment_does_not_decide_the_kind():
    # The user code quoted after '#' mentions a size; the guard itself is on an int.
    reason = "0/4: L['n'] == 13  # x = plan.slot_mapping.size()[1]  # engine/model.py:41 in fwd"
    assert classify_guard(reason) == "value"


def test_any_value_guard_makes_the_reason_value():
    # Verbose mode joins every failed guard of an entry with '; '.
    joined = "0/1: tensor 'L['x']' size mismatch at index 1. expected 4, actual 5; L['n'] == 4"
    assert classify_guard(joined) == "value"


# --- gates ------------------------------------------------------------------------------------


def test_check_single_graph():
    check_single_graph(1, 0)
    with pytest.raises(CompileUnsound, match="13 graphs with 12 breaks"):
        check_single_graph(13, 12)
    # inside explain the breaks are in the table it just printed: no "run nanobench explain"
    with pytest.raises(CompileUnsound, match="2 graphs with 1 break, .*named in the breaks above"):
        check_single_graph(2, 1)


def test_check_no_fallback():
    check_no_fallback(False)
    with pytest.raises(CompileUnsound, match="num_tokens == 13"):
        check_no_fallback(True, "L['cache'].tables[0].num_tokens == 13")


def test_check_graph_reused():
    check_graph_reused(1, 11)
    check_graph_reused(2, 11, max_builds=2)
    with pytest.raises(CompileUnsound, match="8 builds over 9 steps, expected at most 1"):
        check_graph_reused(8, 9)


def test_check_shapes_bucketed():
    buckets = DecodeBuckets(8, 528, 128)
    check_shapes_bucketed([(4, 128), (4, 528)], buckets)
    with pytest.raises(CompileUnsound, match=r"1 of 2 shapes.*\(3, 17\)"):
        check_shapes_bucketed([(4, 128), (3, 17)], buckets)


def test_compile_errors_are_runtime_errors():
    assert issubclass(CompileUnsound, RuntimeError)
