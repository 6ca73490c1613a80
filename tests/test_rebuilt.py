"""Which steps rebuilt and why, in words: each case counted by hand from dynamo's reasons.

The reasons below are dynamo's own (torch 2.13, `get_compilation_metrics()`), recorded on
`tests/corpus/item_cache_slice.py:factory` over 10 steps at two rows and a four-token prompt: static rebuilds the
resume function at every step (the int `pos` read by `.item()` guarded by value) and falls back
at step 8; dynamic=True over a cache sized exactly to the run rebuilds once, at the last step,
where the slice `cache[:, :, : pos + 1]` covers the whole cache (a stride guard).
"""

from __future__ import annotations

from nanobench.harness.step.rebuilt import boundary, pattern, quote_run, step_run, steps_text
from nanobench.harness.step.remedies import DYNAMIC_ROW, remedies_for, value_guard

EVERY = [
    f"1/{n - 1}: ___stack0 == {3 + n}      # self.k_cache[:, :, pos : pos + 1] = k  "
    "# corpus/item_cache_slice.py:40 in forward"
    for n in range(1, 9)
]  # steps 1..8; the last is the attempt past recompile_limit 8
ONCE = (
    "1/0: 224 != (16 + 16*___stack0)  # y = F.softmax(scores, dim=-1) @ values  # (B, H, 1, D)  "
    "# corpus/item_cache_slice.py:45 in forward (_decomp/decompositions.py:5305 in matmul)"
)


def test_a_guard_that_fails_once_at_the_last_step_is_said_once_where_it_reached_its_end():
    # 10 steps: two frames at step 0 (the graph before the break and its resume), one rebuild
    # at step 9, nothing else
    run = step_run(10, [2] + [0] * 8 + [1], [ONCE], [9], fell_back=False)
    assert run.builds == 3 and run.helps is True
    assert run.words() == (
        "built 3 (step 0: 2 frames; step 9: `224 != (16 + 16*___stack0)` at "
        "item_cache_slice.py:45, once, at the last step, where (16 + 16*___stack0) reached 224), "
        "no fall-back"
    )
    said = quote_run(f"pos changes every step; {DYNAMIC_ROW}", run, "a dry run")
    assert said.endswith("no fall-back; compile with dynamic=True")
    assert "does not help" not in said and "cannot help" not in said


def test_a_guard_that_fails_every_step_is_said_so_with_the_step_it_fell_back_at():
    # step 8's reason is the attempt past the limit: it built nothing, so the fall-back is there,
    # and the rebuilds are steps 1..7's
    run = step_run(10, [2, 1, 1, 1, 1, 1, 1, 1, 0, 0], EVERY, list(range(1, 9)), fell_back=True)
    assert run.fell_back_at == 8 and run.builds == 9 and run.helps is False
    assert run.words() == (
        "built 9 (step 0: 2 frames; steps 1..7: `___stack0 == N` at item_cache_slice.py:40, "
        "every step), fell back at step 8"
    )
    said = quote_run(DYNAMIC_ROW, run, "a dry run")
    assert said.startswith("does not help") and "again at corpus/item_cache_slice.py:40" in said


def test_one_failure_in_too_few_steps_is_not_called_once():
    run = step_run(2, [2, 1], [ONCE], [1], fell_back=False)
    assert run.helps is None
    assert "once in 2 steps (too few to tell once from every step)" in run.words()
    assert "compile with dynamic=True" not in quote_run(DYNAMIC_ROW, run, "a dry run")


def test_steps_and_patterns_read_as_written():
    assert steps_text([9]) == "step 9"
    assert steps_text([1, 2, 3]) == "steps 1..3"
    assert steps_text([3, 7]) == "steps 3, 7"
    assert pattern("L['pos'] == 17") == "L['pos'] == N"
    assert pattern("size mismatch at index 1. expected 17, actual 18") == (
        "size mismatch at index 1. expected N, actual N"
    )
    assert pattern("160 != (16 + 16*___stack0)") == "160 != (16 + 16*___stack0)"


def test_a_boundary_remedy_never_says_every_step_or_cannot_help():
    run = step_run(10, [2] + [0] * 8 + [1], [ONCE], [9], fell_back=False)
    (once,) = run.rebuilt
    r = boundary(once, run)
    assert r.kind == "boundary" and r.where.startswith("corpus/item_cache_slice.py:45")
    assert "once, at the last step" in r.fix and "no fall-back" in r.fix
    assert "every step" not in r.fix and "cannot help" not in r.fix


def test_a_guard_that_fails_every_step_quotes_its_steps_beside_the_words():
    run = step_run(10, [2, 1, 1, 1, 1, 1, 1, 1, 0, 0], EVERY, list(range(1, 9)), fell_back=True)
    g = value_guard(EVERY[0])
    (symbolic, _) = remedies_for(fell_back=True, guard_kind="value", value_guards=[g],
                                 failed_at={g.expression: run.failed_at(g.expression)})  # fmt: skip
    assert symbolic.kind == "symbolic"
    assert (
        "changes every step (steps 1..7: `___stack0 == N` at item_cache_slice.py:40, every "
        "step, fell back at step 8)" in symbolic.fix
    )
