"""A comparison's run-to-run spread on this machine, from its earlier runs: what one run cannot see.

What it is: `Past` (one finished run's log ratio and the within-process part of its variance),
`RunHistory` (a JSON-lines file per key under the nanobench cache, `history_key`: the machine
facts, the run's settings and the comparison), `Calibration` (the earlier runs of one key) and
`Calibration.interval`, a run's ratio interval with the variance its processes and its run
share, estimated from the earlier runs: tau^2 = var(earlier estimates) - mean(their within),
plus this run's own within-process variance, at Satterthwaite's degrees of freedom. It is
the machine-keyed estimate pyperf's calibration stands for: two processes give a comparison's
between-process variance one degree of freedom (t = 12.7), and an effect every process of a
run shares (the neighbours' load that hour, against a floor probed on the same cores) is in
no interval a single run computes; six `decode` runs' floor intervals held the others' median
in 2 to 4 of 6 (`benchmarks/coverage.py`).
What it is not: a cache of results (an earlier run's estimate never stands in for this run's)
or a model of why runs differ.
Invariant: history is used only with at least MIN_RUNS earlier runs of the same key and when
this run's estimate lies inside their prediction interval (a changed machine, or a run unlike
its history, keeps its own interval); every interval says where its variance came from, and
only a run that finished is recorded.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nanobench.harness.stats import Interval, bounded_exp

MIN_RUNS = 3  # earlier runs before their spread is used: 2 degrees of freedom, t = 4.3
KEEP_RUNS = 20  # the most recent runs a calibration reads: a machine drifts over weeks
CHECK_ALPHA = 0.05  # a run outside its history's 95% prediction interval keeps its own
HISTORY_ENV = "NANOBENCH_HISTORY"


@dataclass(frozen=True)
class Past:
    """One finished run of a comparison: mean log ratio and its within-process variance."""

    log_ratio: float
    within_var: float  # s_w^2 / R: the part of Var(log_ratio) that more rounds shrink
    rounds: int


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
    return Past(float(y.mean()), var, int(y.size))


@dataclass(frozen=True)
class Calibration:
    """The earlier runs of one key, oldest first."""

    pasts: tuple[Past, ...]

    @property
    def runs(self) -> int:
        return len(self.pasts)

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
        from scipy.stats import t

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
        tau2, df_tau = self.tau2(), self.runs - 1
        total = tau2 + within
        k = len(set(labels))
        source = f"history: {self.runs} earlier runs on this machine"
        if total == 0:
            point = math.exp(estimate)
            return Interval(point, point, point, int(y.size), k, 1.0, math.inf, source, df_tau)
        df = max(total**2 / (tau2**2 / df_tau + within**2 / df_w), float(df_tau))
        q = float(t.ppf(0.5 + confidence / 2, df)) * math.sqrt(total)
        return Interval(
            math.exp(estimate), bounded_exp(estimate - q), bounded_exp(estimate + q),
            int(y.size), k, within / total, round(df, 2), source, df_tau,
        )  # fmt: skip


def history_root() -> Path:
    """NANOBENCH_HISTORY, else `history/` under the nanobench cache."""
    if os.environ.get(HISTORY_ENV):
        return Path(os.environ[HISTORY_ENV])
    from engine.weights import cache_root

    return cache_root() / "history"


def machine_facts() -> dict:
    """What makes two runs the same machine: CPU model, usable cores, torch's version."""
    from importlib.metadata import version

    from nanobench.harness.inductor_cache import cpu_model

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cores": cores, "torch": version("torch")}


def history_key(command: str, settings: dict, comparison: str) -> str:
    """A hash of the machine facts, the command's settings and the comparison's name."""
    doc = {"command": command, "machine": machine_facts(), "settings": settings, "of": comparison}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


class RunHistory:
    """One JSON-lines file per key; a line is one finished run's `Past`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else history_root()

    def calibration(self, key: str) -> Calibration:
        path = self.root / f"{key}.jsonl"
        if not path.exists():
            return Calibration(())
        pasts = []
        for line in path.read_text().splitlines():
            try:
                pasts.append(Past(**json.loads(line)))
            except (TypeError, ValueError):
                continue  # a line cut short by a killed run: the others still count
        return Calibration(tuple(pasts[-KEEP_RUNS:]))

    def record(self, key: str, past: Past) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key}.jsonl", "a") as f:
            f.write(json.dumps(asdict(past)) + "\n")
