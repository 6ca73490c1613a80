"""Interleaved rounds: compared systems take turns at timed windows until their ratios are tight.

What it is: `Window` (one system's timed steps in one round) and `Sample` (one timed step, a row
of `<command>-samples.csv`), `time_steps` (the timing loop every worker runs, with an injectable
clock), `RoundPlan` (--rounds, --max-rounds, --rel-ci, --budget-s, validated), `rotation` (ABC,
BCA, CAB, ...), `run_rounds` (hand one system at a time a window, rotating the order each round,
until every comparison's interval is as tight as asked, the rounds run out or the budget is
spent) and `intervals` (each comparison's ratio interval from the windows).
What it is not: a process manager (`nanobench.harness.fresh.LiveWorker` is) or statistics
(`nanobench.harness.stats` is). A "system" is anything that answers `window(round) -> Window`.
Invariant: one window at a time, never two at once; a system whose window failed runs no more
windows and every window already returned is kept. Drift between rounds hits every system of a
round alike, so a round's ratio is paired.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from nanobench.harness.errors import BadInput
from nanobench.harness.stats import Interval, ratio_interval


@dataclass(frozen=True)
class Window:
    """One system's timed steps in one round; `steady` marks the steps the statistics use."""

    system: str
    round: int
    status: str
    ms: tuple[float, ...] = ()
    built: tuple[int, ...] = ()
    steady: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        # Rebuilt from JSON (lists) as from Python (tuples): the same frozen row either way.
        for name in ("ms", "built", "steady"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def steady_ms(self) -> list[float]:
        return [m for m, s in zip(self.ms, self.steady) if s]

    def median_ms(self) -> float | None:
        """The median of the steady steps; None when the window has none."""
        values = sorted(self.steady_ms())
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

    def samples(self) -> list[Sample]:
        return [
            Sample(self.system, self.round, i + 1, m, b, s)
            for i, (m, b, s) in enumerate(zip(self.ms, self.built, self.steady))
        ]


@dataclass(frozen=True)
class Sample:
    """One timed step: a row of `<command>-samples.csv` (long format)."""

    system: str
    round: int
    step: int
    ms: float
    built: int
    steady: bool


@dataclass(frozen=True)
class Comparison:
    """The ratio numerator / denominator of two systems' step times."""

    name: str
    numerator: str
    denominator: str


@dataclass(frozen=True)
class RoundPlan:
    min_rounds: int = 3
    max_rounds: int = 30
    rel_ci: float = 0.03
    budget_s: float = 120.0


def round_plan(rounds: int, max_rounds: int, rel_ci: float, budget_s: float) -> RoundPlan:
    """The options, checked: one line naming the option for each mistake."""
    if rounds < 1:
        raise BadInput(f"--rounds {rounds}: expected a positive integer")
    if max_rounds < rounds:
        raise BadInput(f"--max-rounds {max_rounds}: expected at least --rounds ({rounds})")
    if not 0 < rel_ci < 1:
        raise BadInput(f"--rel-ci {rel_ci}: expected a fraction between 0 and 1, e.g. 0.03")
    if not budget_s > 0:
        raise BadInput(f"--budget-s {budget_s}: expected a positive number of seconds")
    return RoundPlan(rounds, max_rounds, rel_ci, budget_s)


def time_steps(
    step: Callable[[], int],
    count: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], None] = lambda: None,
) -> tuple[list[float], list[int]]:
    """Run `step` count times; ms of each (device synchronised both sides) and what it built."""
    ms, built = [], []
    for _ in range(count):
        sync()
        t0 = clock()
        builds = step()
        sync()
        ms.append((clock() - t0) * 1e3)
        built.append(builds)
    return ms, built


def rotation(systems: list[str], round_index: int) -> list[str]:
    """Round r starts at system r mod n: ABC, BCA, CAB, ..."""
    if not systems:
        return []
    k = round_index % len(systems)
    return systems[k:] + systems[:k]


def paired_medians(
    windows: Iterable[Window], numerator: str, denominator: str
) -> tuple[list[float], list[float]]:
    """Window medians of the rounds in which both systems have a steady window, by round."""
    by: dict[tuple[str, int], float] = {}
    for w in windows:
        median = w.median_ms() if w.status == "ok" else None
        if median:
            by[(w.system, w.round)] = median
    rounds = sorted({r for s, r in by if s == numerator} & {r for s, r in by if s == denominator})
    return [by[(numerator, r)] for r in rounds], [by[(denominator, r)] for r in rounds]


def intervals(windows: list[Window], comparisons: Iterable[Comparison]) -> dict[str, Interval]:
    return {
        c.name: ratio_interval(*paired_medians(windows, c.numerator, c.denominator))
        for c in comparisons
    }


def run_rounds(
    systems: Mapping[str, Callable[[int], Window]],
    plan: RoundPlan,
    comparisons: list[Comparison],
    *,
    clock: Callable[[], float] = time.monotonic,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict[str, Interval]], None] = lambda r, i: None,
) -> list[Window]:
    """Rounds of one window per live system, in rotating order, until the stop rule says stop.

    Stop after round r (counting from 1) when r >= min_rounds and every comparison between two
    live systems has rel_half_width <= rel_ci, or r == max_rounds, or budget_s has passed.
    """
    start = clock()
    live = list(systems)
    windows: list[Window] = []
    for r in range(plan.max_rounds):
        for name in rotation(live, r):
            window = systems[name](r + 1)
            windows.append(window)
            on_window(window)
            if window.status != "ok":
                live.remove(name)
        found = intervals(windows, comparisons)
        on_round(r + 1, found)
        open_ones = [
            found[c.name] for c in comparisons if c.numerator in live and c.denominator in live
        ]
        tight = all(i.rel_half_width <= plan.rel_ci for i in open_ones)
        if not live or (r + 1 >= plan.min_rounds and tight):
            break
        if clock() - start >= plan.budget_s:
            break
    return windows


def describe(name: str, interval: Interval) -> str:
    """'dynamic/off 0.81x [0.78, 0.84] (5 rounds)' for a progress line."""
    if math.isnan(interval.estimate):
        return f"{name} -"
    if math.isnan(interval.low):
        return f"{name} {interval.estimate:.2f}x ({interval.rounds} rounds, no interval yet)"
    return (
        f"{name} {interval.estimate:.2f}x [{interval.low:.2f}, {interval.high:.2f}] "
        f"({interval.rounds} rounds)"
    )


def live_window(worker, system: str, timeout: float) -> Callable[[int], Window]:
    """A live worker (`nanobench.harness.fresh.LiveWorker`) as a system: each round one request."""

    def window(round_index: int) -> Window:
        row = worker.request({"op": "window", "round": round_index}, timeout)
        if row.get("status") != "ok":
            return Window(system, round_index, str(row.get("status")))
        return Window(**{**row, "system": system})

    return window


def first_pass_window(system: str, row: dict) -> Window:
    """A worker's untimed-by-rounds first pass (round 0): its builds are in `built`."""
    built = tuple(row.get("builds_per_step") or ())
    ms = tuple(row.get("step_ms_all") or ())
    return Window(system, 0, "ok", ms, built, tuple(b == 0 for b in built))


def sample_rows(windows: Iterable[Window], label: str) -> list[dict]:
    """Every timed step as a long-format row; `label` names the system column (system, mode)."""
    return [
        {label: s.system, "round": s.round, "step": s.step, "ms": round(s.ms, 5),
         "built": s.built, "steady": s.steady}
        for w in windows
        for s in w.samples()
    ]  # fmt: skip


SAMPLE_COLUMNS = ("round", "step", "ms", "built", "steady")
