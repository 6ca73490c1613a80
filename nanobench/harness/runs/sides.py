"""The sides of a measured run: one frozen comparison value, built once and read everywhere.

What it is: `Side` (one variant of the run: its name as rows and members carry it, its own spec,
the members it runs, the knob it applies, the members it borrows from another side and why, the
options the user typed for it, the environment its workers run in and the side whose output it
must match) and `Sides` (the run's kind: a plain run, before and after, knobs against plain, or
one step in two environments; its sides in order; the pairs compared, (base, other); the side whose
settings name the run; the change table's two column names), built by `Sides.of(spec)` from
the shared spec block (`run_spec.MeasuredSpec`), and what every reader asks of it: a side's
members and the ones it borrows, a change's and a ratio's name, the order sides take, each
side's spec resolved (`resolved`, the before side's bad input named by what the user typed).
What it is not: the spec's options or their checks (`run_spec`), the fleet or the statistics.
Invariant: a side's kind is this value's, never told by a side's name or position elsewhere:
code asks `Sides` (its `kind`, `pairs`, a `Side`'s `borrows`), and the value is built once a
run, by `Sides.of`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from nanobench.harness.errors import BadInput
from nanobench.harness.step.knobs import PLAIN
from nanobench.harness.workers.environment import WorkerEnv
from nanobench.harness.workers.member import Member

# The kinds of comparison a run can be; each is built by `Sides.of` alone.
ALONE, BEFORE_AFTER, KNOBS = "alone", "before and after", "knobs"
ENVIRONMENTS = "environments"  # the same step before and after, the after side's workers elsewhere
BEFORE, AFTER = "before", "after"  # a before-and-after run's sides, in the order they set up


def saved_before_and_after(sides: set[str]) -> bool:
    """Whether a saved run's side names (all a saved row keeps of them) are a before-and-after
    run's: a comparison already, which `compare` does not compare again."""
    return bool(sides & {BEFORE, AFTER})


@dataclass(frozen=True)
class Side:
    """One variant of a run: what it runs, under which settings, and what it borrows."""

    name: str  # as rows, members and files carry it: "" alone, before, after, plain, a knob
    spec: Any  # the command's spec for this side (a `run_spec.MeasuredSpec`)
    members: tuple[str, ...]  # the members it runs itself: modes, systems
    knob: str = ""  # the --try knob its workers apply ("" none)
    lender: str = ""  # the side whose members it borrows ("" none)
    borrows: tuple[str, ...] = ()  # the members it reads from the lender instead of running
    why: str = ""  # why it borrows them
    typed_as: tuple[tuple[str, str], ...] = ()  # (option, as the user typed it for this side)
    env: WorkerEnv = WorkerEnv()  # the interpreter and variables its workers run under
    held_to: str = ""  # the side whose output it must match: it runs the same step ("" none)

    def lent(self) -> list[Member]:
        """The lender's members this side's rows are derived against."""
        return [Member(self.lender, n) for n in self.borrows]


