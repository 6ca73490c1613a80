"""Process variance pooled over a run's systems: more degrees of freedom from the same processes.

What it is: `ProcessPool`, the between-process variance of one system's log window time
estimated from every system of a run at once (`process_pool(medians)`). The run is a two-way
layout, systems by rounds, its rounds nested in process slots (round r in slot (r - 1) mod K
for every system, `rounds.spread_over`); removing each round's mean removes the drift, and what
is left of a system's slot means is its process effect: the system-by-slot interaction, with
(S - 1)(K - 1) degrees of freedom where one comparison's own processes have K - 1 (two
processes: 1, whose t quantile is 12.7). `ProcessPool.interval(groups)` is a comparison's
interval with the pool's between-process variance, twice a system's (a ratio's two sides are
two processes), and the comparison's own within-process variance, at Satterthwaite's degrees
of freedom (`t_intervals.satterthwaite_interval` builds it), checked against the run's other systems (`checked_by`).
What it is not: the hierarchical interval of one comparison (`stats._hierarchical`, what a
run falls back to) or a model of why processes differ.
Invariant: the pool is one process variance per run, so it is only applied where the systems
can be checked to agree with it: fewer than three systems (a pool no wider than one
comparison's own), fewer than three processes (a comparison's own disagreement has one degree
of freedom, too few to check), or a comparison whose own processes disagree more than the
run's other systems' do (an F test, p < POOL_ALPHA, the level of every pool in
`t_intervals`), take the comparison's own interval, and every interval says which it used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nanobench.harness.statistics.stats import Interval
from nanobench.harness.statistics.t_intervals import POOL_ALPHA, Part, satterthwaite_interval

MIN_SYSTEMS = 3
MIN_PROCESSES = 3


@dataclass(frozen=True)
class ProcessPool:
    """Mean squares of a run's systems-by-rounds table of log window medians."""

    systems: int
    processes: int
    rounds: int  # complete rounds: every pooled system timed them
    ms_interaction: float  # system x slot: E = within + (rounds / K) process variance
    df_interaction: int  # (S - 1)(K - 1)
    ms_residual: float  # within slots: E = within
    df_residual: int  # (S - 1)(R - K)
    # What a comparison's own processes are checked against: the interaction of the run's
    # other systems (`checked_by`), which its own systems cannot inflate; else the whole pool's.
    check_ms: float | None = None
    check_df: int | None = None

    @property
    def usable(self) -> bool:
        # Two processes give a comparison's own disagreement 1 degree of freedom: too few to
        # check it against the pool, and six decode runs of two processes pooled covered the
        # others' median in 0 to 6 of 6 (benchmarks/coverage.py), so they keep their own.
        return (
            self.systems >= MIN_SYSTEMS
            and self.processes >= MIN_PROCESSES
            and self.df_interaction > 0
        )

    def checked_by(self, rest: ProcessPool | None) -> ProcessPool:
        """This pool, its check the interaction of `rest` (the systems a comparison leaves out)."""
        if rest is None or rest.processes != self.processes:
            return self
        return replace(self, check_ms=rest.ms_interaction, check_df=rest.df_interaction)

    @property
    def variance(self) -> float:
        """One system's process variance, sigma_u^2 = (MS_int - MS_res) / n, never below 0."""
        n = self.rounds / self.processes
        return max(0.0, (self.ms_interaction - self.ms_residual) / n)

    def source(self) -> str:
        return f"pooled: {self.systems} systems x {self.processes} processes"

    def interval(self, y: np.ndarray, labels: np.ndarray, confidence: float) -> Interval | None:
        """exp(mean y +- t_df sqrt(V)) for a comparison's log ratios y by process label, where
        V = 2 sigma_u^2 / K + s_w^2 / R (the pool's process variance, the comparison's own
        within-slot variance); None when the comparison's processes disagree past the pool."""
        from scipy.stats import f

        groups = [y[labels == p] for p in sorted(set(labels))]
        k, size = len(groups), int(y.size)
        if k != self.processes or size <= k:
            return None
        n = size / k
        df_w = size - k
        s_w2 = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df_w
        ms_own = n * float(np.var([g.mean() for g in groups], ddof=1))
        # Under the pool a ratio's slot means vary as two processes' do: E[ms_own] = 2 MS_int.
        check_ms = self.ms_interaction if self.check_ms is None else self.check_ms
        check_df = self.df_interaction if self.check_df is None else self.check_df
        if check_ms > 0 and f.sf(ms_own / (2 * check_ms), k - 1, check_df) < POOL_ALPHA:
            return None
        if check_ms == 0 and ms_own > 0:
            return None
        return satterthwaite_interval(
            log_mean=float(y.mean()), shared=Part(2 * self.variance / k, self.df_interaction),
            within=Part(s_w2 / size, df_w), rounds=size, processes=k, source=self.source(),
            confidence=confidence,
        )  # fmt: skip


def process_pool(medians: dict[str, dict[int, tuple[float, str]]]) -> ProcessPool | None:
    """The pool of `medians[system][round] = (window median ms, process label)`, over the rounds
    every system timed in the same slot; None when fewer than two systems or processes remain."""
    systems = sorted(medians)
    rounds = sorted(set.intersection(*(set(medians[s]) for s in systems))) if systems else []
    rounds = [r for r in rounds if len({medians[s][r][1] for s in systems}) == 1]
    labels = np.asarray([medians[systems[0]][r][1] for r in rounds]) if rounds else np.array([])
    slots = sorted(set(labels))
    if len(systems) < 2 or len(slots) < 2:
        return None
    z = np.log([[medians[s][r][0] for r in rounds] for s in systems])  # (S, R)
    d = z - z.mean(axis=0, keepdims=True)  # round means out: the drift every system shares
    means = np.stack([d[:, labels == p].mean(axis=1) for p in slots], axis=1)  # (S, K)
    counts = np.asarray([(labels == p).sum() for p in slots])  # (K,)
    inter = means - means.mean(axis=1, keepdims=True)  # system means out; slot means are ~0
    s, k, size = len(systems), len(slots), len(rounds)
    df_int, df_res = (s - 1) * (k - 1), (s - 1) * (size - k)
    residual = sum(
        float(((d[:, labels == p] - means[:, [j]]) ** 2).sum()) for j, p in enumerate(slots)
    )
    return ProcessPool(
        systems=s,
        processes=k,
        rounds=size,
        ms_interaction=float((inter**2 * counts).sum()) / df_int,
        df_interaction=df_int,
        ms_residual=residual / df_res if df_res > 0 else 0.0,
        df_residual=df_res,
    )
