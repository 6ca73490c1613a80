"""Why a run's rounds ended, said where a limit, not the evidence, ended them undecided.

What it is: `Ended` (frozen: why the rounds stopped, after how many, in how many seconds, and the
intervals still open then: each ratio whose interval holds 1) and `ended_lines(ended, plan)` (the
lines a run prints under its table: that the budget, --max-rounds or the processes' spread
stopped it, each open ratio, and what would decide it: about how many more rounds with the
--max-rounds and --budget-s that allow them, or more --processes).
What it is not: the stop rule (`workers.rounds.run_rounds`, which reports why it stopped) or how
many rounds an interval needs (`statistics.stats.rounds_to_decide`, `processes_bind`).
Invariant: nothing is said of a run the evidence decided; every figure said is computed from the
run's own intervals, rounds and seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nanobench.harness.workers.rounds import BY_BUDGET, BY_MAX_ROUNDS, BY_PROCESSES, RoundPlan

TOO_FAR = 10  # past this many times the rounds run, say "far longer", not a figure


@dataclass(frozen=True)
class Ended:
    why: str  # `rounds.DECIDED`, `BY_BUDGET`, `BY_MAX_ROUNDS`, `BY_PROCESSES`
    rounds: int
    seconds: float  # the rounds' own wall time
    open: tuple = ()  # (name, Interval) of each ratio whose interval holds 1 at the end


def ended_lines(ended: Ended | None, plan: RoundPlan) -> list[str]:
    """What the run says of its end: nothing where the evidence decided or nothing is open."""
    if ended is None or not ended.open or ended.why not in (BY_BUDGET, BY_MAX_ROUNDS, BY_PROCESSES):
        return []
    by = {BY_BUDGET: f"the round budget (--budget-s {plan.budget_s:g})",
          BY_MAX_ROUNDS: f"--max-rounds {plan.max_rounds}",
          BY_PROCESSES: "the processes' own spread (more rounds could not narrow it)"}[ended.why]  # fmt: skip
    lines = [f"rounds: {by} ended them after {ended.rounds}, not the evidence: "
             f"{len(ended.open)} still can't tell"]  # fmt: skip
    per_round_s = ended.seconds / max(ended.rounds, 1)
    for name, interval in ended.open:
        span = (f" [{interval.low:.2f}, {interval.high:.2f}]" if math.isfinite(interval.low)
                else "")  # fmt: skip
        lines.append(f"  {name} {interval.estimate:.2f}x{span}: "
                     f"{what_decides(interval, per_round_s)}")  # fmt: skip
    return lines


def what_decides(interval, per_round_s: float) -> str:
    """About what would decide one open ratio, in words: a gate's own hint against 1 (no
    change, `gates.undecided_hint` of `stats.rounds_to_decide` and `processes_bind`), with the
    --max-rounds and --budget-s that allow the rounds it names."""
    from nanobench.harness.runs.gates import undecided_hint
    from nanobench.harness.statistics.stats import MIN_ROUNDS, processes_bind, rounds_to_decide

    if not math.isfinite(interval.low):
        return (f"no interval yet after {interval.rounds} of the {MIN_ROUNDS} rounds one needs: "
                "give the rounds more time (--budget-s)")  # fmt: skip
    more, bind = rounds_to_decide(interval, 1.0), processes_bind(interval, 1.0)
    if not bind and more is None:
        return "no number of rounds likely would: its estimate sits on 1 (no change seen)"
    if not bind and more > TOO_FAR * interval.rounds:
        return (f"only a far longer run (over {TOO_FAR}x the rounds) likely would: "
                "a change this small may be none")  # fmt: skip
    said = undecided_hint(more, bind).strip().strip("()")
    if bind:
        return said
    total = interval.rounds + more
    return f"{said} (--max-rounds {total} --budget-s {max(math.ceil(total * per_round_s), 1)})"
