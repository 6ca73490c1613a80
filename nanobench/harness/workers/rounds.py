"""Interleaved rounds: compared systems take turns at timed windows until their ratios are tight.

What it is: `Window` (one member's timed steps in one round) and `Sample` (one timed step, a row
of `<command>-samples.csv`, `runs.samples`), `Comparison` (a ratio of two members, read at the
level it holds together with its family), `time_steps` (the timing loop every worker runs, with an injectable
clock), `RoundPlan` (--rounds, --max-rounds, --rel-ci, --budget-s, validated), `rotation` (ABC,
BCA, CAB, ...), `spread_over` (a system's rounds dealt to its N worker processes in turn, each
window stamped with its process), `looks` and `look_confidence` (the fixed look schedule and
the alpha each look spends), `run_rounds` (hand one system at a time a window, rotating the
order each round, until at a look every comparison's interval is as tight as asked or every
gate is decided, the rounds run out or the budget is spent) and `intervals` (each comparison's
ratio interval from the windows, hierarchical over processes when the rounds came from several,
the run's process pool lent to each: `window_pool`), and `describe` (a progress line's
interval). A live worker as a system and a first pass as a window are the fleet's.
What it is not: a process manager (`nanobench.harness.workers.fresh.LiveWorker` is) or statistics
(`nanobench.harness.statistics.stats` is). A "system" is anything that answers `window(round) -> Window`.
Invariant: one window at a time, never two at once; a system whose window failed runs no more
windows and every window already returned is kept. Drift between rounds hits every system of a
round alike, so a round's ratio is paired; round r of every system runs in its process
(r - 1) mod N + 1, so a pair's two windows come from the same process slot.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from nanobench.harness.errors import BadInput
from nanobench.harness.statistics.pooling import ProcessPool, process_pool
from nanobench.harness.statistics.stats import CONFIDENCE, MIN_ROUNDS, Interval, ratio_interval
from nanobench.harness.workers.member import Member, as_member


@dataclass(frozen=True)
class Window:
    """One system's timed steps in one round; `steady` marks the steps the statistics use."""

    system: str
    round: int
    status: str
    ms: tuple[float, ...] = ()
    built: tuple[int, ...] = ()
    steady: tuple[bool, ...] = ()
    process: int = 1  # which of the system's worker processes timed it, from 1
    side: str = ""  # the member's side: `system` is its name within that side

    def __post_init__(self) -> None:
        # Rebuilt from JSON (lists) as from Python (tuples): the same frozen row either way.
        for name in ("ms", "built", "steady"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def member(self) -> Member:
        return Member(self.side, self.system)

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
            Sample(self.system, self.round, i + 1, m, b, s, self.process, self.side)
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
    process: int = 1
    side: str = ""


@dataclass(frozen=True)
class Comparison:
    """The ratio numerator / denominator of two members' step times; `name` labels it for
    people and keys its history (a plain run's member may be given by its name alone)."""

    name: str
    numerator: Member
    denominator: Member
    # how many intervals hold together with this one (a comparison's changes): it is read at
    # their shared level (`stats.each_level`), the level its change's table prints
    family: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "numerator", as_member(self.numerator))
        object.__setattr__(self, "denominator", as_member(self.denominator))


# Why the rounds stopped (`run_rounds`'s `on_stop`): the evidence, or a limit before it.
DECIDED, BY_BUDGET, BY_MAX_ROUNDS = "decided", "budget", "max rounds"
BY_PROCESSES = "processes"  # what is open is set by the processes' spread: rounds cannot narrow it


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


def rotation(systems: list, round_index: int) -> list:
    """Round r starts at system r mod n: ABC, BCA, CAB, ..."""
    if not systems:
        return []
    k = round_index % len(systems)
    return systems[k:] + systems[:k]


