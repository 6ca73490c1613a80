"""Which steps of a run rebuilt, and the guard that failed at each: once at a boundary, or every step.

What it is: `Rebuilt` (one guard's failures over a run: the guard as dynamo wrote it each time,
where, and the steps, from 0, it failed at), `StepRun` (what a run built step by step: frames per
step, its `Rebuilt`s, whether and at which step it fell back), `step_run(...)` (one from dynamo's
recompile reasons and the step each came at) and their words: `StepRun.words` ("built 3 (step 0:
2 frames; step 9: `160 != (16 + 16*___stack0)` at step.py:45, once, at the last step, where
(16 + 16*___stack0) reached 160), no fall-back"), `quote_run` (a `symbolic` remedy worded by what
a dynamic=True run did, step by step), `boundary` (the remedy that says a guard failed once) and
`StepRun.failed_at` (the steps a guard failed at, for the remedy that says it changes every step).
What it is not: a run (`harness.runs.dry_run` and the compile workers record the steps) or the
rules for which remedy applies (`remedies`). Never imports torch.
Invariant: a guard is said to fail every step only when it failed at two consecutive steps or
more, and once only when it failed at one step of a run of MIN_STEPS or more (fewer cannot tell
the two apart); dynamic=True is said to help only where its run fell back nowhere and no guard
failed at more than one step; every count quoted is the run's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from nanobench.harness.step.remedies import DYNAMIC_ROW, Remedy, value_guard

MIN_STEPS = 3  # one failure in two steps could be the first of one a step: too few to tell
_RATIO = re.compile(r"expected -?\d+, actual -?\d+")  # a size guard's two values, as dynamo says
_NOT_EQUAL = re.compile(r"^(?P<end>-?\d+) != (?P<value>.+)$")  # `384 != (16 + 16*s0)`


def pattern(guard: str) -> str:
    """The guard without the value it held: `pos == 16` and `pos == 17` are one guard failing."""
    guard = _RATIO.sub("expected N, actual N", guard)
    lhs, eq, rhs = guard.rpartition(" == ")
    return f"{lhs} == N" if eq and re.fullmatch(r"-?[\d.e+-]+", rhs) else guard


def steps_text(steps: Sequence[int]) -> str:
    """`step 9`, `steps 1..8` (consecutive) or `steps 3, 7`."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}..{steps[-1]}"
    return "steps " + ", ".join(str(s) for s in steps)


@dataclass(frozen=True)
class Rebuilt:
    """One guard that failed over a run, and the steps it failed at and rebuilt."""

    guards: tuple[str, ...]  # as dynamo wrote it at each failure, in order
    where: str  # "file:line: source" from dynamo's reason; the guard itself where it named none
    steps: tuple[int, ...]  # the step (from 0) of each failure that rebuilt

    def kind(self, run_steps: int) -> str:
        """once | every step | repeatedly (at steps apart) | unclear (one failure, too few steps)."""
        steps = sorted(set(self.steps))
        if len(steps) > 1:
            return "every step" if steps == list(range(steps[0], steps[-1] + 1)) else "repeatedly"
        return "once" if run_steps >= MIN_STEPS else "unclear"

    @property
    def shown(self) -> str:
        """The guard quoted: as dynamo wrote it, or its pattern where its value changed."""
        return self.guards[0] if len(set(self.guards)) == 1 else pattern(self.guards[0])

    @property
    def site(self) -> str:
        """`file.py:45`, the file by its name: where dynamo installed the guard."""
        if self.where == self.guards[0] or ": " not in self.where:
            return ""
        file, _, line = self.where.split(": ", 1)[0].rpartition(":")
        return f"{PurePath(file).name}:{line}"

    def words(self, run_steps: int) -> str:
        """`step 9: `g` at f.py:45, once, at the last step, where B reached A` and the like."""
        said = f"{steps_text(sorted(set(self.steps)))}: `{self.shown}`"
        said += f" at {self.site}" if self.site else ""
        kind = self.kind(run_steps)
        if kind == "unclear":
            return f"{said}, once in {run_steps} steps (too few to tell once from every step)"
        if kind != "once":
            return f"{said}, {kind}"
        last = ", at the last step" if self.steps[0] == run_steps - 1 else ""
        ended = _NOT_EQUAL.match(self.guards[0])
        reached = f", where {ended['value']} reached {ended['end']}" if ended else ""
        return f"{said}, once{last}{reached}"


