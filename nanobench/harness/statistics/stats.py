"""Statistics of step times: a spread per system, an interval per comparison, a tri-state verdict.

What it is: `Interval` (every interval the tree builds: here, or in `t_intervals`, this
module's sibling for the intervals whose variance is read off in closed form: a t interval over
runs, startup's pool over its modes, the process pool's and the history's Satterthwaite
interval, two runs taken apart; `Interval.from_ends` reads a row's saved ends back as one),
`spread` (median, quartiles, IQR and coefficient of variation of a system's samples,
numpy), `ratio_interval` and `difference_interval` (a point estimate and its 95% confidence
interval, paired by round, none below MIN_ROUNDS: over one process a bootstrap over rounds,
`scipy.stats.bootstrap(paired=True)` with a fixed seed and its level expanded for few rounds;
over several processes a hierarchical bootstrap, processes then rounds within each, whose
standard error takes a t quantile at Satterthwaite's degrees of freedom, `effective_df`),
`verdict_at_most` / `verdict_at_least` (pass only when the whole interval is on the good side of
the target, fail only when it is wholly on the bad side, else inconclusive) and
`rounds_to_decide` (how many more rounds would likely shrink the interval off the target) and
`processes_bind` (none would: the processes disagree by more than that).
What it is not: a timer or a scheduler, or the decision to pool or lend a variance (`pooling`,
`history`). Numbers in, numbers out; no torch, no processes.
Invariant: a verdict is `pass` or `fail` only when the interval excludes the target; a null
comparison (a system against itself, over several processes) excludes 1 no more often than the
level allows (tests/test_stats.py drives it). An interval that cannot be computed (fewer than
MIN_ROUNDS rounds, a missing system) is NaN on both ends and its verdict is `inconclusive`,
never a guess. The same input gives the same interval (fixed seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS

CONFIDENCE = 0.95
RESAMPLES = 10000
SEED = 0
# Fewer rounds than this give no interval: a bootstrap cannot reach past the range of its data,
# and the range of 4 rounds misses the true median one time in 8 (2 * 0.5^4); of 5, one in 16.
MIN_ROUNDS = 5
ONE_PROCESS = "rounds: 1 process"


@dataclass(frozen=True)
class Spread:
    """One system's samples: median, quartiles and spread, all in ms; cv has no unit."""

    n: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    cv: float


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A point estimate and its 95% interval over `rounds` paired rounds in `processes` worker
    processes per system (NaN ends: none). Built by keyword, here and in `t_intervals` only;
    a row's saved ends come back as one through `from_ends`."""

    estimate: float
    low: float
    high: float
    rounds: int
    processes: int = 1
    # The share of the estimate's variance that more rounds shrink: 1 over one process; over
    # several, within / (between + within) of the one-way ANOVA (`variance_parts`).
    within_share: float = 1.0
    # The t quantile's degrees of freedom, and where the process variance came from: one
    # process's rounds, the comparison's own processes, or a pool over the run's systems.
    df: float = math.nan
    variance_from: str = ""
    # The degrees of freedom of the variance the rounds do not shrink, what `better_informed`
    # weighs: the comparison's processes (K - 1), a pool's interaction, a history's runs - 1.
    process_df: float = 0.0

    @classmethod
    def from_ends(
        cls, *, estimate: float | None, low: float | None, high: float | None,
        rounds: int | None, processes: int = 1, within_share: float | None = None,
    ) -> Interval:  # fmt: skip
        """The interval a row holds in its columns (value, low, high): a None figure is NaN (no
        interval), None rounds 0, and a None within_share 1 (all of it shrinks with rounds)."""
        nan = math.nan
        return cls(
            estimate=nan if estimate is None else estimate, low=nan if low is None else low,
            high=nan if high is None else high, rounds=rounds or 0, processes=processes,
            within_share=1.0 if within_share is None else within_share,
        )  # fmt: skip

    @property
    def half_width(self) -> float:
        """(high - low) / 2; NaN when there is no interval."""
        return (self.high - self.low) / 2

    @property
    def rel_half_width(self) -> float:
        """half_width / |estimate|: the precision --rel-ci asks for; inf when the estimate is 0."""
        if not math.isfinite(self.half_width):
            return math.inf
        return self.half_width / abs(self.estimate) if self.estimate else math.inf

    @property
    def rel_half_width_unshrinkable(self) -> float:
        """About the rel_half_width more rounds alone could reach: the variance they do not
        shrink (1 - within_share of it) at the same t quantile."""
        return self.rel_half_width * math.sqrt(max(0.0, 1.0 - self.within_share))


