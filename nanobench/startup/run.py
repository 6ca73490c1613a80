"""One `nanobench startup` run: every start in its own fresh process, back to back, reported.

What it is: `StartupKind` (what startup brings to a measured run: rows with their savings, the
graphs beside them, changes, heading, report, export) and `run_startup` (each side's model
resolved, then `measured` around the starts, `starts.Starts`).
What it is not: the starts, a start, its phases, the change arithmetic or the run's files.
Invariant: every row is on disk before the next start; a plain run's files have no side column.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from nanobench.compile.sides import resolve
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.export import export_startup
from nanobench.harness.runs.measured_run import MeasuredRun, measured
from nanobench.harness.runs.rows import as_dicts
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.member import Member
from nanobench.startup.caches import check_artifacts
from nanobench.startup.gates import gates
from nanobench.startup.phases import START_PHASES
from nanobench.startup.rows import GraphRow, StartRow, with_saved
from nanobench.startup.spec import StartupSpec
from nanobench.startup.starts import Starts, plan
from nanobench.startup.vs import changes
from reports.startup import draw_startup, render_changes, render_startup


class StartupKind(RunKind):
    """What startup brings to a measured run: members are (side, "mode kind run"), one start
    each; the graphs each start built are written beside its rows."""

    command, label, row_type, spec_type = "startup", "start", StartRow, StartupSpec
    gate = staticmethod(gates)
    change, exporter = staticmethod(changes), staticmethod(export_startup)
    plain_side = False  # a plain run's files have no side column, as before --vs

    def __init__(self, spec: StartupSpec, sides: Sides, dtype: str, starts: Starts) -> None:
        super().__init__(spec, sides, dtype)
        self.starts = starts

    def planned(self) -> list[Member]:
        return [
            Member(side, f"{mode} {kind} {n}")
            for side, mode, kind, n in plan(self.spec, self.sides)
        ]

    def derive(self, side, rows, windows, level, history) -> list[StartRow]:
        return with_saved(rows)

    def tables(self, rows) -> dict:
        return {"graphs": (self.starts.graphs, GraphRow)}

    def figure(self, run: MeasuredRun, rows, head: str):
        # the figure's bars are "before dynamic", "after dynamic": each side a mode of its own
        bars = [{**d, "mode": str(Member(d["side"], d["mode"]))} for d in as_dicts(rows)]
        return draw_startup(bars, START_PHASES, run.where / "startup.png", head)

    def compare_report(self, run: MeasuredRun, rows, found, changed, head):
        return self.figure(run, rows, head), partial(
            render_changes, stdout_console(), as_dicts(changed), self.public(rows), found,
            head, self.starts.elapsed, self.sides.labels, run.differences)  # fmt: skip

    def report(self, run: MeasuredRun, rows, found, changed, head):
        return self.figure(run, rows, head), partial(
            render_startup, stdout_console(), self.public(rows), START_PHASES, found, head,
            self.starts.elapsed)  # fmt: skip


def run_startup(spec: StartupSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve each side's model, run every start, write the outputs; the gates' exit code."""
    if spec.artifacts:
        check_artifacts(spec.artifacts)
    sides = Sides.of(spec)
    resolved = sides.resolved(resolve_model)
    workers = {s: sides[s].spec.worker(d, t) for s, (t, d) in resolved.items()}
    starts = Starts(spec, sides, status)
    kind = StartupKind(spec, sides, resolved[sides.main][0], starts)

    def measure(run: MeasuredRun, lent: dict | None) -> None:
        starts.keep = run.on_row
        starts.measure(workers)

    return measured(kind, status, measure, check=check, json_mode=json_mode)


def resolve_model(spec: StartupSpec) -> tuple[str, str]:
    """compile's resolution (dtype, model directory, fits) for one process at a time."""
    return resolve(replace(spec.as_compile(), modes=("off",)), members=1)
