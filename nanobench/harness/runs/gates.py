"""A gate: one promise a command checks, its verdict and, for a timing gate, its interval.

What it is: `Gate` (a verdict of pass, fail or inconclusive; a timing gate also carries its
estimate, 95% interval and target), `gate(name, check, ...)` (a `check_*` function's exception
becomes a failed gate), `interval_gate` and `ratio_gate` (a timing gate from an interval of
`nanobench.harness.statistics.stats`) and `undecided_hint` (what would decide an inconclusive one).
What it is not: the verdict names (`verdicts`), the rule that reaches one (`stats`), a command's
own promises (each command's `gates.py`) or the exit code a gate leads to (`output.finish`).
Invariant: `passed` is `verdict == "pass"`, checked when a gate is made; an interval that
straddles its target is inconclusive, never pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS


@dataclass(frozen=True)
class Gate:
    """A promise checked. `passed` is `verdict == "pass"`; a pass/fail gate gives only `passed`."""

    name: str
    passed: bool
    detail: str
    verdict: str = ""
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    target: float | None = None

    def __post_init__(self) -> None:
        verdict = self.verdict or (PASS if self.passed else FAIL)
        if verdict not in (PASS, FAIL, INCONCLUSIVE) or self.passed != (verdict == PASS):
            raise ValueError(f"gate {self.name}: verdict {verdict!r} with passed={self.passed}")
        object.__setattr__(self, "verdict", verdict)


def interval_gate(name: str, verdict: str, detail: str, interval, target: float) -> Gate:
    """A timing gate: the verdict of an Interval (nanobench.harness.statistics.stats) against its target."""

    def number(value: float) -> float | None:
        return None if value != value else round(value, 4)

    return Gate(
        name,
        verdict == PASS,
        detail,
        verdict,
        number(interval.estimate),
        number(interval.low),
        number(interval.high),
        target,
    )


def ratio_gate(name: str, what: str, interval, target: float) -> Gate:
    """A step-time ratio at most `target`: pass only when its whole 95% interval is."""
    from nanobench.harness.statistics.stats import (
        MIN_ROUNDS,
        processes_bind,
        rounds_to_decide,
        verdict_at_most,
    )

    if interval.estimate != interval.estimate:
        return Gate(name, False, f"{what}: not measured (both systems must run in the sweep)")
    verdict = verdict_at_most(interval, target)
    if interval.low != interval.low:
        span = f"no interval yet ({interval.rounds} rounds; one needs {MIN_ROUNDS})"
    else:
        span = f"[{interval.low:.2f}, {interval.high:.2f}] over {interval.rounds} rounds"
    detail = f"{what} is {interval.estimate:.2f}x {span}; the target is at most {target:.2f}x"
    if verdict == INCONCLUSIVE:
        more, bind = rounds_to_decide(interval, target), processes_bind(interval, target)
        detail += "; can't tell at this noise" + undecided_hint(more, bind)
    return interval_gate(name, verdict, detail, interval, target)


def undecided_hint(more: int | None, bind: bool | None) -> str:
    """What would decide an inconclusive gate: more processes, about `more` rounds, or nothing said."""
    if bind:
        return (
            " (the processes disagree by more than the gap: more --processes would narrow it,"
            " more rounds would not)"
        )
    return f" (about {more} more rounds would likely decide)" if more else ""


def gate(name: str, check: Callable, *args, **kwargs) -> Gate:
    """Run one `check_*` function; its exception (named after the broken promise) fails it."""
    try:
        check(*args, **kwargs)
    except (AssertionError, RuntimeError, ValueError) as e:
        return Gate(name, False, str(e).splitlines()[0] if str(e) else type(e).__name__)
    return Gate(name, True, "ok")
