"""explain's saved runs as `compare` reads them: its kind, declared once.

What it is: `ExplainKind` (`harness.runs.run_kind.SavedKind`: explain.csv's rows, the counts
`--no-more` may name, `before_after.COLUMNS`, and its changes between two saved runs with the
breaks and value guards on one side only, `saved_changes`).
What it is not: a measured run (explain times nothing) or the explaining.
Invariant: imported only when `compare` asks for explain's kind: its row's module loads torch.
"""

from __future__ import annotations

from nanobench.explain.before_after import COLUMNS, Explained, changes, differences, member
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import Change
from nanobench.harness.runs.run_kind import SavedKind
from nanobench.harness.step.dynamo_explain import ExplainRow


class ExplainKind(SavedKind):
    command, label, row_type = "explain", "mode", ExplainRow
    counts = tuple(COLUMNS)

    @staticmethod
    def saved_changes(old, new) -> tuple[list[Change], dict]:
        return saved_changes(old, new)


def saved_changes(old, new) -> tuple[list[Change], dict]:
    """explain's counts per member, and what is on one side only; members must match."""
    ours, theirs = [member(r) for r in old.rows], [member(r) for r in new.rows]
    if ours != theirs:
        raise BadInput(f"{old.where} explained {', '.join(ours)} and {new.where} "
                       f"{', '.join(theirs)}: compare needs the same depths or steps")  # fmt: skip
    sides = Explained(old.where, new.where, old.rows, new.rows)
    return changes(sides), differences(sides)
