"""The pooled process variance: its arithmetic against independent sources, its null check,
and the test it must pass to be applied: systems whose processes truly differ are not pooled."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nanobench.harness.statistics import pooling
from nanobench.harness.statistics.pooling import process_pool
from nanobench.harness.statistics.stats import verdict_at_most
from nanobench.harness.statistics.verdicts import INCONCLUSIVE
from nanobench.harness.workers.rounds import Comparison, RoundPlan, Window, intervals, run_rounds
from tests.helpers import noisy_fleet

STEPS = 8
NULL_RUNS = 20
NULL_ROUNDS = 12
# More than 3 of 20 null runs claiming a difference at 95% has probability 1.6% (binomial).
NULL_ALLOWED = 3


def null_runs(processes: int, effects: dict[str, float], hits: float = 0.1, name: str = "a/b"):
    """Each seeded run's interval for a/b (identical systems: its truth is 1.0)."""
    cmp = [Comparison("a/b", "a", "b")]
    plan = RoundPlan(NULL_ROUNDS, NULL_ROUNDS, 0.03, 1e9)
    for seed in range(NULL_RUNS):
        windows = run_rounds(noisy_fleet(processes, seed, effects, hits, STEPS), plan, cmp)
        yield intervals(windows, cmp)[name]


def claims(found) -> int:
    return sum(verdict_at_most(i, 1.0) != INCONCLUSIVE for i in found)


ALIKE = {n: 0.05 for n in "abcde"}


@pytest.mark.parametrize("processes", [3, 4])
def test_a_pooled_null_comparison_decides_no_more_often_than_the_level(processes):
    found = list(null_runs(processes, ALIKE))
    pooled = [i for i in found if i.variance_from.startswith("pooled")]
    assert len(pooled) >= NULL_RUNS * 3 // 4, [i.variance_from for i in found]
    assert all(i.df >= (len(ALIKE) - 1) * (processes - 1) for i in pooled)
    assert claims(found) <= NULL_ALLOWED


def test_pooling_narrows_the_interval_of_three_processes_several_fold():
    # No neighbours: the process effects dominate, as they did in the runs that asked for this.
    pooled = list(null_runs(3, ALIKE, hits=0.0))
    alone = list(null_runs(3, {"a": 0.05, "b": 0.05}, hits=0.0))
    assert all(i.variance_from == "own: 3 processes" and i.df >= 2 for i in alone)

    def width(i):
        return math.log(i.high / i.low)

    ratio = np.median([width(a) for a in alone]) / np.median([width(p) for p in pooled])
    assert ratio > 1.5, ratio


# System a's processes vary 20 times as much as the others'; no neighbours to hide it.
UNLIKE = {"a": 0.20, "b": 0.01, "c": 0.01, "d": 0.01, "e": 0.01}


def test_systems_whose_processes_truly_differ_are_not_pooled_and_keep_the_level():
    found = list(null_runs(3, UNLIKE, hits=0.0))
    assert sum(i.variance_from.startswith("own") for i in found) >= NULL_RUNS * 3 // 4
    assert claims(found) <= NULL_ALLOWED


def test_pooling_processes_that_truly_differ_fails_the_null_check(monkeypatch):
    # The check off: one process variance lent to a system whose own is 20 times the rest's.
    monkeypatch.setattr(pooling, "POOL_ALPHA", 0.0)
    found = list(null_runs(3, UNLIKE, hits=0.0))
    assert all(i.variance_from.startswith("pooled") for i in found)
    assert claims(found) > NULL_ALLOWED


def test_the_pool_of_pure_process_effects_is_their_interaction_mean_square():
    # No drift, no within noise: z[s, r] = u[s, slot(r)], u double-centred by hand, so
    # SS_int = n sum u^2 over (S - 1)(K - 1) degrees of freedom and the residual is 0.
    u = np.array([[0.1, -0.1], [-0.3, 0.3], [0.2, -0.2]])  # (S, K): rows and columns sum to 0
    n = 3
    medians = {
        f"s{s}": {
            r: (10.0 * math.exp(u[s, (r - 1) % 2]), str((r - 1) % 2 + 1)) for r in range(1, 7)
        }
        for s in range(3)
    }
    pool = process_pool(medians)
    assert pool.systems == 3 and pool.processes == 2 and pool.rounds == 6
    assert pool.df_interaction == 2 and pool.df_residual == 8
    assert pool.ms_interaction == pytest.approx(n * (u**2).sum() / 2)
    assert pool.ms_residual == pytest.approx(0.0, abs=1e-12)
    assert pool.variance == pytest.approx((u**2).sum() / 2)


def test_a_comparison_is_checked_against_the_systems_it_leaves_out():
    # a's processes disagree by 40%, b..d's not at all: the a/b comparison fails the check
    # against b..d's interaction although the whole pool (a included) would have passed it.
    medians = {
        n: {r: (10.0 * (1.4 if n == "a" and r % 3 == 0 else 1.0) * (1 + 0.001 * r * i),
                str(r % 3 + 1)) for r in range(1, 13)}
        for i, n in enumerate("abcd")
    }  # fmt: skip
    windows = [
        Window(n, r, "ok", (m,), (0,), (True,), int(p)) for n, by in medians.items()
        for r, (m, p) in by.items()
    ]  # fmt: skip
    found = intervals(windows, [Comparison("a/b", "a", "b"), Comparison("c/d", "c", "d")])
    assert found["a/b"].variance_from == "own: 3 processes"
    assert found["c/d"].variance_from == "pooled: 4 systems x 3 processes"


def test_two_processes_keep_their_own_interval():
    found = list(null_runs(2, ALIKE))
    assert {i.variance_from for i in found} == {"own: 2 processes"}


def test_two_systems_or_one_process_make_no_usable_pool():
    two = {n: {r: (10.0 + r % 2, str(r % 2 + 1)) for r in range(1, 9)} for n in "ab"}
    assert not process_pool(two).usable
    one = {n: {r: (10.0 + r, "1") for r in range(1, 9)} for n in "abc"}
    assert process_pool(one) is None