@dataclass(frozen=True)
class Sides:
    """A run's comparison: its kind, sides in order, pairs compared and the side that names it."""

    kind: str
    sides: tuple[Side, ...]
    pairs: tuple[tuple[str, str], ...] = ()  # (base, other): before and after, plain and a knob
    main: str = ""  # the side whose settings name the run (its dtype, its model directory)
    labels: tuple[str, str] = (BEFORE, AFTER)  # the change table's two columns

    @classmethod
    def of(cls, spec) -> Sides:
        """The run's sides from its spec's shared block: plain and each --try knob (a knob side
        runs what a knob acts on and borrows plain's other members), the before side the spec
        names and the after side, or the run alone."""
        here = WorkerEnv(spec.python)
        if spec.tries:
            own = tuple(spec.knob_members())
            borrowed = tuple(n for n in spec.members() if n not in own)
            knobs = tuple(Side(k, replace(spec, knob=k), own, k, PLAIN, borrowed, spec.BORROW_WHY,
                               env=here, held_to=PLAIN) for k in spec.tries)  # fmt: skip
            plain = Side(PLAIN, spec, tuple(spec.members()), env=here)
            return cls(KNOBS, (plain, *knobs), tuple((PLAIN, k) for k in spec.tries), PLAIN,
                       (PLAIN, "knob"))  # fmt: skip
        if spec.vs_python or spec.vs_env:
            there = WorkerEnv(spec.vs_python or spec.python, spec.vs_env)
            sides = (Side(BEFORE, spec, tuple(spec.members()), env=here),
                     Side(AFTER, spec, tuple(spec.members()), env=there, held_to=BEFORE))  # fmt: skip
            return cls(ENVIRONMENTS, sides, ((BEFORE, AFTER),), AFTER)
        before = spec.before()
        if before is None:
            return cls(ALONE, (Side("", spec, tuple(spec.members()), env=here),))
        sides = (Side(BEFORE, before, tuple(before.members()), typed_as=spec.typed_as(), env=here),
                 Side(AFTER, spec, tuple(spec.members()), env=here))  # fmt: skip
        return cls(BEFORE_AFTER, sides, ((BEFORE, AFTER),), AFTER)

    @property
    def compared(self) -> bool:
        """Sides in one fleet, each change a pair's."""
        return bool(self.pairs)

    def __iter__(self) -> Iterator[Side]:
        return iter(self.sides)

    def __getitem__(self, name: str) -> Side:
        return next(s for s in self.sides if s.name == name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sides)

    @property
    def knobs(self) -> tuple[str, ...]:
        return tuple(s.knob for s in self.sides if s.knob)

    def envs(self) -> dict[str, WorkerEnv]:
        """Each side's interpreter and variables, by its name: what the fleet starts it with."""
        return {s.name: s.env for s in self.sides}

    @property
    def elsewhere(self) -> bool:
        """Some side's workers run under another interpreter or with the user's variables."""
        return any(not s.env.default for s in self.sides)

    def planned(self) -> list[Member]:
        """Every side's own members, side by side in order: what the run measures."""
        return [Member(s.name, n) for s in self.sides for n in s.members]

    def borrowed(self) -> list[str]:
        """What the sides borrow and why, a line each kind of borrowing: "off borrowed from
        plain: eager off reads no knob: ..." (every knob side borrows alike)."""
        return list(dict.fromkeys(f"{', '.join(s.borrows)} borrowed from {s.lender}: {s.why}"
                                  for s in self.sides if s.borrows))  # fmt: skip

    def base_of(self, side: str) -> str | None:
        return next((b for b, o in self.pairs if o == side), None)

    def change_name(self, other: str, name: str) -> str:
        """A change's member: its name alone before and after ("dynamic"), with its knob in a
        knob run ("cpp-wrapper dynamic")."""
        return str(Member(other, name)) if self.kind == KNOBS else name

    def ratio_name(self, member: Member, base: Member) -> str:
        """The stop rule's name for a member's change against its base's."""
        if self.kind != KNOBS:
            return f"{member.name} {AFTER}/{BEFORE}"
        return f"{member} / {base.side}"

    def worded(self, alone, knobs: Callable[[str], object], before_after: Callable[[Side], object],
               environments: str = ""):  # fmt: skip
        """A command's words for each kind, the one this run is picked: `alone`, `knobs(names)`
        of the knobs against plain, `before_after(before)` of the before side, or, for two
        environments, the step's words (`environments`) with each side's environment (`alone`
        where none are given: the step is the same on both sides)."""
        if self.kind == KNOBS:
            return knobs(", ".join(self.knobs))
        if self.kind == BEFORE_AFTER:
            return before_after(self[BEFORE])
        if self.kind == ENVIRONMENTS and environments:
            return f"{environments}: {self[AFTER].env} (after) vs {self[BEFORE].env} (before)"
        return alone

    def order(self, member: Member) -> int:
        """Where a member's side stands: the sides' order, the base first."""
        return self.names.index(member.side)

    def resolved(self, resolve: Callable) -> dict:
        """Each side's `resolve(side_spec)`, in order. A side whose options were typed under
        other names (`typed_as`: --target as --vs, --model as --vs-model) has its bad input
        say them, or be said to be that side's."""
        found = {}
        for side in self.sides:
            try:
                found[side.name] = resolve(side.spec)
            except BadInput as e:
                if not side.typed_as:
                    raise
                said = str(e)
                hits = [(old, new) for old, new in side.typed_as if old in said]
                for old, new in hits:
                    said = said.replace(old, new)
                raise BadInput(said if hits else f"{side.typed_as[0][1]}: {said}") from None
        return found
