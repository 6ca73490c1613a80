"""explain's before and after: two forwards explained in this process, then what changed.

What it is: `Explained` (the before and the after rows, paired by member: a depth of the engine, or a
target's step), `explain_sides` (the before side from `--vs SPEC`, a target, or `--vs-path`, the
engine on another path; the after side from `--target` or `--path`), `changes` (one count
`Change` per member and column: graphs, breaks, ops, guards, value guards) and `differences`
(the break reasons and value guards on one side only).
What it is not: the explaining (`explain/command.py`'s row builders), the gates'
arithmetic (`nanobench.harness.runs.change`) or the table (`reports.explain`).
Invariant: the two sides are usually different files, so a break is the same break when its
reason and its source line are (never its frame's path); a value guard by its text. Both
sides are explained with the same options but the one that names the side.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nanobench.harness.runs.change import Change, count_change

if TYPE_CHECKING:  # the row's module imports torch
    from nanobench.harness.step.dynamo_explain import ExplainRow

# The columns explain measures, as `--no-more` names them, and the row field each one reads.
COLUMNS = {
    "graphs": "graphs",
    "breaks": "graph_breaks",
    "break_sites": "break_sites",
    "ops": "ops",
    "guards": "guards",
    "value_guards": "value_guards",
}


@dataclass(frozen=True)
class Explained:
    """The before and the after rows of one run, one of each per member, in member order."""

    before_spec: str  # what --vs named (a target spec) or "engine, --path P"
    after_spec: str
    before: list[ExplainRow]
    after: list[ExplainRow]

    @property
    def rows(self) -> list[ExplainRow]:
        return [*self.before, *self.after]

    @property
    def pairs(self) -> list[tuple[str, ExplainRow, ExplainRow]]:
        return [(member(a), b, a) for b, a in zip(self.before, self.after, strict=True)]


def member(row: ExplainRow) -> str:
    """What a before and an after row are paired by: a depth of the engine, a target's step."""
    return f"{row.layers} layers" if row.layers is not None else row.path.removeprefix("target ")


def explain_sides(spec, status, target_rows, engine_rows) -> Explained:
    """Both sides, each explained once: `target_rows(spec, status)` for a target (--vs), the
    engine's `engine_rows` on --vs-path and on --path otherwise."""
    import torch._dynamo

    if spec.vs:
        before_spec, after_spec = spec.vs, spec.target
        before_of, after_of = replace(spec, target=spec.vs), spec
        rows = target_rows
    else:
        before_spec, after_spec = f"engine --path {spec.vs_path}", f"engine --path {spec.path}"
        before_of, after_of = replace(spec, path=spec.vs_path), spec
        rows = engine_rows
    found = {}
    for side, of in (("before", before_of), ("after", after_of)):
        torch._dynamo.reset()  # each side starts from nothing, as a fresh process would
        found[side] = [replace(r, side=side) for r in rows(of, status)]
    return Explained(before_spec, after_spec, found["before"], found["after"])


def changes(sides: Explained) -> list[Change]:
    """One exact count change per member and column, after - before."""
    return [
        count_change(name, column, getattr(b, field), getattr(a, field))
        for name, b, a in sides.pairs
        for column, field in COLUMNS.items()
    ]


def differences(sides: Explained) -> dict[str, list[dict]]:
    """Break reasons and value guards on one side only, each tagged with its member."""
    found = {"breaks_gone": [], "breaks_new": [], "value_guards_gone": [], "value_guards_new": []}
    for name, b, a in sides.pairs:
        before_breaks = {_break_key(x): x for x in b.break_reasons}
        after_breaks = {_break_key(x): x for x in a.break_reasons}
        found["breaks_gone"] += [
            {"member": name, **x} for k, x in before_breaks.items() if k not in after_breaks
        ]
        found["breaks_new"] += [
            {"member": name, **x} for k, x in after_breaks.items() if k not in before_breaks
        ]
        before_guards, after_guards = set(b.value_guard_text), set(a.value_guard_text)
        found["value_guards_gone"] += [
            {"member": name, "guard": g} for g in b.value_guard_text if g not in after_guards
        ]
        found["value_guards_new"] += [
            {"member": name, "guard": g} for g in a.value_guard_text if g not in before_guards
        ]
    return found


def _break_key(b: dict) -> tuple[str, str]:
    return b["reason"], b["source"]
