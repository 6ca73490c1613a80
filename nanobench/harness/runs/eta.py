"""How long a long command will take, said before it starts, and the time left as it runs.

What it is: `Plan` (what a run will do, counted in what costs time: fresh workers set up one
after another, their compiles and the graphs each builds, later workers set up side by side,
rounds of timed windows, the rounds' budget; each measured command's spec makes its own,
`plan(sides, cores)`), the model's pure costs over a Plan (`compile_model_s`,
`process_model_s`, `round_model_s`, `model_s`),
`Figures` (where a finished run's wall seconds went: its compiles, its rounds, the rest) and
`scaled_s` (an earlier run's figures scaled to a new plan's counts), `Estimate` (the seconds and
where they came from: the median of this machine's earlier runs of the same settings, else the
latest run of the same kind scaled, else the model) and its one line, and `announce` / `Timer`
(say the line on stderr, held until the first worker reports where a `--target`'s factory
could still raise; hand the estimate to the progress line; record a finished run's figures).
What it is not: the store of wall times (`harness.runs.durations`), the progress box
(`harness.cli.console.Status`) or the stop rule (`harness.workers.rounds`).
Invariant: the estimate never costs the run: an unreadable or corrupt store is the model, and
nothing here writes to stdout.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass

from nanobench.harness.cli.console import span

# The model's unit costs: the built-in model on this project's 2-core CPU box, from the phases
# of real runs (docs/measuring.md, "The estimate", has each figure): `compile.csv`'s compile_s,
# setup_s and later_setup_s, and a run's recorded rounds seconds. A quiet box is about 1.3x
# faster than they say, a loaded one 2x slower, another machine or model anything: the line says
# it is a model, and after one run of a kind that run's own figures replace these (`scaled_s`).
START_S = 6.0  # a first worker, compile aside: spawn, import torch, load the model, first pass
COLD_COMPILE_S = 30.0  # one mode's Inductor compile into an empty cache: dynamic 22, static 50
WARM_COMPILE_S = 10.0  # a compile with a filled cache, or by a backend that generates no code
# A compile's second graph (dynamic's batch of 1 beside larger ones), as a share of its first:
# 4.0-8.8 s beside 18.5-21.8 s cold, 2.5 s beside 6.3 s warm, tune's on a trace 25 s beside 51 s
# (docs/measuring.md, "The estimate").
FURTHER_GRAPH_SHARE = 0.4
LATER_S = 12.0  # a batch of later workers set up side by side (a warm-cache start each)
OWN_S = 5.0  # the run's own once its rounds end: workers closed, the files, table and figure
WINDOW_S = 0.3  # one timed window's overhead: the round trip to its worker, the pin
STEP_S = 0.01  # one decode step of the built-in model
TYPICAL_ROUNDS = 5  # where a default run's stop rule ends it: it decides at its first look
RECENT = 10  # the earlier runs an estimate reads: the machine's latest, not its oldest
# What makes two runs the same kind, so that one's seconds scale to the other's counts.
KIND = ("model", "target", "vs", "vs_model", "device", "dtype", "backend", "python", "threads")


@dataclass(frozen=True)
class Plan:
    """What a run will do, in the units the model prices."""

    starts: int  # workers set up one after another
    cold_compiles: int  # of those, compiling into an empty Inductor cache
    warm_compiles: int  # of those, compiling from a filled cache or without code generation
    later: int = 0  # workers set up side by side, `cores` at a time
    cores: int = 1
    windows: int = 0  # timed windows a round
    steps: int = 0  # steps a window
    max_rounds: int = 0
    budget_s: float = 0.0  # the stop rule's: the round that passes it is the last
    graphs: float = 1.0  # a compile's graphs, mean: a batch mix of 1 and more builds 2 (dynamic)


def compile_model_s(plan: Plan) -> float:
    """(cold_compiles x COLD_COMPILE_S + warm_compiles x WARM_COMPILE_S)
    x (1 + (graphs - 1) x FURTHER_GRAPH_SHARE)."""
    one = plan.cold_compiles * COLD_COMPILE_S + plan.warm_compiles * WARM_COMPILE_S
    return one * (1 + (plan.graphs - 1) * FURTHER_GRAPH_SHARE)


def process_model_s(plan: Plan) -> float:
    """OWN_S + starts x START_S + ceil(later / cores) x LATER_S."""
    return OWN_S + plan.starts * START_S + math.ceil(plan.later / max(plan.cores, 1)) * LATER_S


def round_model_s(plan: Plan) -> float:
    """windows x (WINDOW_S + steps x STEP_S): one round."""
    return plan.windows * (WINDOW_S + plan.steps * STEP_S)


def rounds_s(plan: Plan, rounds: int, one_round_s: float) -> float:
    """min(min(rounds, max_rounds) x one_round_s, budget_s + one_round_s): the stop rule's bounds."""
    return min(min(rounds, plan.max_rounds) * one_round_s, plan.budget_s + one_round_s)