def spread(ms: list[float] | np.ndarray) -> Spread | None:
    """Median, 25th/75th percentiles, IQR and std/mean of the samples; None without samples."""
    values = np.asarray(ms, dtype=float)
    if values.size == 0:
        return None
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    mean = values.mean()
    cv = float(values.std(ddof=1) / mean) if values.size > 1 and mean else 0.0
    return Spread(int(values.size), float(median), float(q1), float(q3), float(q3 - q1), cv)


def _geometric_mean_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    # The mean of log ratios: a round twice as slow and one twice as fast cancel exactly.
    return np.exp(np.mean(np.log(a / b), axis=axis))


def _geometric_mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    # gm(a) - gm(b) > 0 exactly when gm(a / b) > 1: the difference and the ratio of the same
    # rounds agree in sign in every resample, so a saving never contradicts its speedup.
    return np.exp(np.mean(np.log(a), axis=axis)) - np.exp(np.mean(np.log(b), axis=axis))


def _bootstrap(a, b, statistic, confidence: float = CONFIDENCE) -> Interval:
    from scipy.stats import bootstrap

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired rounds: {a.size} against {b.size}")
    if a.size == 0:
        return Interval(estimate=math.nan, low=math.nan, high=math.nan, rounds=0)
    estimate = float(statistic(a, b))
    if a.size < MIN_ROUNDS:
        return Interval(estimate=estimate, low=math.nan, high=math.nan, rounds=int(a.size))
    if np.all(a == a[0]) and np.all(b == b[0]):
        # Every round the same: no resample differs, the interval is the point.
        return Interval(estimate=estimate, low=estimate, high=estimate, rounds=int(a.size))
    result = bootstrap(
        (a, b),
        statistic,
        paired=True,
        vectorized=True,
        confidence_level=expanded_level(int(a.size), confidence),
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(SEED),
    )
    ci = result.confidence_interval
    return Interval(estimate=estimate, low=float(ci.low), high=float(ci.high), rounds=int(a.size),
                    df=a.size - 1, variance_from=ONE_PROCESS)  # fmt: skip


def expanded_level(n: int, confidence: float = CONFIDENCE) -> float:
    """2 Phi(sqrt(n / (n - 1)) t_{n-1}) - 1: the percentile level that covers `confidence` (95%)
    at n rounds.

    A percentile bootstrap of n rounds is as narrow as a z-interval with the sample's own
    spread; over few rounds that undercovers. Hesterberg's expanded percentile interval widens
    the level to what a t-interval with n - 1 degrees of freedom would need.
    """
    from scipy.stats import norm, t

    z = math.sqrt(n / (n - 1)) * t.ppf(0.5 + confidence / 2, n - 1)
    return float(2 * norm.cdf(z) - 1)


def several(processes) -> bool:
    """True when the rounds came from more than one process: the hierarchical path."""
    return processes is not None and len(set(processes)) > 1


