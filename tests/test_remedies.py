"""Remedies are pure: each case below is counted by hand from the rule it encodes."""

from __future__ import annotations

import pytest

from nanobench.harness.step.remedies import (
    Growth,
    ValueGuard,
    quote_dynamic_row,
    remedies_for,
    symbolic_source,
    value_guard,
    width_multiple_for,
)

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


# dynamo's own reasons (torch 2.13), as get_compilation_metrics() records them.
INT_REASON = (
    "0/1: pos == 17                                                # self.k_cache[:, :, pos : "
    "pos + 1] = k  # corpus/int_position.py:20 in forward\nUser stack trace:\n  File x"
)
LEN_REASON = "0/0: len(keys) == 16      # keys.append(k)  # corpus/list_cache.py:23 in forward\n"
MODULE_REASON = (
    "0/0: s.n == 0    # return x[:, s.n]  # spec.py:7 in forward (HINT: torch.compile considers "
    "integer attributes of the nn.Module to be static. If you are observing recompilation)"
)
ITEM_REASON = (
    "1/3: ___stack0 == 19   # n = pos.max().item() + 1  # the host read  # "
    "corpus/item_in_step.py:23 in torch_dynamo_resume_in_forward_at_23"
)


def test_a_reason_names_its_guard_source_line_and_file_line():
    g = value_guard(INT_REASON)
    assert g == ValueGuard(
        "pos == 17", "corpus/int_position.py:20: self.k_cache[:, :, pos : pos + 1] = k", True
    )
    assert g.expression == "pos"
    # A source line with a '#' of its own: the location is dynamo's last "# file:line in".
    item = value_guard(ITEM_REASON)
    assert item.where == "corpus/item_in_step.py:23: n = pos.max().item() + 1 # the host read"
    assert value_guard(LEN_REASON).where == "corpus/list_cache.py:23: keys.append(k)"


@pytest.mark.parametrize(
    "guard,reason,symbolic",
    [
        # Measured on torch 2.13 (dynamic=True, 12 values): one build for each of these ...
        ("pos == 17", "", True),
        ("L['pos'] == 19", "", True),
        ("o.n == 3", "", True),
        ("l[0] == 3", "", True),
        ("L['d']['n'] == 3", "", True),
        ("L['temperature'] == 0.8", "", True),
        # ... and 8 builds and a fall-back for these: a length, a module's int, a string.
        ("len(keys) == 16", "", False),
        ("s.n == 0", MODULE_REASON, False),
        ("self.n == 0", "", False),
        ("L['mode'] == 'greedy'", "", False),
    ],
)
def test_dynamic_helps_only_what_dynamo_does_not_specialise(guard, reason, symbolic):
    assert symbolic_source(guard, reason) is symbolic


def test_a_symbolic_remedy_says_what_the_dynamic_row_measured():
    (r,) = remedies_for(fell_back=False, guard_kind="value", value_guards=[value_guard(INT_REASON)])
    assert r.kind == "symbolic" and r.where.startswith("corpus/int_position.py:20")
    helped = quote_dynamic_row(r.text(), 1, False)
    assert "this sweep's dynamic row built 1, no fall-back" in helped and "cannot" not in helped
    # The dynamic row fell back: the remedy must not claim dynamic=True helps.
    failed = quote_dynamic_row(r.text(), 8, True)
    assert "built 8 and fell back" in failed and "pass it as a tensor" in failed
    assert "--modes dynamic" in quote_dynamic_row(r.text(), None, None)
    # The dynamic row already makes it symbolic: nothing for it to fix.
    assert (
        remedies_for(
            fell_back=False,
            guard_kind="none",
            value_guards=[value_guard(INT_REASON)],
            mode="dynamic",
        )
        == []
    )


def test_a_specialised_value_says_dynamic_cannot_help_once_per_source():
    found = remedies_for(
        fell_back=True,
        guard_kind="value",
        value_guards=[value_guard(LEN_REASON), value_guard(LEN_REASON.replace("16", "17"))],
        mode="dynamic",
    )
    assert kinds(found) == ["plan-outside", "fail-fast"]
    assert "dynamic=True cannot help" in found[0].fix
    assert found[0].where == "corpus/list_cache.py:23: keys.append(k)"


def test_a_value_carried_across_a_break_is_named_by_the_line_that_made_it():
    (r,) = remedies_for(
        fell_back=False, guard_kind="value", value_guards=[value_guard(ITEM_REASON)]
    )
    # dynamo's ___stack0 is no name of the user's: the .item() line it came from is
    assert r.fix.startswith(
        "___stack0 == 19 (`n = pos.max().item() + 1` at corpus/item_in_step.py:23, carried "
        "across the break) changes every step"
    )
    (plain,) = remedies_for(
        fell_back=False, guard_kind="value", value_guards=[value_guard(INT_REASON)]
    )
    assert plain.fix.startswith("pos == 17 changes every step")  # a user's own name, as it reads
