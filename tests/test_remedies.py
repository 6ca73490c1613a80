"""Remedies are pure: each case below is counted by hand from the rule it encodes."""

from __future__ import annotations

import pytest

from nanobench.harness.remedies import Growth, remedies_for, width_multiple_for

INT_BREAK = {
    "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    "frame": "step.py:12",
    "source": "n = int(lens.max())",
    "count": 1,
}
OTHER_BREAK = {
    "reason": "Unsupported call to a builtin: print",
    "frame": "step.py:20",
    "source": "print(x)",
    "count": 1,
}


def kinds(found) -> list[str]:
    return [r.kind for r in found]


@pytest.mark.parametrize(
    "sizes,limit,expected",
    [
        # 17..28 at 1: 12 shapes > 8; at 2: 18, 20, ..., 28 = 6 shapes.
        (range(17, 29), 8, 2),
        # 17..48 at 4: 20, 24, ..., 48 = 8 shapes, at 2 it would be 16.
        (range(17, 49), 8, 4),
        # Already within the limit: no padding at all.
        (range(17, 21), 8, 1),
        # One shape allowed: 1..100 all round to 128.
        (range(1, 101), 1, 128),
    ],
)
def test_width_multiple_is_the_least_padding_that_fits(sizes, limit, expected):
    assert width_multiple_for(sizes, limit) == expected


def test_width_multiple_refuses_nonsense():
    with pytest.raises(ValueError):
        width_multiple_for([], 8)
    with pytest.raises(ValueError):
        width_multiple_for([3], 0)


def test_nothing_to_fix_gets_no_remedy():
    assert remedies_for(fell_back=False, guard_kind="none", breaks=[OTHER_BREAK]) == []


def test_a_host_read_is_planned_outside_with_its_line():
    (r,) = remedies_for(fell_back=False, guard_kind="none", breaks=[INT_BREAK, OTHER_BREAK])
    assert r.kind == "plan-outside" and r.where == "step.py:12: n = int(lens.max())"


def test_a_value_guard_is_planned_outside_and_a_fall_back_fails_fast():
    found = remedies_for(fell_back=True, guard_kind="value", value_guards=["L['n'] == 17"], limit=8)
    assert kinds(found) == ["plan-outside", "fail-fast"]
    assert found[0].where == "L['n'] == 17"
    # dynamic=True cannot help a value guard, so no mark-dynamic and no bucket.


def test_a_shape_fall_back_offers_dynamic_and_a_bucket_from_the_arithmetic():
    found = remedies_for(
        fell_back=True,
        guard_kind="shape",
        growth=[Growth("args[0]", 1, 17, 28)],
        limit=8,
        inputs_where="step.py:30",
    )
    assert kinds(found) == ["mark-dynamic", "bucket", "fail-fast"]
    assert "torch._dynamo.mark_dynamic(args[0], 1)" in found[0].fix
    assert found[0].where == "step.py:30: args[0] dim 1"
    assert "multiple of 2" in found[1].fix and "(12 shapes) become 6" in found[1].fix


def test_inputs_that_grow_alike_share_one_pair_of_fixes():
    growth = [Growth(f"cache.layers[{i}].{kv}", 2, 16, 25) for i in range(4) for kv in "kv"]
    growth.append(Growth("mask", 1, 1, 10))
    found = remedies_for(fell_back=True, guard_kind="shape", growth=growth, limit=8)
    assert kinds(found) == ["mark-dynamic", "bucket", "mark-dynamic", "bucket", "fail-fast"]
    assert found[0].where == ": cache.layers[0].k (and 7 more alike) dim 2"
    # 16..25 at 2: 16, 18, ..., 26 = 6 shapes; 1..10 at 2: 2, 4, ..., 10 = 5 shapes.
    assert "become 6" in found[1].fix and "become 5" in found[3].fix


def test_the_engine_is_told_its_own_flags():
    found = remedies_for(
        fell_back=True,
        guard_kind="shape",
        growth=[Growth("width", 1, 17, 48)],
        limit=8,
        inputs_where="engine/plan.py: plan_decode",
        engine=True,
    )
    assert "--modes dynamic" in found[0].fix
    assert "--bucketed --width-multiple 4" in found[1].fix


def test_a_shape_guard_that_stayed_within_the_limit_needs_no_fix():
    found = remedies_for(
        fell_back=False, guard_kind="shape", growth=[Growth("args[0]", 1, 17, 20)], limit=8
    )
    assert found == []
