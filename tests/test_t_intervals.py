"""The t intervals over runs (`nanobench.harness.statistics.t_intervals`), against scipy and by hand.

Fresh seeded draws from a known truth: a pool over groups of a few runs each is checked against
an independent computation (scipy's one-way ANOVA for the pooled variance, a least-squares fit
of the groups-by-runs table for its interaction), against its own coverage, and against a group
whose variance is unlike the others', which must keep its own interval.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from nanobench.harness.statistics.t_intervals import pooled_t_intervals, run_pool, t_interval


def table(rng, sds, runs: int, drift: float = 0.0, means=None) -> dict:
    """{group: {run: value}}: each group its mean plus a drift by run they share and its own
    noise (sd `sds[g]`)."""
    means = means or [10.0 * (g + 1) for g in range(len(sds))]
    shared = drift * rng.standard_normal(runs)
    return {
        f"m{g}": {r + 1: means[g] + shared[r] + sd * rng.standard_normal() for r in range(runs)}
        for g, sd in enumerate(sds)
    }


def independent(groups: dict, confidence: float = 0.95) -> dict:
    """Each group's mean and pooled t interval, computed another way: the pooled variance from
    scipy's F statistic (MS_between / F), the groups-by-runs interaction as the residual of a
    least-squares additive fit, Satterthwaite's df for MS_run / G + (G - 1) MS_int / G."""
    keys = sorted(groups)
    y = np.array([[groups[k][r] for r in sorted(groups[k])] for k in keys])  # [G, R]
    g, r = y.shape
    f_stat, _ = stats.f_oneway(*y)
    ms_between = r * np.var(y.mean(axis=1), ddof=1)
    pooled = ms_between / f_stat
    design = np.hstack([np.kron(np.eye(g), np.ones((r, 1))), np.kron(np.ones((g, 1)), np.eye(r))])
    fit, *_ = np.linalg.lstsq(design, y.ravel(), rcond=None)  # rank G + R - 1: no residual sum
    ms_int = float(((y.ravel() - design @ fit) ** 2).sum()) / ((g - 1) * (r - 1))
    ms_run = g * np.var(y.mean(axis=0), ddof=1)
    a, b = ms_run / g, (g - 1) * ms_int / g
    df = (a + b) ** 2 / (a**2 / (r - 1) + b**2 / ((g - 1) * (r - 1)))
    df = min(max(df, r - 1), g * (r - 1))
    assert (a + b) == pytest.approx(pooled, rel=1e-9)  # the two-way split adds up to the pool
    return {
        k: stats.t.interval(confidence, df, loc=y[i].mean(), scale=math.sqrt(pooled / r))
        for i, k in enumerate(keys)
    } | {"df": df}


@pytest.mark.parametrize(("seed", "drift"), [(1, 0.0), (2, 0.5), (3, 3.0)])
def test_the_pooled_interval_matches_an_independent_computation(seed, drift):
    rng = np.random.default_rng(seed)
    groups = table(rng, sds=(1.0, 1.0, 1.0), runs=4, drift=drift)
    found = pooled_t_intervals(groups, unit="modes")
    expected = independent(groups)
    for k, interval in found.items():
        assert interval.variance_from == "pooled over 3 modes"
        assert interval.estimate == pytest.approx(np.mean(list(groups[k].values())), rel=1e-12)
        assert (interval.low, interval.high) == pytest.approx(expected[k], rel=1e-9)
        assert interval.df == pytest.approx(expected["df"], abs=0.01)
    # a drift by run the modes share leaves the pool fewer degrees of freedom than 3 x 3
    assert (found["m0"].df < 5) == (drift >= 3.0)


def test_two_runs_a_mode_pooled_over_three_modes_cover_at_the_level_and_narrow():
    """At the default two runs each mode alone has 1 df (t = 12.7); three modes of equal spread
    pooled cover the truth 94% of the time at less than half the width without drift, less
    narrowing where the runs share a drift as large as the noise, 91% where it is three times
    the noise. Counting the three modes' 3 df whatever the drift covers 91.5%, 91.5% and 85%."""
    rng = np.random.default_rng(20)
    for drift, narrower, least in ((0.0, 0.5, 0.93), (1.0, 0.8, 0.93), (3.0, 1.0, 0.89)):
        covered, pooled_width, own_width = 0, 0.0, 0.0
        for _ in range(400):
            groups = table(rng, sds=(1.0, 1.0, 1.0), runs=2, drift=drift)
            found = pooled_t_intervals(groups, unit="modes")
            truth = {f"m{g}": 10.0 * (g + 1) for g in range(3)}
            covered += sum(i.low <= truth[k] <= i.high for k, i in found.items())
            pooled_width += found["m0"].high - found["m0"].low
            own = t_interval(list(groups["m0"].values()))
            own_width += own.high - own.low
        assert least <= covered / 1200 <= 0.98, (drift, covered)
        assert pooled_width < narrower * own_width, (drift, pooled_width, own_width)


def test_a_mode_whose_spread_is_wildly_unlike_the_others_keeps_its_own_interval():
    rng = np.random.default_rng(5)
    groups = table(rng, sds=(1.0, 1.0, 1.0, 60.0), runs=4)
    found = pooled_t_intervals(groups, unit="modes")
    wild = list(groups["m3"].values())
    own = stats.t.interval(0.95, 3, loc=np.mean(wild), scale=stats.sem(wild))
    assert (found["m3"].low, found["m3"].high) == pytest.approx(own, rel=1e-9)
    assert found["m3"].df == 3
    assert found["m3"].variance_from == "own: 4 runs, its spread unlike the other modes'"
    rest = {k: v for k, v in groups.items() if k != "m3"}
    expected = independent(rest)
    for k in rest:
        assert found[k].variance_from == "pooled over 3 modes"
        assert (found[k].low, found[k].high) == pytest.approx(expected[k], rel=1e-9)
    # pooled anyway, the wild mode's spread would have widened every other mode's interval
    assert run_pool(groups).set_aside == ("m3",)


def test_a_mode_of_one_run_or_alone_has_no_pool():
    one = pooled_t_intervals({"a": {1: 2.0}, "b": {1: 3.0, 2: 3.5}})
    assert math.isnan(one["a"].low) and one["a"].variance_from == "own: 1 run"
    assert one["b"].variance_from == "own: 2 runs" and one["b"].df == 1
    half = stats.t.ppf(0.975, 1) * 0.5 / math.sqrt(2) / math.sqrt(2)
    assert (one["b"].low, one["b"].high) == pytest.approx((3.25 - half, 3.25 + half))
    # a ratio's interval is its log ratios', exp at each end
    ratio = pooled_t_intervals({"a": {1: 1.1, 2: 1.2}}, log=True)["a"]
    logs = [math.log(1.1), math.log(1.2)]
    low, high = stats.t.interval(0.95, 1, loc=np.mean(logs), scale=stats.sem(logs))
    assert (ratio.low, ratio.high) == pytest.approx((math.exp(low), math.exp(high)))
