"""The capture list chosen for a batch mix (issue 25 item 6): the programme against brute force.

Expected values come from brute force over every list of sizes in 1..N (not only the sizes the
mix holds, so the lemma the programme rests on is checked too) with a step-by-step padding
count written here, or from hand counts; engine.capture_sizes.mix_pad_share is an independent
implementation of the pad share.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capture_sizes import mix_pad_share
from nanobench.cost.capture_list import (
    batch_histogram,
    computed_rows,
    optimal_sizes,
    optimal_sizes_within,
    pad_share,
    padded_rows,
    uncovered_steps,
)


def brute_padding(sizes: tuple[int, ...], mix: dict[int, int]) -> int:
    """Each step run at the smallest listed size at or above it, one step at a time."""
    total = 0
    for batch, steps in mix.items():
        for _ in range(steps):
            total += min(s for s in sizes if s >= batch) - batch
    return total


def brute_best(mix: dict[int, int], max_graphs: int) -> int:
    """The least padding of any list of at most max_graphs sizes in 1..N that holds N."""
    top = max(mix)
    below = range(1, top)
    return min(
        brute_padding((*rest, top), mix)
        for k in range(max_graphs)
        for rest in itertools.combinations(below, k)
    )


def test_hand_counts():
    mix = {1: 1, 3: 1}
    assert optimal_sizes(mix, 1) == (3,)
    assert padded_rows((3,), mix) == 2 and computed_rows((3,), mix) == 6
    assert pad_share((3,), mix) == 2 / 6
    assert optimal_sizes(mix, 2) == (1, 3) and padded_rows((1, 3), mix) == 0
    # 4 steps at 1 row and 1 at 8: with two graphs, 1 and 8 pad nothing.
    assert optimal_sizes({1: 4, 8: 1}, 2) == (1, 8)
    # 10 steps at 5, one at 6, one at 8, two graphs: {5, 8} pads 2, {6, 8} pads 10, {7, 8} 21.
    assert optimal_sizes({5: 10, 6: 1, 8: 1}, 2) == (5, 8)


def test_more_graphs_than_sizes_pads_nothing_and_ties_keep_the_shorter_list():
    mix = {2: 3, 7: 1, 9: 4}
    assert optimal_sizes(mix, 3) == (2, 7, 9) == optimal_sizes(mix, 10)
    assert padded_rows((2, 7, 9), mix) == 0
    # One batch size: one graph whatever K allows.
    assert optimal_sizes({4: 5}, 8) == (4,)


def test_a_batch_above_the_list_is_counted_apart():
    mix = {1: 2, 5: 1, 9: 3}
    assert uncovered_steps((1, 8), mix) == 3 and uncovered_steps((1, 9), mix) == 0
    assert padded_rows((1, 8), mix) == 3 and computed_rows((1, 8), mix) == 10
    batches = [1, 1, 5, 9, 9, 9]
    assert pad_share((1, 8), mix) == mix_pad_share((1, 8), batches) == 0.3


def test_histogram_of_a_trace_and_its_refusals():
    assert batch_histogram([3, 1, 3, 2]) == {1: 1, 2: 1, 3: 2}
    assert list(batch_histogram([9, 1, 4])) == [1, 4, 9]
    for bad in ([], [0], [2, -1], [1.5], [True]):
        with pytest.raises(ValueError):
            batch_histogram(bad)
    with pytest.raises(ValueError, match="max_graphs"):
        optimal_sizes({1: 1}, 0)


@pytest.mark.parametrize("max_graphs", [1, 2, 3, 4])
def test_the_optimum_equals_brute_force_on_every_list_of_small_sizes(max_graphs):
    mixes = [
        {1: 9, 2: 5, 3: 1, 7: 2, 10: 1},
        {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1, 9: 1, 10: 1},
        {3: 4, 4: 4, 9: 1, 11: 6},
        {12: 1},
        {1: 30, 12: 1},
    ]
    for mix in mixes:
        got = optimal_sizes(mix, max_graphs)
        assert len(got) <= max_graphs and got[-1] == max(mix), (mix, got)
        assert brute_padding(got, mix) == brute_best(mix, max_graphs), (mix, got)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(1, 11), st.integers(1, 20), min_size=1, max_size=8),
    st.integers(1, 5),
)
def test_the_optimum_equals_brute_force_on_random_mixes(mix, max_graphs):
    got = optimal_sizes(mix, max_graphs)
    assert len(got) <= max_graphs and got[-1] == max(mix)
    assert list(got) == sorted(set(got))
    assert padded_rows(got, mix) == brute_padding(got, mix) == brute_best(mix, max_graphs)


def brute_best_within(mix: dict[int, int], max_graphs: int, max_rows: int) -> int | None:
    """The least padding of any list in 1..N holding N, of at most max_graphs sizes summing to
    at most max_rows, or None when none does."""
    top = max(mix)
    found = [
        brute_padding((*rest, top), mix)
        for k in range(max_graphs)
        for rest in itertools.combinations(range(1, top), k)
        if sum(rest) + top <= max_rows
    ]
    return min(found) if found else None


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(1, 10), st.integers(1, 20), min_size=1, max_size=7),
    st.integers(1, 4),
    st.integers(0, 30),
)
def test_the_budgeted_optimum_equals_brute_force(mix, max_graphs, max_rows):
    got = optimal_sizes_within(mix, max_graphs, max_rows)
    want = brute_best_within(mix, max_graphs, max_rows)
    if want is None:
        assert got is None
        return
    assert got is not None and len(got) <= max_graphs and got[-1] == max(mix)
    assert sum(got) <= max_rows and brute_padding(got, mix) == want


def test_the_budget_binds_by_hand():
    mix = {1: 10, 2: 10, 8: 1}
    assert optimal_sizes(mix, 3) == (1, 2, 8)  # 11 rows held, no padding
    # 10 rows: {2, 8} pads the ten 1-row steps one row each; {1, 8} pads the 2-row steps 6 x 10.
    assert optimal_sizes_within(mix, 3, 10) == (2, 8)
    assert optimal_sizes_within(mix, 3, 11) == (1, 2, 8)
    assert optimal_sizes_within(mix, 3, 7) is None  # the largest batch alone needs 8 rows
    # Unbounded, the budgeted programme is the plain one.
    assert optimal_sizes_within(mix, 2, 10**6) == optimal_sizes(mix, 2)
