"""The engine's remedies for a compiled mode's row, worded by what the sweep measured.

What it is: `engine_remedies(row, spec)` (the fixes `harness.step.remedies` finds for the engine's
step: its growing dimension is the decode step's width, its inputs are planned in
`engine/plan.py`) and `with_dynamic_row(rows)` (every `symbolic` remedy quoting what this
sweep's dynamic row measured).
What it is not: the rules themselves (`harness.step.remedies`) or a target's remedies (a target of
the user's own gets none: nanobench cannot see where its inputs come from).
Invariant: a remedy never contradicts a row beside it.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import CompileSpec
from nanobench.cost.compile import classify_guard
from nanobench.harness.step.remedies import Growth, quote_dynamic_row, remedies_for, value_guard


def engine_remedies(row: CompileRow, spec: CompileSpec) -> list[str]:
    """The engine's fixes: its growing dimension is the width of the decode step's shape."""
    widths = [w for _, w in spec.worker().step_shapes()]
    growth = [] if spec.bucketed else [Growth("width", 1, widths[0], widths[-1])]
    # dynamo's reasons carry the guard's file:line; the probe's guard texts stand in before.
    recompiled = [
        value_guard(r) for r in row.recompile_reasons or () if classify_guard(r) == "value"
    ]
    found = remedies_for(
        fell_back=bool(row.fell_back),  # None only in a failed row, which has nothing to fix
        guard_kind=str(row.guard_kind),
        value_guards=recompiled or row.expected_value_guards or [],
        growth=growth,
        limit=row.recompile_limit or 8,
        inputs_where="engine/plan.py: plan_decode",
        engine=True,
        mode=row.mode,
    )
    return [r.text() for r in found]


def with_dynamic_row(rows: list[CompileRow]) -> list[CompileRow]:
    """Every row's `symbolic` remedies worded by what this sweep's dynamic row measured, so a
    remedy never contradicts a row beside it."""
    dynamic = next((r for r in rows if r.mode == "dynamic" and r.builds is not None), None)
    builds, fell_back = (dynamic.builds, dynamic.fell_back) if dynamic else (None, None)
    return [
        replace(r, remedies=[quote_dynamic_row(t, builds, fell_back) for t in r.remedies])
        if r.remedies
        else r
        for r in rows
    ]
