"""One `nanobench compile` run: resolve the model, sweep the modes in rounds, report.

What it is: `run_compile(spec, status, ...)`, the command's work once its spec validated:
resolve the model and dtype of each side, then one measured run (`harness.measured_run`) around
the sweep (`bench.interleaved_sweep`); `CompileKind` is what compile brings to that run: its
rows derived, the engine's remedies and traces, its changes, gates, heading and report.
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
from nanobench.compile.rows import CompileRow, derive
from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.compile.traces import render_trace, trace_root
from nanobench.compile.vs import changes
from nanobench.cost.compile import classify_guard
from nanobench.harness.console import say_warning, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.export import export_compile
from nanobench.harness.history_store import RunHistory, settle
from nanobench.harness.load import crowded_note, look_before_timing
from nanobench.harness.measured_run import MeasuredRun, RunKind, for_each_side
from nanobench.harness.member import Member
from nanobench.harness.remedies import Growth, quote_dynamic_row, remedies_for, value_guard
from nanobench.harness.rounds import round_plan
from nanobench.harness.rows import as_dicts
from nanobench.harness.targets import BUILTINS, target_option
from nanobench.harness.validate import dtype_option, fits_option, model_option, out_dir
from reports.change import draw_compare, render_changes
from reports.compile import draw_compiled_decode, render_compile, why
from reports.style import counted, title


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


def resolve(spec: CompileSpec) -> tuple[str, str]:
    """The run's dtype and model directory ("" for a target's own): resolved, checked to fit."""
    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    directory = ""
    if spec.target:
        target_option(spec.target)
    if not spec.target or spec.target in BUILTINS:
        directory, config = model_option(spec.model)
        # Every worker of every mode (of each side) holds its model; one at a time also loads a
        # probe to set up.
        members = len(spec.modes) * (2 if spec.compared else 1)
        fits_option(config, dtype, spec.device, copies=members * spec.processes + 1)
        if spec.prompt_len + spec.steps > config.max_position_embeddings:
            raise BadInput("--prompt-len + --steps exceed the model's max_position_embeddings")
    return dtype, str(directory)


def worker_specs(spec: CompileSpec, trace: str) -> tuple[str, dict[str, WorkerSpec]]:
    """The run's dtype and each side's worker spec ("" alone; before and after with --vs)."""
    renames = {"--target": "--vs"} if spec.vs else {"--path": "--vs-path"}
    resolved = for_each_side(spec.sides(), resolve, renames)
    sides = {s: spec.sides()[s].worker(d, t, trace) for s, (t, d) in resolved.items()}
    return next(reversed(resolved.values()))[0], sides


class CompileKind(RunKind):
    """What compile brings to a measured run (`MeasuredRun`): members are (side, mode)."""

    command, label, row_type = "compile", "mode", CompileRow

    def __init__(self, spec: CompileSpec, dtype: str, trace: Path | None) -> None:
        super().__init__(spec)
        self.dtype, self.trace = dtype, trace
        self.store = RunHistory() if spec.history and not spec.compared else None
        self.facts: dict = {}

    def arrived(self, row: CompileRow) -> CompileRow:
        if self.trace is not None and row.mode != "off":
            row = replace(row, **render_trace(self.trace / Member(row.side, row.mode).label))
        if not self.spec.target:
            row = replace(row, remedies=engine_remedies(row, self.spec))
        return row

    def derive(self, side, rows, windows, level, history) -> list[CompileRow]:
        return derive(with_dynamic_row(rows), self.spec.horizon, windows, level, history)

    def changes(self, rows, windows, level) -> list:
        return changes(rows, windows, level)

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype, rows)

    def report(self, run: MeasuredRun, rows, found, changed, head):
        if run.sided:
            png = draw_compare(as_dicts(rows), run.where / "compare.png", head)
            whys = [line for r in rows for line in why(r)]
            return png, partial(render_changes, stdout_console(), as_dicts(changed), found, head,
                                whys)  # fmt: skip
        png = draw_compiled_decode(rows, run.where / "compiled-decode.png", head)
        return png, partial(render_compile, stdout_console(), rows, found, head)

    def export(self, rows, record):
        return export_compile(self.spec, self.dtype, rows, record)

    def open_history(self, run: MeasuredRun, worker: WorkerSpec) -> None:
        """A plain run's earlier speedups on this machine, lent to its rows and stop rule."""
        if self.store is not None:
            self.facts = compile_history.keys(worker, self.spec.processes, self.spec.modes)
            run.history = compile_history.load(self.store, self.facts)

    def settle_history(self, run: MeasuredRun, rows, found) -> str | None:
        """A sound run's speedups recorded; what it read and recorded written beside its CSV;
        the store's problems said, one line each (`settle`)."""
        if self.store is None:
            return None
        return settle(
            self.store, run.path("-history", "json"), [r.status for r in rows], found,
            partial(compile_history.record, self.store, self.facts, rows, run.windows),
            compile_history.use(self.facts, run.history, rows), say_warning,
        )  # fmt: skip


def heading(spec: CompileSpec, dtype: str, rows: list[CompileRow]) -> str:
    rounds_run = max((r.rounds or 0 for r in rows), default=0)
    if spec.vs:
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
    kind = CompileKind(spec, dtype, trace)
    run = MeasuredRun(kind, status, check, plan, spec.compared)
    run.open(look_before_timing)
    kind.open_history(run, sides[""] if "" in sides else sides["after"])
    planned = [Member(side, mode) for side in sides for mode in spec.modes]

    def measure() -> None:
        interleaved_sweep(sides, list(spec.modes), plan, timeout=spec.timeout,
                          processes=spec.processes, listener=run, on_status=status,
                          history=run.history)  # fmt: skip

    return run.run(measure, planned, json_mode=json_mode, crowded=crowded_note)
