"""Statistics and tri-state verdicts, driven through the real timing loop by a fake clock.

Each fake system is `rounds.time_steps` over a clock that advances by a draw from a known
distribution: a true step time, per-step noise, and a drift per round that hits every system
of that round alike (a neighbour starting a job). The truth is known, so the verdicts are too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nanobench.harness.common import FAIL, INCONCLUSIVE, PASS, Gate, finish
from nanobench.harness.errors import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from nanobench.harness.rounds import (
    Comparison,
    RoundPlan,
    Window,
    intervals,
    run_rounds,
    time_steps,
)
from nanobench.harness.stats import (
    MIN_ROUNDS,
    Interval,
    difference_interval,
    ratio_interval,
    rounds_to_decide,
    spread,
    verdict_at_least,
    verdict_at_most,
)

STEPS = 16


def fake_systems(true_ms: dict[str, float], noise: float, seed: int, drift: float = 0.10):
    """name -> window(round): STEPS steps timed by time_steps on a clock the draws advance."""
    rng = np.random.default_rng(seed)
    now = [0.0]
    drifts: dict[int, float] = {}

    def system(name: str):
        def window(r: int) -> Window:
            factor = drifts.setdefault(r, 1.0 + drift * rng.uniform(-1, 1))

            def step() -> int:
                now[0] += true_ms[name] * factor * (1 + noise * rng.standard_normal()) / 1e3
                return 0

            ms, built = time_steps(step, STEPS, clock=lambda: now[0])
            return Window(name, r, "ok", tuple(ms), tuple(built), (True,) * STEPS)

        return window

    return {name: system(name) for name in true_ms}


def verdict(true_ratio: float, noise: float, seed: int, target: float = 1.0) -> str:
    systems = fake_systems({"a": 10.0 * true_ratio, "b": 10.0}, noise, seed)
    windows = run_rounds(systems, RoundPlan(3, 30, 0.03, 1e9), [Comparison("a/b", "a", "b")])
    return verdict_at_most(intervals(windows, [Comparison("a/b", "a", "b")])["a/b"], target)


def test_spread_is_the_hand_computed_median_quartiles_and_cv():
    s = spread([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.n, s.median_ms, s.q1_ms, s.q3_ms, s.iqr_ms) == (5, 3.0, 2.0, 4.0, 2.0)
    # mean 22; squared deviations 441 + 400 + 361 + 324 + 6084 = 7610 over n - 1 = 4
    assert s.cv == pytest.approx(math.sqrt(7610 / 4) / 22)
    assert spread([]) is None


def test_ratio_is_the_geometric_mean_of_per_round_ratios_paired_by_round():
    # per-round ratios 2, 4, 2, 4, 2: geometric mean (2^3 4^2)^(1/5) = 2^(7/5); the medians
    # of the columns, unpaired, would say 8 / 2 = 4
    num, den = [2.0, 8.0, 20.0, 40.0, 200.0], [1.0, 2.0, 10.0, 10.0, 100.0]
    i = ratio_interval(num, den)
    assert i.estimate == pytest.approx(2 ** (7 / 5)) and i.rounds == 5
    assert 2.0 <= i.low <= i.estimate <= i.high <= 4.0
    # the same ratio every round, whatever the drift: the interval is that point
    drifting = ratio_interval([1.0, 3.0, 9.0, 2.0, 5.0], [2.0, 6.0, 18.0, 4.0, 10.0])
    assert drifting.low == pytest.approx(0.5) and drifting.high == pytest.approx(0.5)
    # fewer than MIN_ROUNDS rounds: an estimate, no interval
    assert MIN_ROUNDS == 5 and math.isnan(ratio_interval(num[:4], den[:4]).low)
    # gm(5, 7, 6, 5, 7) = (5^2 7^2 6)^(1/5); minus gm(4, ...) = 4
    d = difference_interval([5.0, 7.0, 6.0, 5.0, 7.0], [4.0] * 5)
    assert d.estimate == pytest.approx((5**2 * 7**2 * 6) ** 0.2 - 4.0)
    assert 1.0 - 1e-9 <= d.low <= d.estimate <= d.high <= 3.0 + 1e-9


def test_a_saving_never_contradicts_its_speedup_under_a_heavy_tail():
    # One round 12x slower: the mean of per-round differences is (4 * 5 - 50) / 5 = -6 ms, yet
    # the geometric-mean ratio is (2^4 / 6)^(1/5) = 1.22x. Seen in a loaded run as 2.36x
    # [1.08, 5.86] beside a saving of -5.2 ms [-76, 67].
    off, mode = [10.0] * 5, [5.0, 5.0, 5.0, 5.0, 60.0]
    ratio, saving = ratio_interval(off, mode), difference_interval(off, mode)
    assert ratio.estimate == pytest.approx((2**4 / 6) ** 0.2)
    assert saving.estimate == pytest.approx(10.0 - (5**4 * 60) ** 0.2) and saving.estimate > 0
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = 10.0 * rng.lognormal(0.0, 0.05, 8)
        # a 10% gap either way under heavy-tailed (Student t, 1.5 dof) multiplicative noise
        b = a / rng.choice([1.1, 0.9]) * np.exp(0.1 * rng.standard_t(1.5, 8))
        r, d = ratio_interval(a, b), difference_interval(a, b)
        assert (r.estimate > 1) == (d.estimate > 0)
        assert (r.low > 1) == (d.low > 0) and (r.high < 1) == (d.high < 0)


def test_verdicts_need_the_whole_interval_on_one_side():
    assert verdict_at_most(Interval(0.8, 0.7, 0.9, 5), 1.0) == PASS
    assert verdict_at_most(Interval(1.2, 1.1, 1.3, 5), 1.0) == FAIL
    assert verdict_at_most(Interval(0.95, 0.9, 1.05, 5), 1.0) == INCONCLUSIVE
    assert verdict_at_most(Interval(0.5, math.nan, math.nan, 1), 1.0) == INCONCLUSIVE
    assert verdict_at_least(Interval(2.0, 1.5, 2.5, 5), 1.0) == PASS
    assert verdict_at_least(Interval(0.5, 0.4, 0.6, 5), 1.0) == FAIL
    assert verdict_at_least(Interval(1.0, 0.9, 1.1, 5), 1.0) == INCONCLUSIVE


def test_rounds_to_decide_scales_the_half_width_by_one_over_sqrt_rounds():
    # half-width 0.1 at 4 rounds, gap 0.05: 4 * (0.1 / 0.05)^2 = 16 rounds, 12 more
    assert rounds_to_decide(Interval(1.05, 0.95, 1.15, 4), 1.0) == 12
    assert rounds_to_decide(Interval(1.2, 1.1, 1.3, 4), 1.0) == 0
    assert rounds_to_decide(Interval(1.0, 0.9, 1.1, 4), 1.0) is None


@pytest.mark.parametrize("true_ratio,expected", [(0.9, PASS), (1.1, FAIL)])
def test_a_ten_percent_gap_under_one_percent_noise_is_decided(true_ratio, expected):
    assert verdict(true_ratio, noise=0.01, seed=0) == expected


def test_no_gap_under_five_percent_noise_is_inconclusive():
    assert verdict(1.0, noise=0.05, seed=0) == INCONCLUSIVE


@pytest.mark.parametrize("offset", [-0.5, 0.0, 0.5])
def test_twenty_seeded_runs_near_the_target_never_both_pass_and_fail(offset):
    noise = 0.05
    found = {verdict(1.0 + offset * noise, noise, seed) for seed in range(20)}
    assert not {PASS, FAIL} <= found, found


def test_the_stop_rule_stops_when_tight_and_at_the_cap():
    calm = fake_systems({"a": 9.0, "b": 10.0}, noise=0.001, seed=1, drift=0.0)
    cmp = [Comparison("a/b", "a", "b")]
    # tight from the first interval on, which needs MIN_ROUNDS rounds
    assert {w.round for w in run_rounds(calm, RoundPlan(3, 30, 0.03, 1e9), cmp)} == {1, 2, 3, 4, 5}
    alone = fake_systems({"a": 9.0}, noise=0.5, seed=1)
    assert {w.round for w in run_rounds(alone, RoundPlan(3, 30, 0.03, 1e9), [])} == {1, 2, 3}
    wild = fake_systems({"a": 10.0, "b": 10.0}, noise=0.5, seed=1)
    assert max(w.round for w in run_rounds(wild, RoundPlan(3, 6, 0.001, 1e9), cmp)) == 6
    ticks = iter(range(100))
    spent = run_rounds(wild, RoundPlan(1, 30, 0.001, 2.5), cmp, clock=lambda: next(ticks))
    # start at 0, one tick after each round: 1, 2 are inside 2.5 s, the third round ends at 3
    assert max(w.round for w in spent) == 3


def test_gates_keep_passed_as_verdict_pass_and_check_exits_0_1_3():
    assert Gate("g", True, "ok").verdict == PASS and Gate("g", False, "x").verdict == FAIL
    with pytest.raises(ValueError):
        Gate("g", True, "x", INCONCLUSIVE)
    unsure = Gate("t", False, "straddles", INCONCLUSIVE, 1.0, 0.9, 1.1, 1.0)

    def code(gates):
        return finish("c", [], gates, {}, json_mode=False, check=True, render=lambda: None)

    assert code([Gate("a", True, "ok")]) == EXIT_OK
    assert code([Gate("a", True, "ok"), unsure]) == EXIT_INCONCLUSIVE == 3
    assert code([Gate("a", False, "no"), unsure]) == EXIT_FAILED