def paired_rounds(
    windows: Iterable[Window], numerator: Member | str, denominator: Member | str
) -> tuple[list[float], list[float], list[str]]:
    """Window medians of the rounds in which both members have a steady window, by round, and
    each pair's process label ("1", or "1/2" should the two windows' processes differ)."""
    numerator, denominator = as_member(numerator), as_member(denominator)
    by: dict[tuple[Member, int], tuple[float, int]] = {}
    for w in windows:
        median = w.median_ms() if w.status == "ok" else None
        if median:
            by[(w.member, w.round)] = (median, w.process)
    rounds = sorted({r for s, r in by if s == numerator} & {r for s, r in by if s == denominator})
    num = [by[(numerator, r)] for r in rounds]
    den = [by[(denominator, r)] for r in rounds]
    labels = [str(p) if p == q else f"{p}/{q}" for (_, p), (_, q) in zip(num, den)]
    return [m for m, _ in num], [m for m, _ in den], labels


def window_pool(windows: Iterable[Window], comparison: Comparison) -> ProcessPool | None:
    """The run's process pool (`pooling.process_pool`) from every system's timed windows,
    checked by the interaction of the systems the comparison leaves out."""
    medians: dict[Member, dict[int, tuple[float, str]]] = {}
    for w in windows:
        median = w.median_ms() if w.status == "ok" and w.round >= 1 else None
        if median:
            medians.setdefault(w.member, {})[w.round] = (median, str(w.process))
    pool = process_pool(medians)
    pair = (comparison.numerator, comparison.denominator)
    rest = process_pool({s: m for s, m in medians.items() if s not in pair})
    return pool.checked_by(rest) if pool is not None else None


def intervals(
    windows: list[Window],
    comparisons: Iterable[Comparison],
    confidence: float = CONFIDENCE,
    history: Mapping | None = None,
) -> dict[str, Interval]:
    """Each comparison's ratio interval, its earlier runs' spread (`history[name]`, a
    `history.Calibration`) or else the run's process pool lent to each."""
    from nanobench.harness.statistics.stats import each_level

    lent = history or {}
    return {
        c.name: ratio_interval(
            *paired_rounds(windows, c.numerator, c.denominator),
            each_level(confidence, c.family),
            window_pool(windows, c),
            lent.get(c.name),
        )  # fmt: skip
        for c in comparisons
    }


def spread_over(workers: list[Callable[[int], Window]]) -> Callable[[int], Window]:
    """One system over N worker processes: round r goes to worker (r - 1) mod N, stamped 1..N.

    Every system deals its rounds the same way, so a round's pair comes from one process slot
    and the slots are independent of each other: what the hierarchical interval resamples.
    """

    def window(round_index: int) -> Window:
        slot = (round_index - 1) % len(workers)
        return replace(workers[slot](round_index), process=slot + 1)

    return window


# A run whose gates are decided still runs on until every ratio is known to about +-10% (high /
# low at most 1.21): a verdict beside [0.74, 1.46] tells a user nothing about the figure itself.
DECIDED_REL_CI = 0.095

# Looks grow by half each time: 5, 8, 12, 18 and the cap of 30, so a run that is decided early
# stops early, and the 5% is not cut into thirty slivers by looking after every round.
LOOK_GROWTH = 1.5


def looks(plan: RoundPlan) -> tuple[int, ...]:
    """The rounds after which the stop rule looks at the intervals, fixed before any timing."""
    first = min(max(plan.min_rounds, MIN_ROUNDS), plan.max_rounds)
    found = [first]
    while found[-1] < plan.max_rounds:
        found.append(min(plan.max_rounds, math.ceil(found[-1] * LOOK_GROWTH)))
    if len(found) > 2 and found[-2] * math.sqrt(LOOK_GROWTH) > plan.max_rounds:
        del found[-2]  # 27 just before a cap of 30 would leave the cap a sliver of the 5%
    return tuple(found)


def look_confidence(plan: RoundPlan, rounds: int) -> float:
    """The level of an interval read after `rounds` rounds: 1 - the alpha its look may spend.

    Alpha spending (Lan and DeMets, the Pocock-type function alpha(t) = alpha ln(1 + (e - 1) t),
    t = rounds / max_rounds): look j spends alpha(t_j) - alpha(t_{j-1}), so the levels of all
    the looks together (a union bound) still miss at most 5%, however often the run looks and
    whichever look it stops at. A run stopped between looks (the budget) spends the next look's.
    """
    alpha = 1 - CONFIDENCE
    schedule = looks(plan)
    j = next((i for i, r in enumerate(schedule) if r >= rounds), len(schedule) - 1)

    def spent(r: int) -> float:
        return alpha * math.log(1 + (math.e - 1) * r / plan.max_rounds)

    return 1 - (spent(schedule[j]) - (spent(schedule[j - 1]) if j else 0.0))