def ratio_interval(
    num_ms, den_ms, processes=None, confidence: float = CONFIDENCE, pool=None, history=None
) -> Interval:
    """Geometric mean over rounds of num_ms[r] / den_ms[r], with its paired interval.

    Each round contributes one pair (the two systems' window medians of that round), so drift
    between rounds, which hits both windows of a round alike, cancels in the ratio.
    `processes[r]` names the worker process pair round r ran in; rounds from several processes
    get the hierarchical interval, which holds the between-process variance (memory layout,
    allocator state, CPU placement) that one process's rounds cannot show. `confidence` is 95%
    unless a stopping rule that looked earlier spent some of the 5% (`rounds.look_confidence`).
    `pool` (`pooling.ProcessPool`), when the run's systems allow one, gives the between-process
    variance more degrees of freedom than this comparison's own processes. `history`
    (`history.Calibration`), when it lends one, is the interval with the spread of this
    comparison's earlier runs on this machine, where it is the better informed
    (`better_informed`).
    """
    lent = lent_interval(history, num_ms, den_ms, processes, confidence)
    if several(processes):
        own = partial(_hierarchical, num_ms, den_ms, processes, confidence, pool)
        return better_informed(lent, own, processes, pool, confidence)
    return lent or _bootstrap(num_ms, den_ms, _geometric_mean_ratio, confidence)


def better_informed(
    lent: Interval | None, own: Callable[[], Interval], processes, pool,
    confidence: float = CONFIDENCE,
) -> Interval:  # fmt: skip
    """The history's interval where its earlier runs give the variance a run's rounds cannot
    shrink more degrees of freedom than the run's own processes or pool do, or where they
    vary more than the run's own interval admits (`runs_vary_more`); else the run's own
    (`own()`, computed only where the history could lose: its bootstrap is the costly part).

    Two processes leave a comparison's own process variance one degree of freedom, so three
    earlier runs (two) are better; a pool of six systems in three processes has ten, and a
    history of three runs in its place widened decode's intervals to high / low 2.0 (t = 4.3).
    """
    if lent is None:
        return own()
    # The most the run's own interval can have: its pool's, or its processes' K - 1.
    most = pool.df_interaction if pool is not None and pool.usable else len(set(processes)) - 1
    if lent.process_df > most:
        return lent
    found = own()
    if lent.process_df > found.process_df:
        return lent
    if runs_vary_more(lent, found, confidence):
        return replace(
            lent, variance_from=f"{lent.variance_from}, spread wider than this run's own"
        )
    return found


RUN_EFFECT_ALPHA = 0.05  # the F test that lends a history for a spread the run cannot see


def runs_vary_more(lent: Interval, found: Interval, confidence: float = CONFIDENCE) -> bool:
    """The earlier runs' variance over the run's own, past F(RUN_EFFECT_ALPHA; runs - 1, df).

    What every process of a run shares (the neighbours that hour, against a floor that does not
    follow them) is in no interval one run computes: six decode runs' pooled floor intervals
    (high / low 1.04) held the others' median in 4 of 6 while the runs spread 0.03 in log. The
    variances are read back from the intervals, (log(high / low) / 2 t_df)^2; the own one's t
    ignores its bootstrap's small-sample factor, which only makes the test lend less often.
    """
    from scipy.stats import f, t

    def df(i: Interval) -> float:
        return i.df if math.isfinite(i.df) and i.df > 0 else 1e6  # no df: a normal quantile

    def variance(i: Interval) -> float:
        q = float(t.ppf(0.5 + confidence / 2, df(i)))
        return (math.log(i.high / i.low) / (2 * q)) ** 2

    if not all(math.isfinite(e) and e > 0 for e in (lent.low, lent.high, found.low, found.high)):
        return False
    own_var = variance(found)
    if own_var == 0:
        return variance(lent) > 0
    crit = float(f.ppf(1 - RUN_EFFECT_ALPHA, lent.process_df, df(found)))
    return variance(lent) / own_var > crit


def lent_interval(history, num_ms, den_ms, processes, confidence: float) -> Interval | None:
    """The history's interval of num / den, None without a history or where it lends none."""
    if history is None or len(num_ms) < MIN_ROUNDS:
        return None
    labels = list(processes) if processes is not None else [1] * len(num_ms)
    return history.interval(num_ms, den_ms, labels, confidence)


