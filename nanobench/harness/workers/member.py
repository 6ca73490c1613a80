"""A member of a measured run: the typed (side, name) pair every window, sample and row carries.

What it is: `Member(side, name)`: `name` is what a command measures (a mode, a system, the
roofline probe, a start kind) and `side` which variant of the run it belongs to ("" in a plain
run; "before" / "after" in a comparison; a knob or a profiled mode next); `as_member` (a plain
run's name as its member), `SIDES`, the two sides of a before-and-after run in the order
they set up, and `for_each_side` (each side's spec resolved, the before side's bad input
named by the options the user typed for it).
What it is not: what a member's workers run (each command's payload) or a row.
Invariant: a member is never a joined string parsed back: `str(member)` ("after dynamic") is
for people (status lines, tags) and `label` ("after-dynamic") for file names; code compares
members, or their `side` and `name`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nanobench.harness.errors import BadInput

BEFORE, AFTER = "before", "after"
SIDES = (BEFORE, AFTER)


@dataclass(frozen=True, order=True)
class Member:
    side: str
    name: str

    def __str__(self) -> str:
        return f"{self.side} {self.name}" if self.side else self.name

    @property
    def label(self) -> str:
        """The member in a file or directory name: no spaces."""
        return str(self).replace(" ", "-")


def as_member(value: Member | str) -> Member:
    """A member as it is, a plain run's name as its member (side "")."""
    return value if isinstance(value, Member) else Member("", value)


def for_each_side(sides: dict, resolve: Callable, renames: dict[str, str]) -> dict:
    """Each side's `resolve(side_spec)`, in order. The before side's options were typed under
    other names (`renames`: --target as --vs, --model as --vs-model): its bad input says
    them, or is said to be that side's."""
    found = {}
    for side, side_spec in sides.items():
        try:
            found[side] = resolve(side_spec)
        except BadInput as e:
            if side != BEFORE:
                raise
            said = str(e)
            hits = [old for old in renames if old in said]
            for old in hits:
                said = said.replace(old, renames[old])
            first = next(iter(renames.values()), "the before side")
            raise BadInput(said if hits else f"{first}: {said}") from None
    return found