def model_s(plan: Plan) -> float:
    """compile_model_s + process_model_s + rounds_s(TYPICAL_ROUNDS rounds of round_model_s)."""
    rounds = rounds_s(plan, TYPICAL_ROUNDS, round_model_s(plan))
    return compile_model_s(plan) + process_model_s(plan) + rounds


def model_terms(plan: Plan) -> str:
    """The model's sum in words, for the estimate's line."""
    terms = [f"{plan.starts} starts x {START_S:.0f} s"]
    graphs = f" x {plan.graphs:.2g} graphs" if plan.graphs != 1 else ""
    if plan.cold_compiles:
        terms.append(f"{plan.cold_compiles} cold compiles x {COLD_COMPILE_S:.0f} s{graphs}")
    if plan.warm_compiles:
        terms.append(f"{plan.warm_compiles} warm compiles x {WARM_COMPILE_S:.0f} s{graphs}")
    if plan.later:
        terms.append(f"{plan.later} later workers {plan.cores} at a time x {LATER_S:.0f} s")
    if plan.max_rounds:
        rounds = min(TYPICAL_ROUNDS, plan.max_rounds)
        terms.append(f"{rounds} of up to {plan.max_rounds} rounds x {round_model_s(plan):.1f} s")
    return " + ".join(terms + [f"{OWN_S:.0f} s the run's own"])


@dataclass(frozen=True)
class Figures:
    """Where one finished run's wall seconds went, and the plan it ran: what the next run of
    its kind is scaled from."""

    plan: Plan
    wall_s: float
    compile_s: float = 0.0  # its rows' compile seconds, summed
    rounds: int = 0  # the rounds it ran
    rounds_s: float = 0.0  # their wall seconds

    @property
    def process_s(self) -> float:
        """wall_s - compile_s - rounds_s, at least 0: set-ups, closing and the run's own."""
        return max(self.wall_s - self.compile_s - self.rounds_s, 0.0)

    def as_json(self) -> dict:
        """The fields a store line carries beside its wall seconds."""
        return {"plan": asdict(self.plan), "compile_s": round(self.compile_s, 3),
                "rounds": self.rounds, "rounds_s": round(self.rounds_s, 3)}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict) -> Figures:
        """A store line's figures; ValueError, TypeError or KeyError where it is not one."""
        found = cls(Plan(**doc["plan"]), float(doc["wall_s"]), float(doc["compile_s"]),
                    int(doc["rounds"]), float(doc["rounds_s"]))  # fmt: skip
        if not (0 < found.wall_s < math.inf and found.compile_s >= 0 and found.rounds_s >= 0):
            raise ValueError(doc)
        return found


def scaled_term_s(measured_s: float, then_s: float, now_s: float, pace: float) -> float:
    """measured_s x now_s / then_s (model seconds); now_s x pace where nothing was measured."""
    if measured_s > 0 and then_s > 0:
        return measured_s * now_s / then_s
    return now_s * pace


def expected_rounds(plan: Plan, earlier: Figures) -> int:
    """The earlier run's rounds where its stop rule ended them before its bound, else this
    plan's bound; TYPICAL_ROUNDS where the earlier run had none."""
    if earlier.rounds == 0:
        return TYPICAL_ROUNDS
    return earlier.rounds if earlier.rounds < earlier.plan.max_rounds else plan.max_rounds


def scaled_s(plan: Plan, earlier: Figures) -> float:
    """Each of the earlier run's compiles, processes and one round x (this plan's model seconds
    / its plan's), the rounds `expected_rounds`; pace = its process seconds / the model's."""
    pace = earlier.process_s / process_model_s(earlier.plan)
    compiles = scaled_term_s(earlier.compile_s, compile_model_s(earlier.plan),
                             compile_model_s(plan), pace)  # fmt: skip
    processes = earlier.process_s * process_model_s(plan) / process_model_s(earlier.plan)
    measured_round = earlier.rounds_s / earlier.rounds if earlier.rounds else 0.0
    one_round = scaled_term_s(measured_round, round_model_s(earlier.plan), round_model_s(plan),
                              pace)  # fmt: skip
    return compiles + processes + rounds_s(plan, expected_rounds(plan, earlier), one_round)


