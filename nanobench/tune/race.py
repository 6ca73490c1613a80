"""The race's rule: after each round, which survivors are out, and whether the rest are one.

What it is: `look(medians, alive, r, ...)`, one look at round r: the best survivor (lowest
geometric-mean step time over the rounds every survivor ran), each other survivor's `Evidence`
against it (a paired test on the per-round log ratios), the ones dropped (Holm across the
survivors at the alpha this look may spend, `spent`) and whether every survivor is within the
margin of the best (equivalent). `holm(p, alpha)`, `paired_logs` and `log_mean_se` are its parts.
What it is not: the fleet that times the rounds (`tune.bench`) or the answer's intervals
(`tune.rows`, the commands' hierarchical ones).
Invariant: pure (numpy and scipy only): the simulation in the tests runs this same code over
drawn timings. The chance of dropping the true best is at most ALPHA over the whole race:
Holm bounds it within a look, and the looks' alphas (`spent`, Lan-DeMets Pocock-type) sum to
ALPHA however many looks the race takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nanobench.harness.workers.member import Member

ALPHA = 0.05  # the chance, over the whole race, of dropping the true best
FIRST_TEST = 5  # rounds before the first look (irace's default first test)
PROCESS_ALPHA = 0.05  # the F test that says the processes differ beyond the rounds' noise

# Member -> {round: (the window's median ms, the process that timed it)}
Medians = dict[Member, dict[int, tuple[float, int]]]


@dataclass(frozen=True)
class Evidence:
    """One survivor against the best at one look."""

    member: Member
    estimate: float  # exp(mean log(member / best)) over the paired rounds
    low: float  # the ratio's interval at the look's per-survivor level (a dropped one's: Holm's)
    high: float
    p_slower: float  # H0: ratio <= 1 + margin; small: slower than the best by more
    p_within: float  # H0: ratio >= 1 + margin; small: within the margin of the best
    rounds: int
    processes: int  # process pairs the rounds came from
    variance_from: str  # "rounds", or "processes" where they differ beyond the rounds' noise


@dataclass(frozen=True)
class Look:
    round: int
    best: Member
    alpha: float  # what this look spends
    evidence: tuple[Evidence, ...]
    dropped: tuple[Member, ...]
    equivalent: bool  # every survivor left is within the margin of the best


def spent(r: int, first: int, max_rounds: int, alpha: float = ALPHA) -> float:
    """The alpha look r may spend: a(t_r) - a(t_{r-1}), a(t) = alpha ln(1 + (e - 1) t),
    t = r / max_rounds; the first look (round `first`) spends a(t_first); none before it."""
    if r < first:
        return 0.0

    def a(k: int) -> float:
        return alpha * math.log(1 + (math.e - 1) * min(k, max_rounds) / max_rounds)

    return a(r) - (a(r - 1) if r > first else 0.0)


def paired_logs(medians: Medians, a: Member, b: Member) -> tuple[np.ndarray, list[str]]:
    """log(a / b) of every round both timed, and each pair's processes ("1/2")."""
    ma, mb = medians[a], medians[b]
    rounds = sorted(ma.keys() & mb.keys())
    ys = np.log(np.array([ma[r][0] for r in rounds]) / np.array([mb[r][0] for r in rounds]))  # (R,)
    return ys, [f"{ma[r][1]}/{mb[r][1]}" for r in rounds]


