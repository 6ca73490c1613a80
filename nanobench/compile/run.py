"""One `nanobench compile` run: its sides resolved, the modes swept in rounds, reported.

What it is: `CompileKind` (what compile brings to a measured run: rows derived, the engine's
remedies and traces, changes, heading, report, export; a knob row's output held to plain's) and
`run_compile`, the command's work once its spec validated (`measured` around `interleaved_sweep`).
What it is not: the options, spec, gates, measurement or the run's files (`MeasuredRun`).
Invariant: a remedy never contradicts a row beside it; a side is a parameter, not a copy.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from nanobench.compile import history as compile_history
from nanobench.compile.bench import interleaved_sweep
from nanobench.compile.gates import gates
from nanobench.compile.remedies import engine_remedies, knobs_measured, knobs_next, with_dynamic_row
from nanobench.compile.rows import CompileRow, derive
from nanobench.compile.sides import worker_specs
from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.compile.traces import render_trace, trace_root
from nanobench.compile.vs import changes, held_to_base, saved_changes
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.export import export_compile
from nanobench.harness.runs.measured_run import MeasuredRun, measured
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.load import crowded_note, look_before_timing
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import round_plan
from reports.change import COMPILE_PANELS
from reports.compile import draw_compiled_decode, render_compile, why


class CompileKind(RunKind):
    """What compile brings to a measured run (`MeasuredRun`): members are (side, mode)."""

    command, label, row_type, spec_type = "compile", "mode", CompileRow, CompileSpec
    gate = staticmethod(gates)
    change, exporter = staticmethod(changes), staticmethod(export_compile)
    counts, timings, panels = CompileSpec.COUNTS, CompileSpec.TIMINGS, COMPILE_PANELS
    history, unwritten = compile_history, ("outputs",)  # the output check's, not a column
    why = staticmethod(why)

    saved_changes = staticmethod(saved_changes)

    def __init__(self, spec: CompileSpec, sides: Sides, dtype: str, worker: WorkerSpec,
                 trace: Path | None):  # fmt: skip
        super().__init__(spec, sides, dtype)
        self.worker, self.trace = worker, trace

    def arrived(self, row: CompileRow) -> CompileRow:
        if self.trace is not None and row.mode != "off":
            row = replace(row, **render_trace(self.trace / Member(row.side, row.mode).label))
        if not self.spec.target:
            row = replace(row, remedies=engine_remedies(row, self.spec))
        return row

    def derive(self, side, rows, windows, level, history) -> list[CompileRow]:
        return derive(with_dynamic_row(rows), self.spec.horizon, windows, level, history)

    def across(self, rows: list[CompileRow]) -> list[CompileRow]:
        return held_to_base(rows, self.sides, self.dtype)

    def why_lines(self, rows, changes=()) -> list[str]:
        failed = [f"{Member(r.side, r.mode)}: {r.status}" for r in rows if r.status != "ok"]
        measured = self.sides.worded([], lambda knobs: knobs_measured(changes), lambda b: [])
        horizon = f"worth it: priced at --horizon {self.spec.horizon:,} steps a process serves"
        return failed + [line for r in rows for line in why(r)] + measured + [horizon]

    def report(self, run: MeasuredRun, rows, found, changed, head):
        png = draw_compiled_decode(rows, run.where / "compiled-decode.png", head)
        notes = knobs_next(rows, self.spec)
        return png, partial(render_compile, stdout_console(), rows, found, head, notes,
                            horizon=self.spec.horizon)  # fmt: skip

    def history_keys(self) -> dict:
        return compile_history.keys(self.worker, self.spec.processes, self.spec.modes)


def run_compile(spec: CompileSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve each side's model, sweep the modes in rounds, report; the gates' exit code."""
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)
    trace = trace_root(out_dir(spec.out)) if spec.trace else None
    sides = Sides.of(spec)
    dtype, workers = worker_specs(sides, str(trace) if trace else "")
    kind = CompileKind(spec, sides, dtype, workers[sides.main], trace)

    def measure(run: MeasuredRun, lent: dict | None) -> None:
        interleaved_sweep(workers, kind.planned(), plan, sides=sides, timeout=spec.timeout,
                          processes=spec.processes, listener=run, on_status=status,
                          history=lent)  # fmt: skip

    return measured(kind, status, measure, check=check, json_mode=json_mode, plan=plan,
                    look=look_before_timing, crowded=crowded_note)  # fmt: skip