@dataclass(frozen=True)
class Estimate:
    """A run's expected seconds and where they came from."""

    seconds: float
    runs: tuple[float, ...] = ()  # the earlier runs' wall seconds it is the median of
    terms: str = ""  # the model's sum, when no earlier run
    scaled_from: Figures | None = None  # the run of its kind it is scaled from

    @classmethod
    def of(cls, walls: list[float], plan: Plan | None, earlier: Figures | None = None
           ) -> Estimate | None:  # fmt: skip
        recent = tuple(walls[-RECENT:])
        if recent:
            return cls(statistics.median(recent), recent)
        if plan is None:
            return None
        if earlier is not None:
            return cls(scaled_s(plan, earlier), scaled_from=earlier)
        # a model's seconds are no better than tens of seconds: said and counted down as such
        return cls(round(model_s(plan) / 10) * 10, terms=model_terms(plan))

    def line(self, earlier: int) -> str:
        """The one line said before the run; `earlier`: every run of its settings the store holds."""
        head = f"nanobench: this run takes about {span(self.seconds)}"
        these = "of these settings on this machine"
        if self.scaled_from is not None:
            return f"{head}, {scaled_words(self.scaled_from)}"
        if not self.runs:
            kind = "of this kind on this machine (command, model, device, dtype, backend)"
            return f"{head} by a model ({self.terms}); no earlier run {kind}"
        what = f"the last {len(self.runs)} of {earlier}" if earlier > len(self.runs) else earlier
        low, high = span(min(self.runs)), span(max(self.runs))
        spread = f", {low} to {high}" if low != high else ""
        runs = "run" if earlier == 1 else "runs"
        return f"{head} (median from {what} earlier {runs} {these}{spread})"


def scaled_words(f: Figures) -> str:
    rounds = f", {f.rounds} rounds {span(f.rounds_s)}" if f.rounds else ""
    return (f"scaled to this run's counts from this machine's last run of this kind (it took "
            f"{span(f.wall_s)}: compiles {span(f.compile_s)}, worker set-ups and the run's own "
            f"{span(f.process_s)}{rounds})")  # fmt: skip


def settings_of(spec) -> dict:
    """What makes two runs the same work: the spec, less where its outputs go."""
    fields = asdict(spec) if is_dataclass(spec) else {}
    return {k: v for k, v in fields.items() if k not in ("out", "export_json")}


def kind_of(spec) -> dict:
    """What makes two runs the same kind: the settings `KIND` names."""
    return {k: v for k, v in settings_of(spec).items() if k in KIND}


def runs_user_code(spec) -> bool:
    """A `--target` (or `--vs` target) whose factory first runs in a worker, and can raise."""
    return bool(getattr(spec, "target", "") or getattr(spec, "vs", ""))


@dataclass
class Timer:
    """One run's clock: `say()` says an estimate held until the first worker reported;
    `done(ok, ...)` records its wall seconds and figures where it finished whole."""

    key: str
    started: float
    kind: str = ""
    plan: Plan | None = None
    status: object = None
    held: str = ""  # the estimate's line, not yet said
    seconds: float | None = None  # the estimate, not yet handed to the progress line

    def say(self) -> None:
        """The estimate said once (stderr) and handed to the progress line; later calls nothing."""
        if self.seconds is None:
            return
        if self.held:
            sys.stderr.write(self.held + "\n")
            sys.stderr.flush()
        if hasattr(self.status, "expect"):
            self.status.expect(self.seconds, since=self.started)
        self.held, self.seconds = "", None

    def done(self, ok: bool, compile_s: float = 0.0, rounds: int = 0, rounds_s: float = 0.0
             ) -> None:  # fmt: skip
        if not ok or not self.key:
            return
        from nanobench.harness.runs.durations import Durations

        wall_s = time.monotonic() - self.started
        more = {}
        if self.kind and self.plan is not None:
            figures = Figures(self.plan, wall_s, compile_s, rounds, rounds_s)
            more = {"kind": self.kind, **figures.as_json()}
        Durations().record(self.key, wall_s, more)


def earlier_of(doc: dict | None) -> Figures | None:
    """A store line's figures, or None where there is none or it is not one."""
    try:
        return Figures.from_json(doc) if doc is not None else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def announce(command: str, spec, plan: Callable[[int], Plan], status,
             cores: int | None = None, hold: bool | None = None) -> Timer:  # fmt: skip
    """Start the run's clock and estimate it; say it on stderr (not under --quiet) and hand it
    to the progress line (`status.expect`) now, or, with `hold` (a `--target`'s run by
    default: its factory may still raise), at the Timer's `say`, once a worker reported.
    `plan(cores)` is the command's own (its spec's `plan`). Whatever the store fails, the run
    goes on unestimated."""
    # The store reads the machine's facts and the history folder: loaded when a run starts.
    from nanobench.harness.runs.durations import Durations, settings_key

    started = time.monotonic()
    try:
        key = settings_key(command, settings_of(spec))
        kind = settings_key(command, {"kind": kind_of(spec)})
        planned = plan(cores or usable_cores())
        store = Durations()
        walls = store.walls(key)
        found = Estimate.of(walls, planned, earlier_of(store.latest(kind)))
    except (OSError, ValueError, TypeError):
        return Timer("", started)
    timer = Timer(key, started, kind, planned, status)
    if found is not None:
        timer.seconds = found.seconds
        timer.held = "" if getattr(status, "quiet", False) else found.line(len(walls))
    if not (runs_user_code(spec) if hold is None else hold):
        timer.say()
    return timer


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
