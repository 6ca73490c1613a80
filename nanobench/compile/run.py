"""One `nanobench compile` run: resolve the model, sweep the modes in rounds, report.

What it is: `run_compile(spec, status, ...)`, the command's work once its spec validated:
resolve the model and dtype, spawn each mode's workers and time them in interleaved rounds
(`bench.interleaved_sweep`), keep every row and window on disk as it comes (`Progress`), add
the engine's remedies, then the CSV, the diagram, the table and the exit code.
What it is not: the command's options (`command.py`), its spec (`spec.py`), its gates
(`gates.py`) or the measurement itself (`bench.py`, `session.py`).
Invariant: every row and every timed window is on disk before the next round; an interrupt
leaves what was measured there and says what did not run.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from nanobench.compile import history as compile_history
from nanobench.compile.bench import interleaved_sweep, member_name, members_of
from nanobench.compile.gates import gates
from nanobench.compile.rows import CompileRow, derive
from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.compile.traces import render_trace, trace_root
from nanobench.compile.vs import changes
from nanobench.cost.compile import classify_guard
from nanobench.harness.change import Change, comparison_gates, side_samples, side_windows
from nanobench.harness.console import interrupted, say_warning, stdout_console
from nanobench.harness.env_record import collect_env, with_load, write_env
from nanobench.harness.errors import BadInput, as_vs
from nanobench.harness.eta import announce
from nanobench.harness.export import export_compile
from nanobench.harness.history_store import RunHistory, settle
from nanobench.harness.load import crowded_note, look_before_timing, sample_load
from nanobench.harness.output import finish
from nanobench.harness.remedies import Growth, quote_dynamic_row, remedies_for, value_guard
from nanobench.harness.rounds import (
    SAMPLE_COLUMNS,
    RoundPlan,
    describe,
    look_confidence,
    round_plan,
    sample_rows,
)
from nanobench.harness.rows import as_dicts, columns
from nanobench.harness.targets import BUILTINS, target_option
from nanobench.harness.validate import dtype_option, fits_option, model_option, out_dir, out_file
from nanobench.harness.verdicts import INCONCLUSIVE
from reports.change import draw_compare, render_changes
from reports.compile import draw_compiled_decode, render_compile, why
from reports.csvio import write_rows
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
    sides = {}
    for side, side_spec in spec.sides().items():
        try:
            dtype, directory = resolve(side_spec)
        except BadInput as e:
            raise (as_vs(e) if side == "before" and spec.vs else e) from None
        sides[side] = side_spec.worker(directory, dtype, trace)
    return dtype, sides


@dataclass
class Progress:
    """The sweep as it stands: rows and windows so far, written to disk on every change."""

    spec: CompileSpec
    where: Path
    plan: RoundPlan
    status: object
    note: str | None = None
    done: dict[str, CompileRow] = field(default_factory=dict)
    windows: list = field(default_factory=list)
    # each compiled mode's earlier speedups on this machine: a plain run's, with --history
    history: dict = field(default_factory=dict)

    @property
    def csv_path(self) -> Path:
        return self.where / "compile.csv"

    @property
    def samples_path(self) -> Path:
        return self.where / "compile-samples.csv"

    @property
    def changes_path(self) -> Path:
        return self.where / "compile-changes.csv"

    def derived(self, windows: list, level: float) -> list[CompileRow]:
        """Each side's rows derived from its own windows, as a run of its own."""
        out = []
        for side in self.spec.sides():
            rows = [r for r in self.done.values() if r.side == side]
            out += derive(with_dynamic_row(rows), self.spec.horizon, side_windows(windows, side),
                          level, self.history)  # fmt: skip
        return out

    def level(self) -> float:
        return look_confidence(self.plan, max((w.round for w in self.windows), default=0))

    def save(self) -> list[CompileRow]:
        rows = self.derived(self.windows, self.level())
        # every row timed while the machine was crowded says so (seen before timing or after)
        rows = [replace(r, load_note=self.note) for r in rows] if self.note else rows
        write_rows(self.csv_path, as_dicts(rows), columns(CompileRow))
        if self.spec.compared:
            write_rows(
                self.samples_path,
                side_samples(self.windows, "mode"),
                ["side", "mode", *SAMPLE_COLUMNS],
            )
        else:
            write_rows(self.samples_path, sample_rows(self.windows, "mode"),
                       ["mode", *SAMPLE_COLUMNS])  # fmt: skip
        if self.spec.compared:
            write_rows(self.changes_path, as_dicts(self.changes(rows)), columns(Change))
        return rows

    def changes(self, rows: list[CompileRow]) -> list[Change]:
        return changes(rows, self.windows, self.level())

    def on_row(self, row: CompileRow) -> None:
        name = member_name(row.side, row.mode)
        if self.spec.trace and row.mode != "off":
            row = replace(row, **render_trace(trace_root(self.where) / name.replace(" ", "-")))
        if not self.spec.target:
            row = replace(row, remedies=engine_remedies(row, self.spec))
        self.done[name] = row
        self.save()

    def on_round(self, r: int, found: dict) -> None:
        self.save()
        self.status(f"round {r}: " + "; ".join(describe(m, i) for m, i in found.items()))

    def gates(self, rows: list[CompileRow], found: list[Change] | None = None) -> list:
        """A plain run's gates; a comparison's are the columns its user named."""
        if not self.spec.compared:
            return gates(self.spec, rows)
        failed = {f"{r.side} {r.mode}": r.status for r in rows if r.status != "ok"}
        return comparison_gates(failed, self.spec, found or [])

    def decided(self, timed: list, level: float) -> bool:
        """Every gate of the run pass or fail at this look's level: no round can change it."""
        rows = self.derived(timed, level)
        found = changes(rows, timed, level) if self.spec.compared else None
        return all(g.verdict != INCONCLUSIVE for g in self.gates(rows, found))