def log_mean_se(ys: np.ndarray, labels: list[str]) -> tuple[float, float, float, str]:
    """The mean log ratio, its standard error and degrees of freedom, and where the variance
    came from: the rounds (n - 1), or, where an F test says the process pairs differ beyond
    the rounds' noise, the pairs' means (K - 1): one process's rounds cannot show that."""
    from scipy.special import fdtrc  # F's survival function, as scipy.stats.f.sf computes it

    n = ys.size
    mean = float(ys.mean())
    groups = [ys[np.array(labels) == g] for g in sorted(set(labels))]
    k = len(groups)
    if k >= 2 and n > k:
        means = np.array([g.mean() for g in groups])  # (K,)
        ssb = sum(g.size * (m - mean) ** 2 for g, m in zip(groups, means))
        ssw = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
        msb, msw = ssb / (k - 1), ssw / (n - k)
        differ = msw == 0 or fdtrc(k - 1, n - k, msb / msw) < PROCESS_ALPHA
        if differ and msb > 0:
            return mean, math.sqrt(msb / n), float(k - 1), "processes"
    return mean, float(ys.std(ddof=1)) / math.sqrt(n), float(n - 1), "rounds"


def holm(p: dict, alpha: float) -> dict:
    """Holm's step-down: the i-th smallest of m p-values is rejected while each so far is at
    most alpha / (m - i + 1); the keys rejected, each with the alpha it was rejected at."""
    rejected = {}
    for i, (key, value) in enumerate(sorted(p.items(), key=lambda kv: kv[1])):
        if value > alpha / (len(p) - i):
            break
        rejected[key] = alpha / (len(p) - i)
    return rejected


def evidence(medians: Medians, member: Member, best: Member, margin: float,
             level_alpha: float) -> Evidence:  # fmt: skip
    """`member` against `best`: the one-sided p-values either side of 1 + margin and the
    ratio's interval at 1 - level_alpha each side."""
    # Student's t as scipy.stats.t computes it (cdf: stdtr, ppf: stdtrit), called as ufuncs:
    # a race looks after every round, and the distribution objects' checks were most of a look
    from scipy.special import stdtr, stdtrit

    ys, labels = paired_logs(medians, member, best)
    mean, se, df, source = log_mean_se(ys, labels)
    edge = math.log(1 + margin)
    if se == 0:
        above = 0.0 if mean > edge else 1.0
        low = high = math.exp(mean)
        return Evidence(member, math.exp(mean), low, high, above, 1.0 - above, ys.size,
                        len(set(labels)), source)  # fmt: skip
    z = (mean - edge) / se
    q = float(stdtrit(df, 1 - level_alpha))
    return Evidence(
        member, math.exp(mean), math.exp(mean - q * se), math.exp(mean + q * se),
        float(stdtr(df, -z)), float(stdtr(df, z)), int(ys.size), len(set(labels)), source,
    )  # fmt: skip


def best_of(medians: Medians, alive: list[Member]) -> Member:
    """The survivor with the lowest mean log step time over the rounds every survivor ran."""
    common = set.intersection(*(set(medians[m]) for m in alive))
    logs = {m: sum(math.log(t) for r, (t, _) in medians[m].items() if r in common) for m in alive}
    return min(alive, key=logs.__getitem__)


def look(medians: Medians, alive: list[Member], r: int, *, margin: float,
         max_rounds: int, first: int = FIRST_TEST) -> Look | None:  # fmt: skip
    """The look after round r (None before the first test, or with one survivor): the best,
    each other survivor's evidence, the dropped (Holm over p_slower at `spent(r)`) and whether
    the rest are equivalent (Holm over p_within at the same alpha rejects them all)."""
    alpha = spent(r, first, max_rounds)
    if alpha <= 0 or len(alive) < 2:
        return None
    best = best_of(medians, alive)
    others = [m for m in alive if m != best]
    found = tuple(evidence(medians, m, best, margin, alpha / len(others)) for m in others)
    dropped = holm({e.member: e.p_slower for e in found}, alpha)
    within = holm({e.member: e.p_within for e in found}, alpha)
    # a dropped one's interval at the level Holm dropped it at: its low end is past 1 + margin
    found = tuple(evidence(medians, e.member, best, margin, dropped[e.member])
                  if e.member in dropped else e for e in found)  # fmt: skip
    kept = [e.member for e in found if e.member not in dropped]
    equivalent = all(m in within for m in kept)
    ordered = tuple(m for m in others if m in dropped)
    return Look(r, best, alpha, found, ordered, equivalent)
