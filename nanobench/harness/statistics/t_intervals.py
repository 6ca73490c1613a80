"""Intervals from a t quantile over variances read off the data in closed form: `stats`'s sibling.

What it is: `t_interval` (a mean over runs and mean +- t_df sqrt(variance / n): startup's ready
and saved seconds, a paired ratio's log ratios), `run_pool` and `pooled_t_intervals` (several
groups timed over the same runs, their variance pooled as compile pools its processes: startup's
modes, a `--vs` run's starts), `satterthwaite_interval` (a log ratio's interval from a variance
more rounds do not shrink and one they do: the process pool's, `pooling.ProcessPool.interval`,
and the history's, `history.Calibration.interval`) and `apart_interval` (two runs taken apart:
Welch's t over their processes' mean logs). `stats` holds `Interval` and the bootstrap intervals.
What it is not: the decision to pool a process variance or lend a history (`pooling`, `history`
make it and hand the variances here), a verdict (`stats.verdict_at_most`) or a timer.
Invariant: a group joins a pool only where its variance agrees with the rest's (a two-sided F
test at POOL_ALPHA); a pool's degrees of freedom never count an effect its groups share (a
drift by run) more than once; every interval says where its variance came from and at how many
degrees of freedom, and fewer than two values with no pool give no interval (NaN ends).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from nanobench.harness.statistics.stats import CONFIDENCE, Interval, bounded_exp

# A pool (compile's process pool, startup's over its modes) is refused a group at this level:
# a refused pool costs width, a wrong one coverage (tests/test_pooling.py, test_t_intervals.py).
POOL_ALPHA = 0.05


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided t quantile: mean +- this x SE covers `confidence`."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _var(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def t_interval(
    values: Sequence[float], confidence: float = CONFIDENCE, *, log: bool = False,
    variance: float | None = None, df: float | None = None, source: str = "",
) -> Interval:  # fmt: skip
    """mean +- t_df sqrt(variance / n) over `values`, one a run: their own variance at n - 1
    degrees of freedom, or a pool's (`variance`, `df`, `source`). `log`: the values are log
    ratios, and the interval is their geometric mean's, exp at each end. NaN ends from one
    value without a pool."""
    n = len(values)
    mean = _mean(values)
    back = math.exp if log else float
    if variance is None:
        variance, df = (_var(values), n - 1) if n > 1 else (math.nan, 0)
        source = f"own: {n} run{'s' if n != 1 else ''}"
    if not df or not math.isfinite(variance):
        return Interval(estimate=back(mean), low=math.nan, high=math.nan, rounds=n,
                        variance_from=source)  # fmt: skip
    half = t_quantile(confidence, df) * math.sqrt(variance / n)
    ends = [mean - half, mean + half]
    low, high = [bounded_exp(e) for e in ends] if log else ends
    return Interval(estimate=back(mean), low=low, high=high, rounds=n, df=round(df, 2),
                    variance_from=source)  # fmt: skip


@dataclass(frozen=True)
class RunPool:
    """The variance of one value that several groups share, each group timed once a run over the
    same runs: `members` pooled, `set_aside` refused for a variance unlike the others'."""

    members: tuple = ()
    set_aside: tuple = ()
    runs: int = 0
    variance: float = math.nan  # sum (n - 1) s^2 / sum (n - 1): the groups' pooled variance
    df: float = 0.0  # Satterthwaite's, from R - 1 (the runs' drift is all) to G (R - 1) (none)
    unit: str = "groups"

    @property
    def usable(self) -> bool:
        return len(self.members) >= 2

    def source(self) -> str:
        return f"pooled over {len(self.members)} {self.unit}"


def agreeing(variances: Mapping[Hashable, tuple[float, int]]) -> list:
    """The groups whose variance (s^2, df) agrees with the others' pool: while the most extreme
    against the rest's pooled variance (a two-sided F test) is past POOL_ALPHA, it is set aside
    and the rest tried again, so one wild group never judges the others."""
    from scipy.stats import f

    def p_value(key, kept: dict) -> float:
        s2, df = kept[key]
        rest = [v for k, v in kept.items() if k != key]
        df_rest = sum(d for _, d in rest)
        s2_rest = sum(s * d for s, d in rest) / df_rest
        if s2_rest == 0 or s2 == 0:
            return 1.0 if s2 == s2_rest else 0.0
        ratio = s2 / s2_rest
        return 2 * min(float(f.sf(ratio, df, df_rest)), float(f.cdf(ratio, df, df_rest)))

    kept = dict(variances)
    while len(kept) > 1:
        worst = min(kept, key=lambda k: p_value(k, kept))
        if p_value(worst, kept) >= POOL_ALPHA:
            break
        del kept[worst]
    return list(kept)