@dataclass(frozen=True)
class StepRun:
    """What one run built, step by step, and why each rebuild happened."""

    steps: int
    built_at: tuple[int, ...]  # frames built at each step
    rebuilt: tuple[Rebuilt, ...]  # each guard that failed and rebuilt, and its steps
    fell_back: bool
    fell_back_at: int | None  # the step a frame went past the recompile limit, where known

    @property
    def builds(self) -> int:
        return sum(self.built_at)

    @property
    def helps(self) -> bool | None:
        """Fell back nowhere and no guard failed twice: True; a lone failure in too few steps to
        tell: None; else False."""
        kinds = {r.kind(self.steps) for r in self.rebuilt}
        if self.fell_back or kinds & {"every step", "repeatedly"}:
            return False
        return None if "unclear" in kinds else True

    def again(self) -> Rebuilt | None:
        """The first guard that failed at more than one step: what keeps rebuilding."""
        return next((r for r in self.rebuilt if len(set(r.steps)) > 1), None)

    def failed_at(self, expression: str) -> str:
        """The steps the guard on `expression` failed at, in words ("" if it never did)."""
        for r in self.rebuilt:
            if r.guards[0].rsplit(" == ", 1)[0] == expression:
                return r.words(self.steps) + self.fall_back_words(", ")
        return ""

    def fall_back_words(self, lead: str = "") -> str:
        if not self.fell_back:
            return ""
        return lead + ("fell back" if self.fell_back_at is None else
                       f"fell back at step {self.fell_back_at}")  # fmt: skip

    def words(self) -> str:
        """`built 3 (step 0: 2 frames; step 9: ..., once, ...), no fall-back`."""
        reasons = {s: sum(r.steps.count(s) for r in self.rebuilt) for s in range(self.steps)}
        parts = []
        for s, built in enumerate(self.built_at):
            fresh = built - reasons[s]
            if fresh > 0:  # frames built for the first time: no guard of theirs failed
                parts.append((s, f"step {s}" + (f": {fresh} frames" if fresh > 1 else "")))
        parts += [(min(r.steps), r.words(self.steps)) for r in self.rebuilt]
        listed = "; ".join(text for _, text in sorted(parts, key=lambda p: p[0]))
        return f"built {self.builds} ({listed}), {self.fall_back_words() or 'no fall-back'}"


def step_run(
    steps: int,
    built_at: Sequence[int],
    reasons: Sequence[str],
    reason_steps: Sequence[int],
    fell_back: bool,
    fell_back_at: int | None = None,
) -> StepRun:
    """A run from dynamo's recompile reasons (whole or one-lined) and the step of each. Where the
    fall-back's step is not given it is the first step with more reasons than builds: a rebuild
    builds one frame for its reason, the attempt past the limit builds none. That attempt's
    reason (the last at that step) rebuilt nothing: it is the fall-back, not a rebuild."""
    at = list(reason_steps)
    if fell_back and fell_back_at is None:
        fell_back_at = next((s for s, b in enumerate(built_at) if at.count(s) > b), None)
    pairs = list(zip(reasons, at))
    if fell_back_at in at:
        pairs.pop(len(at) - 1 - at[::-1].index(fell_back_at))
    groups: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for reason, step in pairs:
        g = value_guard(reason)
        groups.setdefault((pattern(g.guard), g.where), []).append((g.guard, step))
    rebuilt = tuple(
        Rebuilt(tuple(t for t, _ in seen), where, tuple(s for _, s in seen))
        for (_, where), seen in groups.items()
    )
    return StepRun(steps, tuple(built_at), rebuilt, fell_back, fell_back_at)


def quote_run(text: str, run: StepRun, by: str) -> str:
    """A `symbolic` remedy worded by what a dynamic=True run did, step by step (`by` names the
    run: this sweep's dynamic row, or a dry run)."""
    if DYNAMIC_ROW not in text:
        return text
    said = f"{by} {run.words()}"
    if run.helps:
        said = ("dynamic=True (or automatic dynamic, after the first recompile) makes this int "
                f"argument symbolic: {said}; compile with dynamic=True")  # fmt: skip
    elif run.helps is None:
        said = (f"dynamic=True would make this int argument symbolic: {said}: too few steps to "
                "tell a guard that fails once from one that fails every step")  # fmt: skip
    else:
        again = run.again()
        where = f"specialised it again at {again.where}" if again else "fell back"
        said = (f"does not help: dynamic=True would make an int argument symbolic, but {said}: "
                f"dynamo {where}; pass it as a tensor")  # fmt: skip
    return text.replace(DYNAMIC_ROW, said)


def boundary(r: Rebuilt, run: StepRun) -> Remedy:
    """A guard that failed once: one rebuild at that step, said as such, never as a guard that
    changes every step (nor as one dynamic=True cannot help: it held at the steps before)."""
    return Remedy("boundary", f"{r.words(run.steps)}: one rebuild at that boundary, not one a step"
                  f"{run.fall_back_words('; ') or ', and no fall-back'}", r.where)  # fmt: skip
