"""A comparison's run-to-run spread on this machine, from its earlier runs: what one run cannot see.

What it is: `Past` (one finished run's log ratio, the within-process part of its variance and
when it ran), `Calibration` (the earlier runs of one key, screened: `screened` keeps a run far
outside the others' robust band out of the spread and names it) and
`Calibration.interval`, a run's ratio interval with the variance its processes and its run
share, estimated from the earlier runs: tau^2 = var(earlier estimates) - mean(their within),
plus this run's own within-process variance, at Satterthwaite's degrees of freedom. It is
the machine-keyed estimate pyperf's calibration stands for: two processes give a comparison's
between-process variance one degree of freedom (t = 12.7), and an effect every process of a
run shares (the neighbours' load that hour, against a floor probed on the same cores) is in
no interval a single run computes; six `decode` runs' floor intervals held the others' median
in 2 to 4 of 6 (`benchmarks/coverage.py`).
What it is not: the files (`history_store`: keys, locking, listing) or a cache of results (an
earlier run's estimate never stands in for this run's), or a model of why runs differ.
Invariant: history is used only with at least MIN_RUNS earlier runs of the same key and when
this run's estimate lies inside their prediction interval (a changed machine, or a run unlike
its history, keeps its own interval); every interval says where its variance came from, and
only a run that finished is recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from nanobench.harness.statistics.stats import Interval
from nanobench.harness.statistics.t_intervals import Part, satterthwaite_interval

MIN_RUNS = 3  # earlier runs before their spread is used: 2 degrees of freedom, t = 4.3
KEEP_RUNS = 20  # the most recent runs a calibration reads: a machine drifts over weeks
CHECK_ALPHA = 0.05  # a run outside its history's 95% prediction interval keeps its own
# A run outside the others' prediction interval at this familywise level (Bonferroni over the
# runs) is out of band: a defect's run (one worker at 164 ms a window, log ratio 2.9) is never
# averaged into tau^2. Sound runs are kept out about 1% of the time.
SCREEN_ALPHA = 0.01


@dataclass(frozen=True)
class Past:
    """One finished run of a comparison: mean log ratio and its within-process variance."""

    log_ratio: float
    within_var: float  # s_w^2 / R: the part of Var(log_ratio) that more rounds shrink
    rounds: int
    at: str  # when the run finished, UTC, ISO 8601 to the second

    def when(self) -> str:
        """'2026-12-03 15:20': the minute the run finished, for a row."""
        return self.at[:16].replace("T", " ")


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def within_var(y: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
    """(s_w^2 / R, its degrees of freedom): the pooled within-slot variance of log ratios y."""
    groups = [y[labels == p] for p in sorted(set(labels))]
    df = int(y.size) - len(groups)
    if df < 1:
        return math.nan, 0
    s_w2 = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df
    return s_w2 / y.size, df


def past_of(num_ms, den_ms, processes) -> Past | None:
    """A finished run's record of one comparison; None with fewer than two rounds a slot."""
    y = np.log(np.asarray(num_ms, dtype=float) / np.asarray(den_ms, dtype=float))  # [rounds]
    labels = np.asarray([str(p) for p in processes])
    var, df = within_var(y, labels) if y.size else (math.nan, 0)
    if df < 1 or not math.isfinite(var):
        return None
    return Past(float(y.mean()), var, int(y.size), now_utc())


def screened(pasts: tuple[Past, ...]) -> tuple[tuple[Past, ...], tuple[Past, ...]]:
    """(in band, out of band): a run is out where it lies outside the prediction interval of
    the others (leave one out, so the wild run never widens the band that judges it), at
    SCREEN_ALPHA over all the runs. It takes three others to judge one: fewer keep every run."""
    from scipy.stats import t

    n = len(pasts)
    if n < MIN_RUNS + 1:
        return pasts, ()
    y = np.asarray([p.log_ratio for p in pasts])  # [runs]
    w = np.asarray([p.within_var for p in pasts])  # [runs]
    q = float(t.ppf(1 - SCREEN_ALPHA / (2 * n), n - 2))
    inside = []
    for i in range(n):
        others, noise = np.delete(y, i), float(np.delete(w, i).mean())
        # their spread, never below their own rounds' noise: runs that agree too well by chance
        var = max(float(np.var(others, ddof=1)), noise)
        inside.append(abs(y[i] - others.mean()) <= q * math.sqrt(var * (1 + 1 / (n - 1))))
    return (
        tuple(p for p, ok in zip(pasts, inside) if ok),
        tuple(p for p, ok in zip(pasts, inside) if not ok),
    )