def difference_interval(
    a_ms, b_ms, processes=None, confidence: float = CONFIDENCE, pool=None, history=None
) -> Interval:
    """Geometric mean of a_ms minus that of b_ms over rounds, with its paired interval.

    Not the mean of per-round differences: under heavy-tailed noise that mean can be negative
    while the geometric-mean ratio of the same rounds is above 1. gm(a) - gm(b) has the sign of
    log gm(a / b) in every resample, and the same seed draws the same resamples, so the
    difference's interval excludes 0 exactly when `ratio_interval`'s excludes 1. Over several
    processes the difference is gm(b) (ratio - 1) at each end of the ratio's interval: the
    same sign rule by construction; gm(b)'s own spread is second order where a saving is small.
    """
    ratio = lent_interval(history, a_ms, b_ms, processes, confidence)
    if ratio is None and not several(processes):
        return _bootstrap(a_ms, b_ms, _geometric_mean_difference, confidence)
    if several(processes):
        own = partial(_hierarchical, a_ms, b_ms, processes, confidence, pool)
        ratio = better_informed(ratio, own, processes, pool, confidence)
    gm_b = float(np.exp(np.mean(np.log(np.asarray(b_ms, dtype=float)))))
    low, high = (gm_b * (end - 1) for end in (ratio.low, ratio.high))
    return replace(ratio, estimate=gm_b * (ratio.estimate - 1), low=low, high=high)


def _hierarchical(a, b, processes, confidence: float = CONFIDENCE, pool=None) -> Interval:
    """exp(mean log(a / b)) and exp(mean +- q SE): SE from resampling processes, then rounds;
    the pool's interval instead where `pool` is usable and agrees with these processes.

    A percentile interval over two processes cannot reach past their two means (it covers about
    half the time when processes differ), so the bootstrap gives the standard error only and
    q = sqrt((df + 1) / df) t_df takes the few degrees of freedom the processes leave
    (`effective_df`); the sqrt factor undoes the bootstrap's (K - 1) / K shrinkage.
    """
    from scipy.stats import t

    y = np.log(np.asarray(a, dtype=float) / np.asarray(b, dtype=float))  # [rounds]
    labels = np.asarray([str(p) for p in processes])
    groups = [y[labels == p] for p in sorted(set(labels))]
    estimate = float(y.mean())
    k = len(groups)
    if y.size < MIN_ROUNDS:
        return Interval(estimate=math.exp(estimate), low=math.nan, high=math.nan,
                        rounds=int(y.size), processes=k)  # fmt: skip
    if np.all(y == y[0]):
        point = math.exp(estimate)
        return Interval(estimate=point, low=point, high=point, rounds=int(y.size), processes=k)
    pooled = pool.interval(y, labels, confidence) if pool is not None and pool.usable else None
    if pooled is not None:
        return pooled
    se = float(hierarchical_means(groups).std(ddof=1))
    # Satterthwaite's df can fall below the K - 1 the processes alone leave: never below it.
    df = max(effective_df(groups), k - 1, 1)
    q = math.sqrt((df + 1) / df) * float(t.ppf(0.5 + confidence / 2, df))
    between, within = variance_parts(groups)[:2]
    return Interval(
        estimate=math.exp(estimate), low=bounded_exp(estimate - q * se),
        high=bounded_exp(estimate + q * se), rounds=int(y.size), processes=k,
        within_share=within / (between + within) if between + within else 1.0, df=df,
        variance_from=f"own: {k} processes", process_df=k - 1,
    )  # fmt: skip


def bounded_exp(x: float) -> float:
    """exp(x), with an unbounded interval end as inf or 0 rather than an OverflowError."""
    return math.inf if x > 700 else math.exp(max(x, -745.0))


def hierarchical_means(groups: list[np.ndarray]) -> np.ndarray:
    """RESAMPLES pooled means: K processes drawn with replacement, then each one's rounds."""
    rng = np.random.default_rng(SEED)
    k = len(groups)
    picks = rng.integers(0, k, size=(RESAMPLES, k))  # [resamples, k]: a process per slot
    total = np.zeros(RESAMPLES)
    count = np.zeros(RESAMPLES)
    for slot in range(k):
        for g, values in enumerate(groups):
            hit = picks[:, slot] == g  # [resamples]
            draws = rng.integers(0, values.size, size=(int(hit.sum()), values.size))
            total[hit] += values[draws].sum(axis=1)
            count[hit] += values.size
    return total / count


