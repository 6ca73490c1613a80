"""How long a long command will take, said before it starts, and the time left as it runs.

What it is: `Plan` (what a run will do, counted in what costs time: fresh workers set up one
after another, their compiles, later workers set up side by side, rounds of timed windows, the
rounds' budget), `model_s` (a stated, pure cost model over a Plan; each measured command's spec makes its own
Plan, `plan(sides, cores)`), `Estimate` (the seconds and where
they came from: the median of this machine's earlier runs of the same settings,
`harness.runs.durations`, else the model) and its one line (`console.span` and
`console.progress_note` word the elapsed and ~left a progress line ends with), and `announce` / `Timer` (say the line on stderr, hand the
estimate to the progress line, record a finished run's wall time).
What it is not: the store of wall times (`harness.runs.durations`), the progress box
(`harness.cli.console.Status`) or the stop rule (`harness.workers.rounds`): the model's rounds are a bound.
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

# The model's unit costs, for the tiny model on a 2-core CPU, from `make bench`'s phases
# (`compile.csv`'s setup_s, later_setup_s, compile_s, step_ms), between a quiet box (docs/
# measuring.md: 96 s in all, static's cold compile 50 s) and a loaded one (388 s at load 3 to 9:
# dynamic's cold compile 55 s, static's 98 s; 650 s at load 7 to 11). Another machine or model
# differs, so the line says it is a model; after one run, the machine's own runs replace it.
START_S = 6.0  # a fresh worker: spawn, import torch, load the model, the first pass
COLD_COMPILE_S = 75.0  # one mode's Inductor compile into an empty cache
WARM_COMPILE_S = 15.0  # a compile with a filled cache, or by a backend that generates no code
LATER_S = 25.0  # a batch of later workers set up side by side (a warm-cache start each)
WINDOW_S = 0.3  # one timed window's overhead: the round trip to its worker, the pin
STEP_S = 0.01  # one decode step of the tiny model
RECENT = 10  # the earlier runs an estimate reads: the machine's latest, not its oldest


@dataclass(frozen=True)
class Plan:
    """What a run will do, in the units `model_s` prices."""

    starts: int  # workers set up one after another
    cold_compiles: int  # of those, compiling into an empty Inductor cache
    warm_compiles: int  # of those, compiling from a filled cache or without code generation
    later: int = 0  # workers set up side by side, `cores` at a time
    cores: int = 1
    windows: int = 0  # timed windows a round
    steps: int = 0  # steps a window
    max_rounds: int = 0
    budget_s: float = 0.0  # the stop rule's: the round that passes it is the last


def model_s(plan: Plan) -> float:
    """starts x START_S + cold_compiles x COLD_COMPILE_S + warm_compiles x WARM_COMPILE_S
    + ceil(later / cores) x LATER_S + min(max_rounds x round, budget_s + round), where
    round = windows x (WINDOW_S + steps x STEP_S): the rounds at their bound."""
    one_round = plan.windows * (WINDOW_S + plan.steps * STEP_S)
    rounds = min(plan.max_rounds * one_round, plan.budget_s + one_round)
    return (
        plan.starts * START_S
        + plan.cold_compiles * COLD_COMPILE_S
        + plan.warm_compiles * WARM_COMPILE_S
        + math.ceil(plan.later / max(plan.cores, 1)) * LATER_S
        + rounds
    )


def model_terms(plan: Plan) -> str:
    """The model's sum in words, for the estimate's line."""
    terms = [f"{plan.starts} starts x {START_S:.0f} s"]
    if plan.cold_compiles:
        terms.append(f"{plan.cold_compiles} cold compiles x {COLD_COMPILE_S:.0f} s")
    if plan.warm_compiles:
        terms.append(f"{plan.warm_compiles} warm compiles x {WARM_COMPILE_S:.0f} s")
    if plan.later:
        terms.append(f"{plan.later} later workers {plan.cores} at a time x {LATER_S:.0f} s")
    if plan.max_rounds:
        terms.append(f"up to {plan.max_rounds} rounds or --budget-s {plan.budget_s:g}")
    return " + ".join(terms)


@dataclass(frozen=True)
class Estimate:
    """A run's expected seconds and where they came from."""

    seconds: float
    runs: tuple[float, ...] = ()  # the earlier runs' wall seconds it is the median of
    terms: str = ""  # the model's sum, when no earlier run

    @classmethod
    def of(cls, walls: list[float], plan: Plan | None) -> Estimate | None:
        recent = tuple(walls[-RECENT:])
        if recent:
            return cls(statistics.median(recent), recent)
        if plan is None:
            return None
        # a model's seconds are no better than tens of seconds: said and counted down as such
        return cls(round(model_s(plan) / 10) * 10, terms=model_terms(plan))

    def line(self, earlier: int) -> str:
        """The one line said before the run; `earlier`: every run the store holds."""
        head = f"nanobench: this run takes about {span(self.seconds)}"
        these = "of these settings on this machine"
        if not self.runs:
            return f"{head} by a model ({self.terms}); no earlier run {these}"
        what = f"the last {len(self.runs)} of {earlier}" if earlier > len(self.runs) else earlier
        low, high = span(min(self.runs)), span(max(self.runs))
        spread = f", {low} to {high}" if low != high else ""
        runs = "run" if earlier == 1 else "runs"
        return f"{head} (median from {what} earlier {runs} {these}{spread})"


def settings_of(spec) -> dict:
    """What makes two runs the same work: the spec, less where its outputs go."""
    fields = asdict(spec) if is_dataclass(spec) else {}
    return {k: v for k, v in fields.items() if k not in ("out", "export_json")}


@dataclass
class Timer:
    """One run's clock: `done(ok)` records its wall seconds where it finished whole."""

    key: str
    started: float

    def done(self, ok: bool) -> None:
        if not ok or not self.key:
            return
        from nanobench.harness.runs.durations import Durations

        Durations().record(self.key, time.monotonic() - self.started)


def announce(command: str, spec, plan: Callable[[int], Plan], status,
             cores: int | None = None) -> Timer:  # fmt: skip
    """Say the run's estimate on stderr (not under --quiet), hand it to the progress line
    (`status.expect`), start its clock. `plan(cores)` is the command's own (its spec's `plan`):
    a command without one fails its test, never silently here. Whatever the store fails, the
    run goes on unestimated."""
    # The store reads the machine's facts and the history folder: loaded when a run starts.
    from nanobench.harness.runs.durations import Durations, settings_key

    started = time.monotonic()
    try:
        key = settings_key(command, settings_of(spec))
        walls = Durations().walls(key)
        found = Estimate.of(walls, plan(cores or usable_cores()))
    except (OSError, ValueError, TypeError):
        return Timer("", started)
    if found is not None and not getattr(status, "quiet", False):
        sys.stderr.write(found.line(len(walls)) + "\n")
        sys.stderr.flush()
    if found is not None and hasattr(status, "expect"):
        status.expect(found.seconds)
    return Timer(key, started)


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
