"""A member of a measured run: the typed (side, name) pair every window, sample and row carries.

What it is: `Member(side, name)`: `name` is what a command measures (a mode, a system, the
roofline probe, a start kind) and `side` which variant of the run it belongs to (a
`harness.runs.sides.Side`'s name: "" in a plain run); `as_member` (a plain run's name as its
member).
What it is not: what a member's workers run (each command's payload) or a row.
Invariant: a member is never a joined string parsed back: `str(member)` ("after dynamic") is
for people (status lines, tags) and `label` ("after-dynamic") for file names; code compares
members, or their `side` and `name`.
"""

from __future__ import annotations

from dataclasses import dataclass


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
