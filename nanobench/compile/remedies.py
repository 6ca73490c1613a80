"""The engine's remedies for a compiled mode's row, worded by what the sweep measured.

What it is: `engine_remedies(row, spec)` (the fixes `harness.step.remedies` finds for the engine's
step: its growing dimension is the decode step's width, its inputs are planned in
`engine/plan.py`), `with_dynamic_row(rows)` (every `symbolic` remedy quoting what this
sweep's dynamic row measured: which steps rebuilt and the guard that failed at each, where the
row recorded them, `row_run`), `knobs_next` (a clean compiled mode is pointed at the `--try`
that measures its knobs) and `knobs_measured` (after a `--try` run, each knob's measured step
change in place of that advice).
What it is not: the rules themselves (`harness.step.remedies`) or a target's remedies (a target of
the user's own gets none: nanobench cannot see where its inputs come from).
Invariant: a remedy never contradicts a row beside it.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import CompileSpec
from nanobench.cost.compile import classify_guard
from nanobench.harness.step.knobs import VOCABULARY
from nanobench.harness.step.rebuilt import StepRun, quote_run, step_run
from nanobench.harness.step.remedies import (
    SWEEP_ROW,
    Growth,
    quote_dynamic_row,
    remedies_for,
    value_guard,
)
from nanobench.harness.step.self_compiled import SELF_COMPILED


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


def row_run(row: CompileRow) -> StepRun | None:
    """A row's first pass step by step, where it recorded the step of each reason (a target's)."""
    if row.recompile_steps is None or row.builds_per_step is None:
        return None
    return step_run(len(row.builds_per_step), row.builds_per_step, row.recompile_reasons or [],
                    row.recompile_steps, bool(row.fell_back))  # fmt: skip


def with_dynamic_row(rows: list[CompileRow]) -> list[CompileRow]:
    """Every row's `symbolic` remedies worded by what this sweep's dynamic row measured (which
    steps rebuilt and why, where it recorded them; its counts alone where not), so a remedy
    never contradicts a row beside it."""
    dynamic = next((r for r in rows if r.mode == "dynamic" and r.builds is not None), None)
    run = row_run(dynamic) if dynamic else None
    builds, fell_back = (dynamic.builds, dynamic.fell_back) if dynamic else (None, None)

    def quoted(text: str) -> str:
        return (
            quote_run(text, run, SWEEP_ROW) if run else quote_dynamic_row(text, builds, fell_back)
        )

    return [replace(r, remedies=[quoted(t) for t in r.remedies]) if r.remedies else r for r in rows]


TRIED = ("cpp-wrapper", "guard-filter", "freezing")  # the knobs a clean step is pointed at first


def knobs_next(rows: list[CompileRow], spec: CompileSpec) -> list[str]:
    """A clean compiled mode (ok, one build per graph, no recompile, no fall-back): what is
    left is knobs, and the --try that measures them here, not advice."""
    clean = [r.mode for r in rows if r.mode != "off" and r.status == "ok" and not r.fell_back
             and r.recompiles == 0 and not r.remedies]  # fmt: skip
    if not clean or spec.target in SELF_COMPILED:  # its compile is its own: no knob reaches it
        return []
    where = f" --target {spec.target}" if spec.target else ""
    where += f" --model {spec.model}" if spec.model != CompileSpec.model and not spec.target else ""
    tried = TRIED
    if spec.backend != "inductor":  # Inductor's knobs would be refused: this backend skips it
        where += f" --backend {spec.backend}"
        tried = tuple(
            k for k in TRIED if all(s.config != "inductor" for s in VOCABULARY[k].settings)
        )
    command = f"nanobench compile{where} --modes off,{','.join(clean)} --try {','.join(tried)}"
    return [f"{', '.join(clean)}: compiles clean (no recompile, no fall-back): what is left is "
            f"knobs, which help or hurt by machine; {command} measures them here "
            "(docs/knobs.md)"]  # fmt: skip


def knobs_measured(changes: list) -> list[str]:
    """Each knob's step change as measured in this run, a line each: the measured answer in
    place of the advice (`knobs_next`)."""
    lines = []
    for c in changes:
        if c.column != "step_ms":
            continue
        told = f"{c.change:.2f}x" if c.change is not None else "not measured"
        if c.low is not None:
            told += f" [{c.low:.2f}, {c.high:.2f}]"
        lines.append(f"measured: {c.member}: step {told} against plain, {c.verdict}")
    return lines
