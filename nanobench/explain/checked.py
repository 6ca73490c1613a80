"""explain's `symbolic` remedy tried before it is printed: dynamic=True over a run long enough to tell.

What it is: `dry_steps_for(step, limit)` (how many steps the dry run takes) and
`checked_remedies(row, spec, model, status)` (the dry run of dynamic=True in a fresh process,
`harness.runs.dry_run`, and the remedy worded by which of its steps rebuilt and the guard that
failed at each, `harness.step.rebuilt.quote_run`).
What it is not: the explaining (`explain.command`), the dry run's worker or the words' rules.
Invariant: the dry run takes the explained step, the one after it, and steps past dynamo's
recompile limit, so a guard that fails every step is seen failing at more than one step and a
fall-back is seen, not extrapolated; a guard that fails once (the step whose slice reaches a
buffer's end) is said to fail once. A dry run that fails leaves the row, its remedy unchecked.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nanobench.harness.errors import MeasurementFailed

if TYPE_CHECKING:  # the row's module imports torch, which the CLI must not pay for at start
    from nanobench.harness.step.dynamo_explain import ExplainRow


def dry_steps_for(step: int, limit: int) -> int:
    """The explained step and its next, and at least two steps past the recompile limit: a
    frame that rebuilds every step falls back at step `limit` (from 0), which the run shows."""
    return max(step + 2, limit + 2)


def checked_remedies(row: ExplainRow, spec, model: str, status) -> ExplainRow:
    """A `symbolic` remedy tried before it is printed: dynamic=True over `dry_steps_for` steps,
    dynamo with the eager backend in a fresh process (`dry_run`), and the remedy worded by which
    steps rebuilt and why. `spec` is explain's (`ExplainSpec`: its target and sizes)."""
    from nanobench.compile.dynamo import recompile_limit
    from nanobench.harness.runs.dry_run import DryRunJob, dry_run
    from nanobench.harness.step.rebuilt import quote_run
    from nanobench.harness.step.remedies import DYNAMIC_ROW, quote_dynamic_row

    if not any(DYNAMIC_ROW in r for r in row.remedies or ()):
        return row
    steps = dry_steps_for(spec.step, recompile_limit())
    status(f"dry run: dynamic=True over steps 0-{steps - 1}, eager backend, a fresh process")
    try:
        found = dry_run(DryRunJob(spec.target, spec.rows, spec.prompt_len, steps, spec.device,
                                  spec.dtype, model))  # fmt: skip
    except MeasurementFailed as e:  # the row stands; its remedy says it was not checked
        status(f"{e}: the symbolic remedy is printed unchecked")
        return replace(row, remedies=[quote_dynamic_row(r, None, None) for r in row.remedies])
    by = f"a dry run of dynamic=True over {found.steps} steps (eager backend, a fresh process)"
    return replace(row, remedies=[quote_run(r, found.seen(), by) for r in row.remedies])