def run_rounds(
    systems: Mapping[Member | str, Callable[[int], Window]],
    plan: RoundPlan,
    comparisons: list[Comparison],
    *,
    clock: Callable[[], float] = time.monotonic,
    decided: Callable[[list[Window], float], bool] = lambda w, c: False,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict[str, Interval]], None] = lambda r, i: None,
    history: Mapping | None = None,
    on_stop: Callable[[str, int], None] = lambda why, r: None,
) -> list[Window]:
    """Rounds of one window per live system, in rotating order, until the stop rule says stop.

    Stop after round r (counting from 1) when r is a look (`looks`) and either every
    comparison between two live systems has rel_half_width <= rel_ci, or every one that more
    rounds could narrow to DECIDED_REL_CI has it there and `decided(windows, level)` says every
    gate of the run is decided at that look's level (`look_confidence`): a ratio whose variance
    is its processes' or its earlier runs' (`rel_half_width_unshrinkable`) waits for no rounds;
    or when r >= min_rounds and no comparison is open; or r == max_rounds, or budget_s has
    passed. on_round sees the intervals at the level a stop after round r would report;
    `history` lends a comparison its earlier runs' spread, as the rows will (`intervals`).
    """
    start = clock()
    systems = {as_member(k): v for k, v in systems.items()}
    live = list(systems)
    windows: list[Window] = []
    for r in range(1, plan.max_rounds + 1):
        for name in rotation(live, r - 1):
            window = systems[name](r)
            windows.append(window)
            on_window(window)
            if window.status != "ok":
                live.remove(name)
        level = look_confidence(plan, r)
        found = intervals(windows, comparisons, level, history)
        on_round(r, found)
        open_ones = [
            found[c.name] for c in comparisons if c.numerator in live and c.denominator in live
        ]
        why = stop_reason(r, plan, live, open_ones, partial(decided, windows, level))
        why = why or (BY_BUDGET if clock() - start >= plan.budget_s else None)
        if why:
            on_stop(why, r)
            break
    else:
        on_stop(BY_MAX_ROUNDS, plan.max_rounds)
    return windows


def stop_reason(r: int, plan: RoundPlan, live: list, open_ones: list,
                decided: Callable[[], bool]) -> str | None:  # fmt: skip
    """Why the rounds stop after round r by the evidence (`run_rounds`), or None: nothing live
    or open; or at a look, every open interval tight, or every one more rounds could narrow
    narrow enough and every gate decided (BY_PROCESSES where some the processes set remain)."""
    if not live or (r >= plan.min_rounds and not open_ones):
        return DECIDED
    widths = [i.rel_half_width for i in open_ones]
    narrowable = [
        i.rel_half_width for i in open_ones if i.rel_half_width_unshrinkable <= DECIDED_REL_CI
    ]
    if r in looks(plan) and (
        all(w <= plan.rel_ci for w in widths)
        or (all(w <= DECIDED_REL_CI for w in narrowable) and decided())
    ):
        return DECIDED if len(narrowable) == len(widths) else BY_PROCESSES
    return None


def describe(name: str, interval: Interval) -> str:
    """'dynamic/off 0.81x [0.78, 0.84] (5 rounds)' for a progress line."""
    if math.isnan(interval.estimate):
        return f"{name} -"
    if math.isnan(interval.low):
        return f"{name} {interval.estimate:.2f}x ({interval.rounds} rounds, no interval yet)"
    over = f" in {interval.processes} processes" if interval.processes > 1 else ""
    return (
        f"{name} {interval.estimate:.2f}x [{interval.low:.2f}, {interval.high:.2f}] "
        f"({interval.rounds} rounds{over})"
    )
