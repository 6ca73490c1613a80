"""One `nanobench startup` run: every start in its own fresh process, back to back, then report.

What it is: `StartupKind` (what startup brings to a measured run, `harness.runs.measured_run`: its
rows with their savings, the graphs beside them, its changes, gates, heading and report) and
`run_startup(spec, status, ...)`: each side's model resolved, then one measured run around the
starts (`starts.Starts`).
What it is not: the starts and their order (`startup.starts`), a start (`startup.session`), its
phases (`startup.phases`), the comparison's arithmetic (`startup.vs`), the report or the run's
files, env record, interrupt and exit code (`MeasuredRun`).
Invariant: every row is on disk before the next start; a plain run's files have no side column.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from nanobench.compile.sides import resolve
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.export import export_startup
from nanobench.harness.runs.measured_run import MeasuredRun, RunKind
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.step.targets import BUILTINS
from nanobench.harness.workers.member import Member, for_each_side
from nanobench.startup.caches import check_artifacts
from nanobench.startup.gates import gates
from nanobench.startup.phases import START_PHASES
from nanobench.startup.rows import GraphRow, StartRow, with_saved
from nanobench.startup.spec import StartupSpec
from nanobench.startup.starts import Starts, plan
from nanobench.startup.vs import changes
from reports.csvio import write_rows
from reports.startup import draw_startup, render_changes, render_startup
from reports.style import counted, title


class StartupKind(RunKind):
    """What startup brings to a measured run: members are (side, "mode kind run"), one start
    each; the graphs each start built are written beside its rows."""

    command, label, row_type = "startup", "start", StartRow

    def __init__(self, spec: StartupSpec, dtype: str, starts: Starts) -> None:
        super().__init__(spec)
        self.dtype, self.starts = dtype, starts

    def member(self, row: StartRow) -> Member:
        return start_member(row.side, row.mode, row.kind, row.run)

    def derive(self, side, rows, windows, level, history) -> list[StartRow]:
        return with_saved(rows)

    def changes(self, rows, windows, level) -> list:
        return changes(rows)

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def public(self, rows, sided: bool) -> list[dict]:
        """A plain run's rows have no side column, as before --vs."""
        dicts = as_dicts(rows)
        return dicts if sided else [{k: v for k, v in d.items() if k != "side"} for d in dicts]

    def csv_columns(self, sided: bool) -> list[str]:
        return [c for c in columns(StartRow) if sided or c != "side"]

    def save_more(self, run: MeasuredRun, rows) -> None:
        graphs = [d if run.sided else {k: v for k, v in d.items() if k != "side"}
                  for d in as_dicts(self.starts.graphs)]  # fmt: skip
        cols = [c for c in columns(GraphRow) if run.sided or c != "side"]
        write_rows(run.path("-graphs"), graphs, cols)

    def more_outputs(self, run: MeasuredRun) -> dict[str, str]:
        return {"graphs": str(run.path("-graphs"))}

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype)

    def compare_report(self, run: MeasuredRun, rows, found, changed, head):
        return self.report(run, rows, found, changed, head)

    def report(self, run: MeasuredRun, rows, found, changed, head):
        dicts = self.public(rows, run.sided)
        # the figure's bars are "before dynamic", "after dynamic": each side a mode of its own
        bars = [{**d, "mode": str(Member(d["side"], d["mode"]))} for d in as_dicts(rows)]
        png = draw_startup(bars, START_PHASES, run.where / "startup.png", head)
        if run.sided:
            return png, partial(render_changes, stdout_console(), as_dicts(changed), dicts,
                                found, head, self.starts.elapsed)  # fmt: skip
        return png, partial(render_startup, stdout_console(), dicts, START_PHASES, found, head,
                            self.starts.elapsed)  # fmt: skip

    def export(self, rows, record):
        return export_startup(self.spec, self.dtype, self.public(rows, self.spec.compared), record)


def start_member(side: str, mode: str, kind: str, run: int) -> Member:
    """A start as a member of its run: its side, and "dynamic warm 2" for people."""
    return Member(side, f"{mode} {kind} {run}")


def heading(spec: StartupSpec, dtype: str) -> str:
    if spec.compared:
        what = f"startup of target {spec.target} (after) vs {spec.vs} (before)"
    else:
        what = "startup" + (f" of target {spec.target}" if spec.target else "")
    return title(
        what,
        model=spec.model if not spec.target or spec.target in BUILTINS else None,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        steps=f"{spec.steps} in the first pass, {counted(spec.runs, 'run')}",
        backend=spec.backend,
        pgo="on" if spec.pgo else "off (pinned)",
    )


def run_startup(spec: StartupSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve each side's model, run every start, write the outputs; the gates' exit code."""
    if spec.artifacts:
        check_artifacts(spec.artifacts)
    resolved = for_each_side(spec.sides(), resolve_model, {"--target": "--vs"})
    workers = {s: spec.sides()[s].worker(d, t) for s, (t, d) in resolved.items()}
    dtype = next(reversed(resolved.values()))[0]
    starts = Starts(spec, status)
    run = MeasuredRun(StartupKind(spec, dtype, starts), status, check, None, spec.compared)
    starts.keep = run.on_row
    run.open()
    planned = [start_member(*cell) for cell in plan(spec)]
    return run.run(partial(starts.measure, workers), planned, json_mode=json_mode)


def resolve_model(spec: StartupSpec) -> tuple[str, str]:
    """compile's resolution (dtype, model directory, fits) for one process at a time."""
    return resolve(replace(spec.as_compile(), modes=("off",)))