@dataclass(frozen=True)
class Calibration:
    """The earlier runs of one key, oldest first: `pasts` in band, `out` kept out of the spread,
    `skipped` lines of the file that were unreadable or not a run's."""

    pasts: tuple[Past, ...]
    out: tuple[Past, ...] = field(default=())
    skipped: int = 0

    @classmethod
    def of(cls, pasts: tuple[Past, ...], skipped: int = 0) -> Calibration:
        """The latest KEEP_RUNS runs, screened."""
        kept, out = screened(tuple(pasts[-KEEP_RUNS:]))
        return cls(kept, out, skipped)

    @property
    def runs(self) -> int:
        return len(self.pasts)

    def since(self) -> str:
        """'since 2026-12-01 09:12': the oldest run in band."""
        return f"since {self.pasts[0].when()}" if self.pasts else ""

    def kept_out(self) -> str:
        """'1 run out of band kept out (2026-12-02 14:03, 18.3x)', or ''."""
        if not self.out:
            return ""
        named = ", ".join(f"{p.when()}, {math.exp(p.log_ratio):.3g}x" for p in self.out[:2])
        more = f" and {len(self.out) - 2} more" if len(self.out) > 2 else ""
        runs = "run" if len(self.out) == 1 else "runs"
        return f"{len(self.out)} {runs} out of band kept out ({named}{more})"

    def unreadable(self) -> str:
        if not self.skipped:
            return ""
        return f"{self.skipped} unreadable line{'s' if self.skipped != 1 else ''} skipped"

    def source(self) -> str:
        """What a lent interval says of itself: how many runs, since when, what was kept out."""
        runs = f"{self.runs} earlier run{'s' if self.runs != 1 else ''}"
        said = [f"history: {runs} on this machine {self.since()}", self.kept_out(),
                self.unreadable()]  # fmt: skip
        return "; ".join(s for s in said if s)

    def describe(self) -> str:
        """The row's history note, lent or not."""
        if not self.runs and not self.out:
            return "; ".join(s for s in ("none yet for this code", self.unreadable()) if s)
        runs = f"{self.runs} earlier run{'s' if self.runs != 1 else ''} of this code"
        said = [f"{runs} {self.since()}".rstrip(), self.kept_out(), self.unreadable()]
        if self.runs < MIN_RUNS:
            said.append(f"lends from {MIN_RUNS}")
        return "; ".join(s for s in said if s)

    def tau2(self) -> float:
        """The variance of a run's estimate that its rounds do not shrink, never below 0."""
        est = [p.log_ratio for p in self.pasts]
        return max(
            0.0, float(np.var(est, ddof=1)) - float(np.mean([p.within_var for p in self.pasts]))
        )

    def consistent(self, estimate: float, within_now: float) -> bool:
        """This run's estimate inside the earlier runs' prediction interval (CHECK_ALPHA)."""
        from scipy.stats import t

        est = np.asarray([p.log_ratio for p in self.pasts])
        n = est.size
        spread = self.tau2() + within_now + float(np.var(est, ddof=1)) / n
        q = float(t.ppf(1 - CHECK_ALPHA / 2, n - 1))
        return abs(estimate - float(est.mean())) <= q * math.sqrt(spread)

    def interval(self, num_ms, den_ms, processes, confidence: float) -> Interval | None:
        """exp(mean y +- t_df sqrt(tau^2 + s_w^2 / R)); None without enough history, with too
        few rounds, or when this run is unlike its history."""
        if self.runs < MIN_RUNS:
            return None
        y = np.log(np.asarray(num_ms, dtype=float) / np.asarray(den_ms, dtype=float))
        labels = np.asarray([str(p) for p in processes])
        within, df_w = within_var(y, labels) if y.size else (math.nan, 0)
        if df_w < 1:
            return None
        estimate = float(y.mean())
        if not self.consistent(estimate, within):
            return None
        return satterthwaite_interval(
            log_mean=estimate, shared=Part(self.tau2(), self.runs - 1), within=Part(within, df_w),
            rounds=int(y.size), processes=len(set(labels)), source=self.source(),
            confidence=confidence,
        )  # fmt: skip
