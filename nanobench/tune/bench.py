"""The race, run: one fleet, one fresh worker per configuration, interleaved rounds, drops.

What it is: `Race(spec, space, workers, dtype, ...)`, whose `run()` sets up each
configuration's first worker alone (its cold compile timed alone, held to --compile-budget-s),
holds every compiled output to eager off's and disqualifies what fell back, then times rounds:
every survivor one window a round in rotating order, a look after each (`race.look`) dropping
the ones the evidence puts beyond the margin, until one is left, the rest are equivalent, the
rounds run out or --budget-s has passed. A survivor gets one more process after each
`GROW_EVERY` rounds (up to --processes); a dropped one is killed and gets none.
`RaceResult` is what it found: each configuration's first-pass row, every window, each
outcome, every look, why it stopped and the seconds spent compiling, starting and timing.
What it is not: the rule (`tune.race`), the answer (`tune.rows`) or the report.
Invariant: one window at a time, never two; a window's median is on record before the next
window runs; every dropped or disqualified configuration keeps its reason and round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from nanobench.compile.bench import WORKER, ModePart, member_env
from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.step.output_check import output_change
from nanobench.harness.step.targets import raised_by_target
from nanobench.harness.workers.fleet import Fleet, live_window, timing_core
from nanobench.harness.workers.fresh import start_side_by_side
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Window, rotation
from nanobench.tune.race import FIRST_TEST, Look, Medians, look
from nanobench.tune.space import OFF, Config, Space
from nanobench.tune.spec import TuneSpec

SURVIVOR, DROPPED, DISQUALIFIED = "survivor", "dropped", "disqualified"
# Rounds between one more process for every survivor. A round costs a window (0.05 to 0.3 s on
# the built-in model), a process a warm start (8 to 35 s): on this project's 2-core box a window's
# log scatter is 0.07 and a process's offset 0.02 (tests/data/tune_noise.csv), so the rounds'
# standard error of a log ratio (0.1 / sqrt(n)) reaches the processes' spread (0.028) near round
# 13: before it, rounds buy more than a process does.
GROW_EVERY = 15
# Why the race stopped
ONE_LEFT, EQUIVALENT = "one left", "equivalent"
BY_BUDGET, BY_MAX_ROUNDS, NONE_LEFT = "budget", "max rounds", "nothing left to race"


@dataclass(frozen=True)
class Outcome:
    verdict: str  # survivor | dropped | disqualified
    reason: str = ""
    round: int | None = None  # the round it was dropped at (0: before the rounds)


@dataclass
class Phases:
    """Where the race's seconds went."""

    compiles_s: float = 0.0  # every configuration's first worker, set up alone
    starts_s: float = 0.0  # later processes, set up side by side
    later: int = 0  # how many
    rounds_s: float = 0.0  # the timed windows and the looks


@dataclass
class RaceResult:
    rows: dict[Member, CompileRow] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    outcomes: dict[Member, Outcome] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)
    stop: str = ""
    rounds: int = 0
    phases: Phases = field(default_factory=Phases)
    # `medians()` so far, and how many windows they hold: the windows are only appended to,
    # and a look a round over every window again made a race's looks quadratic in its rounds
    _medians: Medians = field(default_factory=dict, init=False, repr=False)
    _read: int = field(default=0, init=False, repr=False)

    def medians(self) -> Medians:
        """Each configuration's timed windows' medians by round, with their process."""
        for w in self.windows[self._read :]:
            median = w.median_ms() if w.status == "ok" and w.round >= 1 else None
            if median:
                self._medians.setdefault(w.member, {})[w.round] = (median, w.process)
        self._read = len(self.windows)
        return self._medians

    def alive(self) -> list[Member]:
        return [m for m, o in self.outcomes.items() if o.verdict == SURVIVOR]