def variance_parts(groups: list[np.ndarray]) -> tuple[float, float, int]:
    """One-way ANOVA of the pooled mean's variance: (between / K, within / (K n), within df).

    Var(mean) = sigma_b^2 / K + sigma_w^2 / (K n); sigma_b^2 is estimated as s_b^2 - s_w^2 / n,
    never below 0.
    """
    k = len(groups)
    n_bar = float(np.mean([g.size for g in groups]))
    s_b2 = float(np.var([g.mean() for g in groups], ddof=1))
    df_w = sum(g.size - 1 for g in groups)
    s_w2 = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df_w if df_w else 0.0
    return max(0.0, s_b2 - s_w2 / n_bar) / k, s_w2 / (k * n_bar), df_w


def effective_df(groups: list[np.ndarray]) -> float:
    """Satterthwaite's degrees of freedom for the pooled mean's variance (`variance_parts`).

    The between-process part has K - 1 degrees of freedom, the within part sum(n_k - 1). With no
    visible process effect the answer is the rounds' own; when processes dominate it falls to
    K - 1, as it must: two processes are one degree of freedom about the process effect, however
    many rounds each ran.
    """
    k = len(groups)
    between, within, df_w = variance_parts(groups)
    if between + within == 0:
        return float(max(df_w, k - 1))
    spread_df = between**2 / (k - 1) + (within**2 / df_w if df_w else 0.0)
    return (between + within) ** 2 / spread_df


def verdict_at_most(interval: Interval, target: float) -> str:
    """pass when high <= target, fail when low > target, else (or without an interval) inconclusive."""
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return INCONCLUSIVE
    if interval.high <= target:
        return PASS
    if interval.low > target:
        return FAIL
    return INCONCLUSIVE


def verdict_at_least(interval: Interval, target: float) -> str:
    """pass when low >= target, fail when high < target, else (or without an interval) inconclusive."""
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return INCONCLUSIVE
    if interval.low >= target:
        return PASS
    if interval.high < target:
        return FAIL
    return INCONCLUSIVE


def rounds_to_decide(interval: Interval, target: float) -> int | None:
    """More rounds likely to pull the interval off the target: n s / ((gap / reach)^2 - (1 - s)) - n.

    reach is the interval's extent from the estimate towards the target (an interval need not be
    symmetric), gap the estimate's distance to the target, s its `within_share`: only the
    within-process part of the variance shrinks as 1 / rounds. 0 when already decided; None when
    no number of rounds likely decides: no interval yet, the estimate on the target, or
    processes that disagree by more than the gap (`processes_bind`).
    """
    if not math.isfinite(interval.half_width) or interval.rounds < 2:
        return None
    if not interval.low < target < interval.high:
        return 0
    gap, reach = towards(interval, target)
    left = (gap / reach) ** 2 - (1 - interval.within_share) if reach > 0 else 0.0
    if gap == 0 or left <= 0:
        return None
    needed = interval.rounds * interval.within_share / left
    return max(1, math.ceil(needed) - interval.rounds)


def towards(interval: Interval, target: float) -> tuple[float, float]:
    """(gap, reach): the estimate's distance to the target, and the interval's from the
    estimate on the target's side."""
    above = target > interval.estimate
    reach = interval.high - interval.estimate if above else interval.estimate - interval.low
    return abs(interval.estimate - target), reach


def processes_bind(interval: Interval, target: float) -> bool:
    """True when an undecided interval would stay undecided however many rounds ran: the
    processes' disagreement alone reaches past the target, and only more processes narrow it."""
    if interval.processes < 2 or not interval.low < target < interval.high:
        return False
    gap, reach = towards(interval, target)
    return gap > 0 and reach > 0 and (gap / reach) ** 2 <= 1 - interval.within_share


def each_level(level: float, comparisons: int) -> float:
    """The level of each of a run's `comparisons` timing changes so that all of them hold
    together at `level` (Bonferroni: 1 - (1 - level) / m). An A/A run reads a dozen ratios;
    at 95% each, one of them says faster or slower in about a run in three."""
    return 1 - (1 - level) / max(1, comparisons)
