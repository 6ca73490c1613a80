"""The race's answer: a row per configuration, a row per configuration per round, the decision.

What it is: `ConfigRow` (one configuration: its outcome and reason, step ms, its ratio to eager
off and to the best with their 95% intervals, cold and warm compile seconds, breakeven steps,
what it costs a start at --steps-per-start), `RoundRow` (who was alive each round, its window's
median and its ratio to the best at that look), `total_cost_s` and `envelope` (which
configuration costs least a start at each horizon, and where that changes), `Decision` (the
choice at --steps-per-start and the horizons where it changes), and `answer(...)`, which
derives all of them from a `bench.RaceResult`.
What it is not: the race (`tune.bench`), its rule (`tune.race`) or the table (`reports.tune`).
Invariant: every figure is derived from the windows the race timed: a ratio is paired by
round (`harness.statistics.stats.ratio_interval`, hierarchical over processes), never of two
medians; a configuration that did not finish ok has no timing and is in no decision.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace

from nanobench.cost.compile import breakeven_steps
from nanobench.harness.statistics.stats import ratio_interval
from nanobench.harness.step.knobs import unsafe_of
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import paired_rounds
from nanobench.tune.bench import SURVIVOR, Outcome, RaceResult
from nanobench.tune.race import best_of, evidence
from nanobench.tune.space import OFF, Config, Space

NOT_RUN = "not run"  # an interrupt came first


@dataclass(frozen=True)
class ConfigRow:
    config: str  # "dynamic + freezing"
    mode: str
    knobs: str  # the --try side's text ("" none)
    outcome: str  # survivor | dropped | disqualified | pruned | merged | not run
    reason: str = ""
    dropped_round: int | None = None
    step_ms: float | None = None  # the median of its windows' medians
    vs_off: float | None = None  # its step / eager off's, paired by round
    vs_off_low: float | None = None
    vs_off_high: float | None = None
    # its step / the best survivor's, by the race's own test (`race.evidence`) at 95%: the
    # interval that dropped it or kept it, over every round both ran
    vs_best: float | None = None
    vs_best_low: float | None = None
    vs_best_high: float | None = None
    compile_s: float | None = None  # its cold compile, set up alone
    # where it read the code another configuration generated (`Space.shares`): that one's
    # name; its cold compile is then that one's, and its own read of the cache is beside it
    compiled_by: str = ""
    compile_read_s: float | None = None
    compile_warm_s: float | None = None  # process 2's, from the first's caches
    breakeven_steps: float | None = None  # the compile a start pays / the step it saves
    cost_per_start_s: float | None = None  # a start's compile + --steps-per-start steps
    rounds: int = 0
    processes: int = 0
    unsafe: str = ""  # why torch calls a knob unsafe, or what it assumes
    capture_sizes: str = ""  # its capture list's batch sizes ("" none), "1,2,4,8"
    record_s: float | None = None  # recording that list's CUDA graphs: every start pays it
    side: str = ""  # "" in a race; old or new where `compare` reads two saved races


@dataclass(frozen=True)
class RoundRow:
    round: int
    config: str
    alive: bool  # still racing after this round's look
    process: int | None = None
    window_ms: float | None = None
    vs_best: float | None = None  # at this round's look (1 for the best), else None
    vs_best_low: float | None = None
    vs_best_high: float | None = None


@dataclass(frozen=True)
class Decision:
    steps_per_start: int
    choice: str  # the cheapest start at that horizon, priced at a restart's (warm) compile
    cost_s: float  # its start's seconds: compile + steps x step
    changes: tuple[tuple[float, str], ...]  # (from this many steps a start, the choice)
    cold_choice: str  # the cheapest first start, on a cold cache
    cold_cost_s: float
    warm_measured: bool  # every compiled survivor's warm start was measured
    # (name, low s, high s) of each start not told from the choice's at that horizon: its cost
    # by the 95% interval of its step against the choice's, paired by round; and at a cold start
    tied: tuple[tuple[str, float, float], ...]
    cold_tied: tuple[tuple[str, float, float], ...]


# (estimate, low, high) of a's step / b's, by configuration name: paired by round, 95%
Ratio = Callable[[str, str], tuple]


def total_cost_s(compile_s: float, step_ms: float, steps: float) -> float:
    """compile_s + steps x step_ms / 1000: what one start costs, compile and decode."""
    return compile_s + steps * step_ms / 1e3


def envelope(costs: list[tuple[str, float, float]]) -> list[tuple[float, str]]:
    """(from steps, name) of the cheapest start over every horizon, for (name, compile_s,
    step_ms) lines: the cheapest compile first, then each crossing to a faster step."""
    current = min(costs, key=lambda c: (c[1], c[2]))
    found, at = [(0.0, current[0])], 0.0
    while True:
        cross = [((d[1] - current[1]) / (current[2] - d[2]) * 1e3, d) for d in costs
                 if d[2] < current[2]]  # fmt: skip
        cross = [(n, d) for n, d in cross if n >= at]
        if not cross:
            return found
        at, current = min(cross, key=lambda nd: (nd[0], nd[1][2]))
        found.append((at, current[0]))


def interval_of(windows, a: Member, b: Member, lent=None) -> tuple[float | None, ...]:
    """a / b paired by round, hierarchical over processes; `lent`: the machine's earlier races'
    calibration, where it is the better informed (`stats.ratio_interval`)."""
    num, den, labels = paired_rounds(windows, a, b)
    if len(num) < 2:
        return None, None, None
    i = ratio_interval(num, den, labels, history=lent)
    ends = [None if math.isnan(v) else round(v, 4) for v in (i.estimate, i.low, i.high)]
    return tuple(ends)


def shared_cold(row, leader: Config, found: RaceResult) -> tuple[str, float | None]:
    """(the configuration whose compile this one's graph came from, that cold compile), where
    its first worker read every graph from their shared cache; ("", None) where it compiled."""
    lead = found.rows.get(leader.member)
    if lead is None or lead is row or not row.fxgraph_cache_hit or row.fxgraph_cache_miss:
        return "", None
    return leader.name, lead.compile_s


def against_best(found: RaceResult, m: Member, best: Member | None, margin: float) -> tuple:
    """(estimate, low, high) of m / best by the race's test, 2.5% each side; the best's 1."""
    if best is None or m == best:
        return 1.0, 1.0, 1.0
    medians = found.medians()
    if len(set(medians.get(m, {})) & set(medians.get(best, {}))) < 2:
        return None, None, None
    e = evidence(medians, m, best, margin, 0.025)
    return round(e.estimate, 4), round(e.low, 4), round(e.high, 4)


def config_row(config: Config, found: RaceResult, best: Member | None, steps: int,
               leader: Config, margin: float, lent=None) -> ConfigRow:  # fmt: skip
    m, windows = config.member, [w for w in found.windows if w.round >= 1 and w.status == "ok"]
    row, outcome = found.rows.get(m), found.outcomes.get(m, Outcome(NOT_RUN))
    mine = [w.median_ms() for w in windows if w.member == m and w.median_ms()]
    base = ConfigRow(config.name, config.mode, config.knobs, outcome.verdict, outcome.reason,
                     outcome.round if outcome.verdict != SURVIVOR else None,
                     rounds=len(mine), processes=len({w.process for w in windows if w.member == m}),
                     unsafe="; ".join(unsafe_of(config.knobs)),
                     capture_sizes=",".join(map(str, config.sizes)))  # fmt: skip
    if row is None or row.status != "ok" or not mine:
        return base
    off = Config(OFF).member
    vs_off = interval_of(windows, m, off, lent) if m != off else (1.0, 1.0, 1.0)
    vs_best = against_best(found, m, best, margin)
    step_ms = statistics.median(mine)
    cold = (row.compile_s or 0.0) if m != off else 0.0
    by, lead_cold = shared_cold(row, leader, found)
    read, cold = (cold, lead_cold) if by and lead_cold is not None else (None, cold)
    warm = row.compile_warm_s if m != off else None
    record = row.record_s or 0.0  # a list's graphs: recorded again at every start
    pay = (warm if warm is not None else cold) + record  # a restart reads the filled cache
    off_ms = statistics.median(w.median_ms() for w in windows if w.member == off) if any(
        w.member == off for w in windows) else None  # fmt: skip
    even = breakeven_steps(pay, (off_ms - step_ms) / 1e3) if off_ms and m != off else None
    return replace(
        base, step_ms=round(step_ms, 4), vs_off=vs_off[0], vs_off_low=vs_off[1],
        vs_off_high=vs_off[2], vs_best=vs_best[0], vs_best_low=vs_best[1],
        vs_best_high=vs_best[2], compile_s=round(cold, 2), compiled_by=by,
        compile_read_s=None if read is None else round(read, 2), compile_warm_s=warm,
        breakeven_steps=None if even is None or math.isinf(even) else round(even),
        cost_per_start_s=round(total_cost_s(pay, step_ms, steps), 3), record_s=row.record_s,
    )  # fmt: skip


def cheapest(lines: list[tuple[str, float, float]], steps: int):
    """(the cheapest start at `steps`, its seconds, the envelope) of (name, compile_s, step_ms)."""
    changes = envelope(lines)
    choice = [name for at, name in changes if at <= steps][-1]
    line = next(ln for ln in lines if ln[0] == choice)
    return choice, total_cost_s(line[1], line[2], steps), tuple(changes)


def rivals(lines: list[tuple[str, float, float]], choice: str, steps: int, ratio: Ratio
           ) -> tuple[tuple[str, float, float], ...]:  # fmt: skip
    """(name, low s, high s) of each start that may cost less than the choice's at `steps`:
    compile_s + steps x the choice's step x the 95% interval of their paired ratio; compile
    seconds as measured. A start whose ratio has no interval is left out."""
    paid, step_ms = next((ln[1], ln[2]) for ln in lines if ln[0] == choice)
    cost = total_cost_s(paid, step_ms, steps)
    found = []
    for name, pay, _ in lines:
        _, low, high = ratio(name, choice) if name != choice else (None, None, None)
        if low is None or high is None:
            continue
        ends = total_cost_s(pay, step_ms * low, steps), total_cost_s(pay, step_ms * high, steps)
        if ends[0] < cost:
            found.append((name, round(ends[0], 3), round(ends[1], 3)))
    return tuple(found)


def decision(rows: list[ConfigRow], steps: int, ratio: Ratio) -> Decision | None:
    """The cheapest start at --steps-per-start among eager off and the survivors, a restart
    priced at its warm compile (the cache a first start filled) and a first start at its cold
    one, each with the starts it cannot be told from (`rivals`); the horizons where the
    restart's choice changes."""
    fit = [r for r in rows if r.step_ms is not None and (r.outcome == SURVIVOR or r.mode == OFF)]
    if not fit:
        return None
    cold = [(r.config, (r.compile_s or 0.0) + (r.record_s or 0.0), r.step_ms) for r in fit]
    warm = [(r.config, (r.compile_warm_s if r.compile_warm_s is not None else r.compile_s or 0.0)
             + (r.record_s or 0.0), r.step_ms) for r in fit]  # fmt: skip
    choice, cost, changes = cheapest(warm, steps)
    cold_choice, cold_cost, _ = cheapest(cold, steps)
    measured = all(r.compile_warm_s is not None for r in fit if r.mode != OFF)
    return Decision(steps, choice, round(cost, 3), changes, cold_choice, round(cold_cost, 3),
                    measured, rivals(warm, choice, steps, ratio),
                    rivals(cold, cold_choice, steps, ratio))  # fmt: skip


def round_rows(found: RaceResult, configs: tuple[Config, ...]) -> list[RoundRow]:
    """Each configuration's window each round it ran, and its ratio to the best at that look."""
    names = {c.member: c.name for c in configs}
    at = {(lk.round, e.member): e for lk in found.looks for e in lk.evidence}
    best = {lk.round: lk.best for lk in found.looks}
    out = []
    for w in sorted(found.windows, key=lambda w: (w.round, names.get(w.member, ""))):
        if w.round < 1:
            continue
        o = found.outcomes[w.member]
        alive = o.verdict == SURVIVOR or (o.round is not None and o.round > w.round)
        e = at.get((w.round, w.member))
        ratio = (1.0, 1.0, 1.0) if best.get(w.round) == w.member else (
            (round(e.estimate, 4), round(e.low, 4), round(e.high, 4)) if e else (None,) * 3)  # fmt: skip
        out.append(RoundRow(w.round, names[w.member], alive, w.process, w.median_ms(), *ratio))
    return out


def paired_ratio(rows: list[ConfigRow], windows, members: dict) -> Ratio:
    """The decision's `Ratio`: against off, a row's own vs eager (with the spread the machine's
    earlier races lend it), inverted where off is the numerator; else paired by round."""
    by, off = {r.config: r for r in rows}, Config(OFF).name

    def ratio(a: str, b: str) -> tuple:
        if off not in (a, b) or a == b:
            return interval_of(windows, members[a], members[b])
        r = by[a if b == off else b]
        ends = r.vs_off, r.vs_off_low, r.vs_off_high
        if None in ends or b == off:
            return ends
        return 1 / ends[0], 1 / ends[2], 1 / ends[1]

    return ratio


def answer(found: RaceResult, space: Space, steps: int, margin: float, lent: dict | None = None):
    """(config rows, round rows, the decision, the best): the race's answer, derived; `lent`,
    each configuration's earlier races on this machine (`tune.history.load`)."""
    alive = found.alive()
    medians = found.medians()
    timed = [m for m in alive if m in medians]
    best = found.looks[-1].best if found.looks and found.looks[-1].best in alive else (
        best_of(medians, timed) if timed else None)  # fmt: skip
    lent = lent or {}
    rows = [config_row(c, found, best, steps, space.cache_of(c), margin, lent.get(c.member))
            for c in space.configs]  # fmt: skip
    windows = [w for w in found.windows if w.round >= 1 and w.status == "ok"]
    ratio = paired_ratio(rows, windows, {c.name: c.member for c in space.configs})
    return rows, round_rows(found, space.configs), decision(rows, steps, ratio), best
