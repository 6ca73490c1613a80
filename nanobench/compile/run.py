"""One `nanobench compile` run: resolve the model, sweep the modes in rounds, report.

What it is: `run_compile(spec, status, ...)`, the command's work once its spec validated:
each side resolved (`sides.py`), then one measured run (`harness.runs.measured_run`) around
the sweep (`bench.interleaved_sweep`); `CompileKind` is what compile brings to that run: its
rows derived, the engine's remedies and traces, its changes, gates, heading and report; in
a `--try` run, each knob row's output held to plain's (`held_to_plain`).
What it is not: the command's options (`command.py`), its spec (`spec.py`), its gates
(`gates.py`), the measurement itself (`bench.py`, `session.py`) or the run's files, env
record, interrupt and exit code (`MeasuredRun`).
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
from nanobench.compile.vs import changes
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.export import export_compile
from nanobench.harness.runs.measured_run import MeasuredRun, RunKind
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.step.knobs import PLAIN, unsafe_of
from nanobench.harness.step.output_check import output_change
from nanobench.harness.step.targets import BUILTINS
from nanobench.harness.workers.load import crowded_note, look_before_timing
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import round_plan
from reports.compile import draw_compiled_decode, render_compile, why
from reports.style import counted, title


class CompileKind(RunKind):
    """What compile brings to a measured run (`MeasuredRun`): members are (side, mode)."""

    command, label, row_type = "compile", "mode", CompileRow

    def __init__(self, spec: CompileSpec, dtype: str, worker: WorkerSpec, trace: Path | None):
        super().__init__(spec)
        self.dtype, self.worker, self.trace = dtype, worker, trace

    def arrived(self, row: CompileRow) -> CompileRow:
        if self.trace is not None and row.mode != "off":
            row = replace(row, **render_trace(self.trace / Member(row.side, row.mode).label))
        if not self.spec.target:
            row = replace(row, remedies=engine_remedies(row, self.spec))
        return row

    def derive(self, side, rows, windows, level, history) -> list[CompileRow]:
        return derive(with_dynamic_row(rows), self.spec.horizon, windows, level, history)

    def changes(self, rows, windows, level) -> list:
        return changes(rows, windows, level, self.spec.pairs())

    def lends(self, side: str) -> list[Member]:
        # eager off reads no knob: a knob side's speedup and breakeven are over plain's off
        return [Member(PLAIN, "off")] if self.spec.tries and side != PLAIN else []

    def across(self, rows: list[CompileRow]) -> list[CompileRow]:
        return held_to_plain(rows, self.dtype) if self.spec.tries else rows

    def public(self, rows, sided: bool) -> list[dict]:
        return [{k: v for k, v in d.items() if k != "outputs"} for d in as_dicts(rows)]

    def csv_columns(self, sided: bool) -> list[str]:
        return [c for c in columns(CompileRow) if c != "outputs"]

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype, rows)

    def side_names(self) -> tuple[str, str]:
        return (PLAIN, "knob") if self.spec.tries else super().side_names()

    def why_lines(self, rows) -> list[str]:
        failed = [f"{Member(r.side, r.mode)}: {r.status}" for r in rows if r.status != "ok"]
        unsafe = [line for k in self.spec.tries for line in unsafe_of(k)]
        return failed + unsafe + [line for r in rows for line in why(r)]

    def report(self, run: MeasuredRun, rows, found, changed, head):
        png = draw_compiled_decode(rows, run.where / "compiled-decode.png", head)
        notes = knobs_next(rows, self.spec)
        return png, partial(render_compile, stdout_console(), rows, found, head, notes)

    def change_notes(self, changes) -> list[str]:
        return knobs_measured(changes) if self.spec.tries else []

    def export(self, rows, record):
        return export_compile(self.spec, self.dtype, rows, record)

    history = compile_history

    def history_keys(self) -> dict:
        return compile_history.keys(self.worker, self.spec.processes, self.spec.modes)


def held_to_plain(rows: list[CompileRow], dtype: str) -> list[CompileRow]:
    """Each knob side's rows with their first pass's output held against plain's in the same
    mode: beyond the dtype's tolerance, the row fails saying so (`output_check`)."""
    plain = {r.mode: r for r in rows if r.side == PLAIN}
    out = []
    for r in rows:
        base = plain.get(r.mode)
        said = ""
        if r.side != PLAIN and r.status == "ok" and base is not None and base.status == "ok":
            said = output_change(base.outputs, r.outputs, dtype)
        out.append(replace(r, status=f"{said} against plain {r.mode}") if said else r)
    return out


def heading(spec: CompileSpec, dtype: str, rows: list[CompileRow]) -> str:
    rounds_run = max((r.rounds or 0 for r in rows), default=0)
    if spec.tries:
        what = (f"knobs {', '.join(spec.tries)} against plain torch.compile"
                + (f" of target {spec.target}" if spec.target else ""))  # fmt: skip
    elif spec.vs:
        what = f"compiled decode of target {spec.target} (after) vs {spec.vs} (before)"
    elif spec.vs_path:
        what = f"compiled decode on the {spec.path} path (after) vs {spec.vs_path} (before)"
    else:
        what = "compiled decode" + (f" of target {spec.target}" if spec.target else "")
    return title(
        what,
        # A target of the user's own takes no --model: the title names the target alone.
        model=spec.model if not spec.target or spec.target in BUILTINS else None,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        steps=f"{spec.steps} x {counted(rounds_run, 'round')} in "
        f"{counted(spec.processes, 'process')}",
        shapes="bucketed" if spec.bucketed else "open",
        inductor_cache=spec.cache,
        backend=spec.backend,
    )


def run_compile(spec: CompileSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve each side's model, sweep the modes in rounds, report; the gates' exit code."""
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)
    trace = trace_root(out_dir(spec.out)) if spec.trace else None
    dtype, sides = worker_specs(spec, str(trace) if trace else "")
    kind = CompileKind(spec, dtype, next(reversed(sides.values())), trace)
    run = MeasuredRun(kind, status, check, plan, spec.compared)
    run.open(look_before_timing)
    lent = run.open_history()
    planned = [Member(side, mode) for side, each in spec.sides().items() for mode in each.modes]

    def measure() -> None:
        interleaved_sweep(sides, planned, plan, pairs=spec.pairs(), timeout=spec.timeout,
                          processes=spec.processes, listener=run, on_status=status,
                          history=lent)  # fmt: skip

    return run.run(measure, planned, json_mode=json_mode, crowded=crowded_note)