class Race:
    def __init__(self, spec: TuneSpec, space: Space, workers: dict[str, WorkerSpec], dtype: str,
                 on_status: Callable[[str], None],
                 on_round: Callable[[int, RaceResult, Look | None], None],
                 on_first: Callable[[], None] = lambda: None):  # fmt: skip
        # `on_first`: after each first worker that did not raise (a --target's held estimate)
        self.spec, self.space, self.workers, self.dtype = spec, space, workers, dtype
        self.on_status, self.on_round, self.on_first = on_status, on_round, on_first
        self.found = RaceResult()
        self.parts: dict[Member, ModePart] = {}
        self.started = time.monotonic()

    def run(self) -> RaceResult:
        with Fleet(WORKER, self.spec.timeout, 1, self.on_status) as self.fleet:
            for config in self.space.configs:
                self.first(config)
            self.held_to_eager()
            self.rounds()
            # every survivor's warm start (its process 2) measured, where the race ended first
            self.more_processes([m for m in self.found.alive()
                                 if m.name != OFF and len(self.fleet.workers[m]) < 2])  # fmt: skip
        return self.found

    def out(self, member: Member, verdict: str, reason: str, r: int) -> None:
        """A configuration leaves the race: its workers are killed, its reason kept."""
        self.found.outcomes[member] = Outcome(verdict, reason, r)
        for worker in self.fleet.workers.get(member, []):
            worker.kill()

    def env(self, config: Config) -> dict[str, str]:
        """Its workers' environment: a cold cache of its own, or the one its Inductor settings'
        first configuration filled (`Space.shares`: the same generated code, compiled once)."""
        leader = self.space.cache_of(config)
        if leader != config:
            return self.parts[leader.member].env
        return member_env(self.fleet, config.member, self.workers[config.side])

    def first(self, config: Config) -> None:
        """A configuration's first worker, set up alone: its row, its cold compile checked."""
        m, spec = config.member, self.workers[config.side]
        part = ModePart(m, spec, self.env(config), self.on_status)
        self.parts[m] = part
        t0 = time.monotonic()
        deadline = self.compile_deadline_s(config)
        row = part.first(part.start(self.fleet, deadline))
        took = time.monotonic() - t0
        self.found.phases.compiles_s += took
        self.found.rows[m] = row
        self.found.outcomes[m] = Outcome(SURVIVOR)
        budget = self.spec.compile_budget_s
        raised = raised_by_target(row.status)
        if raised is not None:  # the user's own target raised: their input, one line, exit 2
            raise raised
        self.on_first()
        if row.status == "timeout" and deadline < self.spec.timeout:
            self.out(m, DISQUALIFIED, f"its cold compile passed --compile-budget-s {budget:g}: "
                                      f"stopped while compiling, {took:.0f} s after its start "
                                      f"(eager off set up in {self.off_setup_s():.0f} s)", 0)  # fmt: skip
        elif row.status != "ok":
            self.out(m, DISQUALIFIED, row.status, 0)
        elif (row.compile_s or 0) > budget:
            self.out(m, DISQUALIFIED, f"its cold compile took {row.compile_s:.0f} s, past "
                                      f"--compile-budget-s {budget:g}", 0)  # fmt: skip

    def off_setup_s(self) -> float:
        """Eager off's first worker's seconds from spawn to ready (0 before it is)."""
        return self.fleet.setup_s.get(Config(OFF).member, {}).get(1, 0.0)

    def compile_deadline_s(self, config: Config) -> float:
        """How long a compiled configuration's first worker may set up before its cold compile
        is past --compile-budget-s: what off's took, with a tenth more for its noise, plus the
        budget and a twentieth more; off itself, and a run with no off yet, the --timeout.
        deadline_s = min(timeout_s, 1.1 x off_setup_s + 1.05 x compile_budget_s)"""
        off = self.off_setup_s()
        if config.mode == OFF or not off:
            return self.spec.timeout
        return min(self.spec.timeout, 1.1 * off + 1.05 * self.spec.compile_budget_s)

    def held_to_eager(self) -> None:
        """Correct first: a compiled output that left eager off's, or a step that fell back to
        eager past dynamo's recompile limit, is disqualified, never timed."""
        off = self.found.rows.get(Config(OFF).member)
        for m, row in self.found.rows.items():
            if m.name == OFF or self.found.outcomes[m].verdict != SURVIVOR:
                continue
            if row.fell_back:
                self.out(m, DISQUALIFIED, f"fell back to eager past dynamo's recompile limit "
                                          f"({row.recompiles} recompiles)", 0)  # fmt: skip
                continue
            said = output_change(off.outputs if off else None, row.outputs, self.dtype, "eager off")
            if said:
                self.out(m, DISQUALIFIED, f"{said} against eager off", 0)

    def window(self, m: Member, r: int) -> None:
        workers = self.fleet.workers[m]
        slot = (r - 1) % len(workers)
        timed = live_window(workers[slot], m, self.spec.timeout, 1, timing_core())(r)
        self.timed(m, r, replace(timed, process=slot + 1))

    def timed(self, m: Member, r: int, timed: Window) -> None:
        """A window kept; a configuration whose window failed, or timed no steady step, out."""
        self.found.windows.append(timed)
        if timed.status != "ok":
            self.out(m, DISQUALIFIED, f"round {r}: {timed.status}", r)
        elif timed.median_ms() is None:
            # compiling inside the timing: a rebuild a step, no steady step to race
            self.out(m, DISQUALIFIED, f"round {r}: every timed step built a graph (it "
                                      "recompiles as it runs): no steady step to time", r)  # fmt: skip

    def rounds(self) -> None:
        """Rounds until the race is decided or a limit ends it (`stopped`)."""
        found, spec = self.found, self.spec
        for r in range(1, spec.max_rounds + 1):
            t0 = time.monotonic()
            for m in rotation(found.alive(), r - 1):
                self.window(m, r)
            seen = look(found.medians(), found.alive(), r, margin=spec.margin,
                        max_rounds=spec.max_rounds)  # fmt: skip
            for m in seen.dropped if seen else ():
                e = next(e for e in seen.evidence if e.member == m)
                self.out(m, DROPPED, f"{e.estimate:.3f}x the best's step "
                                     f"[{e.low:.3f}, {e.high:.3f}], past 1 + --margin "
                                     f"{spec.margin:g}", r)  # fmt: skip
            if seen:
                found.looks.append(seen)
            found.rounds = r
            found.phases.rounds_s += time.monotonic() - t0
            self.on_round(r, found, seen)
            found.stop = self.stopped(r, seen)
            if found.stop:
                return
            if r % GROW_EVERY == 0:
                self.more_processes(self.to_grow(seen))
        found.stop = BY_MAX_ROUNDS

    def to_grow(self, seen: Look | None) -> list[Member]:
        """The survivors that get one more process (up to --processes): each with one, whose
        offset its own rounds cannot show; past two, only where the look found process pairs
        that differ beyond the rounds' noise (with none, a third buys what rounds buy)."""
        alive = self.found.alive()
        differ = seen is not None and any(e.variance_from == "processes" for e in seen.evidence
                                          if e.member in alive)  # fmt: skip
        held = {m: len(self.fleet.workers[m]) for m in alive}
        return [m for m in alive if held[m] < self.spec.processes and (held[m] < 2 or differ)]

    def stopped(self, r: int, seen: Look | None) -> str:
        alive = self.found.alive()
        if not alive:
            return NONE_LEFT
        if len(alive) == 1 and r >= FIRST_TEST:
            return ONE_LEFT
        if seen is not None and seen.equivalent:
            return EQUIVALENT
        if time.monotonic() - self.started >= self.spec.budget_s:
            return BY_BUDGET
        return ""

    def more_processes(self, grow: list[Member]) -> None:
        """One more process for each of `grow` (survivors), set up side by side, a warm start
        each: the race needs them to see the processes' spread; the dropped get none."""
        if not grow:
            return
        t0 = time.monotonic()
        spawns = []
        for m in grow:
            p, part = len(self.fleet.workers[m]) + 1, self.parts[m]
            spawns.append(((m, p), partial(self.fleet.spawn, m, p, part.payload(p), part.env)))
        for (m, p), ready in start_side_by_side(spawns, self.spec.timeout, 1):
            self.fleet.ready(m, p)
            self.found.phases.later += 1
            self.found.rows[m] = self.parts[m].later(self.found.rows[m], ready, p)
            if self.found.rows[m].status != "ok":
                self.out(m, DISQUALIFIED, self.found.rows[m].status, self.found.rounds)
        self.found.phases.starts_s += time.monotonic() - t0