def run_pool(groups: Mapping[Hashable, Mapping[int, float]], unit: str = "groups") -> RunPool:
    """The pool of `groups[key][run]`: the groups of two runs or more over the runs most of them
    share, less those whose variance disagrees (`agreeing`).

    Pooled over G groups of R runs the variance has G (R - 1) degrees of freedom only where the
    groups' deviations are independent; a drift by run they share (a busy machine for all of
    run 2) makes them one deviation seen G times. In the groups-by-runs table the pooled
    variance is (MS_run + (G - 1) MS_int) / G, and Satterthwaite's degrees of freedom for that
    sum run from R - 1 (all drift) to G (R - 1) (none): never more than the runs can give.
    """
    candidates = {k: g for k, g in groups.items() if len(g) >= 2}
    common = Counter(frozenset(g) for g in candidates.values())
    runs = max(common, key=lambda s: (common[s], len(s)), default=frozenset())
    shared = {k: [g[r] for r in sorted(runs)] for k, g in candidates.items() if set(g) == runs}
    members = agreeing({k: (_var(v), len(v) - 1) for k, v in shared.items()})
    aside = tuple(k for k in shared if k not in members)
    if len(members) < 2:
        return RunPool(set_aside=aside, unit=unit)
    table = [shared[k] for k in members]  # [groups][runs]
    g, r = len(table), len(runs)
    grand = sum(map(sum, table)) / (g * r)
    run_means = [sum(row[j] for row in table) / g for j in range(r)]
    ss_run = g * sum((m - grand) ** 2 for m in run_means)
    ss_within = sum(sum((x - _mean(row)) ** 2 for x in row) for row in table)
    ms_run, ms_int = ss_run / (r - 1), (ss_within - ss_run) / ((g - 1) * (r - 1))
    a, b = ms_run / g, max(0.0, ms_int) * (g - 1) / g
    full = g * (r - 1)
    df = (a + b) ** 2 / (a**2 / (r - 1) + b**2 / ((g - 1) * (r - 1))) if a + b > 0 else full
    return RunPool(members=tuple(members), set_aside=aside, runs=r, variance=ss_within / full,
                   df=min(max(df, r - 1), full), unit=unit)  # fmt: skip


def pooled_t_intervals(
    groups: Mapping[Hashable, Mapping[int, float]], confidence: float = CONFIDENCE, *,
    unit: str = "groups", log: bool = False,
) -> dict:  # fmt: skip
    """Each group's mean over its runs (`groups[key][run]`) with its t interval, the variance
    pooled over the groups that agree (`run_pool`); a group the pool leaves out keeps its own.
    `log`: the values are positive ratios, pooled and averaged as logs (their geometric mean)."""
    values = {k: {r: math.log(v) if log else v for r, v in g.items()} for k, g in groups.items()}
    pool = run_pool(values, unit)
    out = {}
    for key, runs in values.items():
        ordered = [runs[r] for r in sorted(runs)]
        if pool.usable and key in pool.members:
            out[key] = t_interval(ordered, confidence, log=log, variance=pool.variance,
                                  df=pool.df, source=pool.source())  # fmt: skip
        else:
            own = t_interval(ordered, confidence, log=log)
            if key in pool.set_aside:
                own = _said(own, f"its spread unlike the other {unit}'")
            out[key] = own
    return out


def _said(interval: Interval, why: str) -> Interval:
    return replace(interval, variance_from=f"{interval.variance_from}, {why}")


@dataclass(frozen=True)
class Part:
    """One part of a mean log ratio's variance and its degrees of freedom."""

    variance: float
    df: float


def satterthwaite_interval(
    *, log_mean: float, shared: Part, within: Part, rounds: int, processes: int, source: str,
    confidence: float = CONFIDENCE,
) -> Interval:  # fmt: skip
    """exp(log_mean +- t_df sqrt(shared + within)): `shared` the variance more rounds do not
    shrink (a pool's process variance, a history's run variance), `within` the one they do, at
    Satterthwaite's degrees of freedom, never fewer than the shared part's own."""
    total = shared.variance + within.variance
    if total == 0:
        point = math.exp(log_mean)
        return Interval(estimate=point, low=point, high=point, rounds=rounds,
                        processes=processes, df=math.inf, variance_from=source,
                        process_df=shared.df)  # fmt: skip
    parts = shared.variance**2 / shared.df + within.variance**2 / within.df
    df = max(total**2 / parts, float(shared.df))
    q = t_quantile(confidence, df) * math.sqrt(total)
    return Interval(
        estimate=math.exp(log_mean), low=bounded_exp(log_mean - q),
        high=bounded_exp(log_mean + q), rounds=rounds, processes=processes,
        within_share=within.variance / total, df=round(df, 2), variance_from=source,
        process_df=shared.df,
    )  # fmt: skip


def apart_interval(
    before: list[list[float]], after: list[list[float]], confidence: float = CONFIDENCE
) -> Interval:
    """after / before for two runs taken apart: their per-process mean logs, Welch's t.

    Each inner list is one process's per-round values (step ms, or a round's speedup). Rounds of
    one process are not independent of each other, so a process is the unit (its mean log), as
    in the hierarchical interval; with one process a side its rounds stand in. The machine's
    drift between the two runs is in neither side's spread: the caller says so.
    """

    def units(side: list[list[float]]) -> list[float]:
        groups = [[math.log(v) for v in g if v and v > 0] for g in side]
        groups = [g for g in groups if g]
        if len(groups) > 1:
            return [_mean(g) for g in groups]
        return groups[0] if groups else []

    a, b = units(before), units(after)
    size = len(a) + len(b)
    if len(a) < 2 or len(b) < 2:
        est = math.exp(_mean(b) - _mean(a)) if a and b else math.nan
        return Interval(estimate=est, low=math.nan, high=math.nan, rounds=size)
    va, vb = _var(a) / len(a), _var(b) / len(b)
    estimate = _mean(b) - _mean(a)
    se = math.sqrt(va + vb)
    if se == 0:
        point = math.exp(estimate)
        return Interval(estimate=point, low=point, high=point, rounds=size)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    q = t_quantile(confidence, df)
    return Interval(estimate=math.exp(estimate), low=math.exp(estimate - q * se),
                    high=math.exp(estimate + q * se), rounds=size, df=df,
                    variance_from="runs apart")  # fmt: skip