def sweep(progress: Progress, sides: dict[str, WorkerSpec]) -> None:
    """The rounds, every row and window kept; an interrupt says what is on disk."""
    spec = progress.spec
    members = members_of(sides, list(spec.modes))
    try:
        interleaved_sweep(
            members,
            progress.plan,
            timeout=spec.timeout,
            processes=spec.processes,
            decided=progress.decided,
            on_status=progress.status,
            on_row=progress.on_row,
            on_window=progress.windows.append,
            on_round=progress.on_round,
            history=progress.history,
        )
    except KeyboardInterrupt:
        progress.save()
        missing = [m.name for m in members if m.name not in progress.done]
        raise interrupted(
            len(progress.done),
            len(progress.windows),
            missing,
            progress.csv_path,
            progress.samples_path,
        ) from None


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


def settle_history(store, facts, rows_out, found, progress: Progress) -> str:
    """A sound run's speedups recorded; what it read and recorded written beside its CSV (the
    file's path); the store's problems said, one line each (`settle`)."""
    path = settle(
        store, progress.where / "compile-history.json", [r.status for r in rows_out], found,
        partial(compile_history.record, store, facts, rows_out, progress.windows),
        compile_history.use(facts, progress.history, rows_out), say_warning,
    )  # fmt: skip
    return path


def run_compile(spec: CompileSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve the model, run the sweep in rounds, write the outputs; the gates' exit code."""
    if check and spec.compared and not (spec.no_more or spec.no_slower):
        raise BadInput("--check on a comparison gates the columns you name: give --no-more "
                       "and/or --no-slower")  # fmt: skip
    where = out_dir(spec.out)
    out_file(spec.export_json, "--export-json")
    dtype, sides = worker_specs(spec, str(trace_root(where)) if spec.trace else "")
    record = collect_env(spec.threads, sys.argv)
    before, note = look_before_timing(record.threads)
    record = with_load(record, before)
    env_path = write_env(where / "compile-env.json", record)
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)
    progress = Progress(spec, where, plan, status, note)
    store = RunHistory() if spec.history and not spec.compared else None
    facts = compile_history.keys(sides[""], spec.processes, spec.modes) if store is not None else {}
    if store is not None:
        progress.history = compile_history.load(store, facts)
    timer = announce("compile", spec, status)  # the estimate's line, before any worker
    sweep(progress, sides)
    after = sample_load()
    record = with_load(record, after=after)
    write_env(env_path, record)
    progress.note = note or crowded_note(record.threads, after)
    rows_out = progress.save()
    found_changes = progress.changes(rows_out) if spec.compared else []
    found = progress.gates(rows_out, found_changes)
    head = heading(spec, dtype, rows_out)
    outputs = {
        "csv": str(progress.csv_path),
        "samples": str(progress.samples_path),
        "env": str(env_path),
    }
    if store is not None:
        outputs["history"] = settle_history(store, facts, rows_out, found, progress)
    if spec.compared:
        outputs["changes"] = str(progress.changes_path)
        outputs["png"] = str(draw_compare(as_dicts(rows_out), where / "compare.png", head))
        whys = [line for r in rows_out for line in why(r)]
        render = partial(
            render_changes, stdout_console(), as_dicts(found_changes), found, head, whys
        )
    else:
        outputs["png"] = str(draw_compiled_decode(rows_out, where / "compiled-decode.png", head))
        render = partial(render_compile, stdout_console(), rows_out, found, head)
    if spec.export_json:
        outputs["export_json"] = str(export_compile(spec, dtype, rows_out, record))
    timer.done(all(r.status == "ok" for r in rows_out))
    return finish(
        "compile",
        as_dicts(rows_out),
        found,
        outputs,
        json_mode=json_mode,
        check=check,
        render=render,
        failed=any(r.status != "ok" for r in rows_out),
        env=asdict(record),
        extra={"changes": as_dicts(found_changes)} if spec.compared else None,
    )
