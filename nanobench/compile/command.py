"""`nanobench compile` (alias compilebench): the sweep, one fresh process per mode, in rounds.

What it is: `CompileSpec` (every option's default, and `validate()` for the rules across
options), `gates(spec, rows)` (the sweep's promises, checked on typed rows) and the command.
What it is not: the measurement (`compile_bench`, `compile_session`), the row (`compile_rows`)
or the report (`reports.compile`).
Invariant: every input is checked before a worker starts; a gate reads typed fields, so a
field a worker stopped sending fails loudly instead of passing.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, replace

import typer

from nanobench.compile.rows import CompileRow
from nanobench.compile.traces import render_trace, trace_root
from nanobench.harness import options as o
from nanobench.harness.common import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Gate,
    device_option,
    dtype_option,
    finish,
    fits_option,
    gate,
    interval_gate,
    model_option,
    out_dir,
    positive,
)
from nanobench.harness.console import interrupted, run_command, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.targets import BUILTINS


@dataclass(frozen=True)
class CompileSpec:
    """The sweep as asked for: each option's one default; `max_model_len` 0 is the run's."""

    model: str = "tiny"
    modes: tuple[str, ...] = o.Names(("off", "dynamic", "static"))
    rows: int = 4
    max_batch: int = 8
    prompt_len: int = 16
    steps: int = 16
    rounds: int = 3
    max_rounds: int = 30
    processes: int = 2
    rel_ci: float = 0.03
    budget_s: float = 120.0
    bucketed: bool = False
    width_multiple: int = 128
    max_model_len: int = 2048
    block_size: int = 16
    cache: str = "cold"
    backend: str = "inductor"
    path: str = "planned"
    device: str = "cpu"
    dtype: str = "auto"
    threads: int = 0
    horizon: int = 10000
    timeout: int = 600
    out: str = "nanobench-out"
    target: str = ""
    trace: bool = False

    def validate(self) -> CompileSpec:
        """Rules across options (ranges and choices are the options' own); the run's width."""
        from nanobench.compile.reduce_overhead import check_modes
        from nanobench.harness.rounds import round_plan

        round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)
        positive("--processes", self.processes)
        if self.rows > self.max_batch:
            raise BadInput(f"--rows {self.rows}: above --max-batch {self.max_batch}")
        width = self.max_model_len or self.prompt_len + self.steps
        if self.prompt_len + self.steps > width:
            raise BadInput(
                f"--prompt-len {self.prompt_len} + --steps {self.steps} exceed "
                f"--max-model-len {width}"
            )
        if self.path == "unplanned" and self.bucketed:
            raise BadInput("--path unplanned cannot be --bucketed: the unplanned path has no plan")
        device_option(self.device)
        check_modes(list(self.modes), self.device, self.backend)
        if self.target and (self.bucketed or self.path != "planned"):
            raise BadInput("--target: --bucketed and --path apply to the engine, not to a target")
        return replace(self, max_model_len=width)

    def worker(self, model: str = "", dtype: str = "float32", trace_dir: str = "") -> dict:
        """The spec a mode's worker reads (`compile_bench.spec_for`): resolved model and dtype."""
        from nanobench.compile.bench import spec_for

        shape = ("rows", "max_batch", "prompt_len", "steps", "bucketed", "width_multiple")
        rest = ("max_model_len", "cache", "backend", "device", "threads", "block_size", "target")
        return spec_for(
            **{k: getattr(self, k) for k in (*shape, *rest)},
            model=model,
            dtype=dtype,
            decode_path=self.path,
            trace=trace_dir,
        )


def engine_remedies(row: CompileRow, spec: CompileSpec) -> list[str]:
    """The engine's fixes: its growing dimension is the width of the decode step's shape."""
    from nanobench.compile.bench import step_shapes
    from nanobench.cost.compile import classify_guard
    from nanobench.harness.remedies import Growth, remedies_for, value_guard

    widths = [w for _, w in step_shapes(spec.worker())]
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
    from nanobench.harness.remedies import quote_dynamic_row

    dynamic = next((r for r in rows if r.mode == "dynamic" and r.builds is not None), None)
    builds, fell_back = (dynamic.builds, dynamic.fell_back) if dynamic else (None, None)
    return [
        replace(r, remedies=[quote_dynamic_row(t, builds, fell_back) for t in r.remedies])
        if r.remedies
        else r
        for r in rows
    ]


def gates(spec: CompileSpec, rows: list[CompileRow]) -> list[Gate]:
    """Measured, no fall-back, graphs reused, compile amortised; bucketed shapes on the ladder."""
    from engine.buckets import DecodeBuckets
    from nanobench.compile.bench import step_shapes
    from nanobench.cost.compile import (
        check_graph_reused,
        check_no_fallback,
        check_shapes_bucketed,
    )

    found = []
    shapes = step_shapes(spec.worker())
    for r in rows:
        if r.status != "ok":
            found.append(Gate(f"measured[{r.mode}]", False, r.status))
            continue
        if r.mode == "off":
            continue
        last_reason = r.recompile_reasons[-1] if r.recompile_reasons else ""
        found.append(
            gate(f"check_no_fallback[{r.mode}]", check_no_fallback, r.fell_back, last_reason)
        )
        if r.mode == "dynamic" or spec.bucketed:
            limit = 2 if r.mode == "dynamic" else len(set(shapes))
            found.append(
                gate(
                    f"check_graph_reused[{r.mode}]",
                    check_graph_reused,
                    r.builds,
                    spec.steps,
                    limit,
                )
            )
        found.append(amortised_gate(r, spec.horizon))
    if spec.bucketed:
        buckets = DecodeBuckets(spec.max_batch, spec.max_model_len, spec.width_multiple)
        found.append(gate("check_shapes_bucketed", check_shapes_bucketed, shapes, buckets))
    return found


def amortised_gate(row: CompileRow, horizon: int) -> Gate:
    """Compiling pays back within the horizon: the saving interval against compile_s / horizon
    decides pass (wholly above), fail (wholly below) or can't tell (with rounds to decide)."""
    from nanobench.harness.stats import Interval

    name = f"check_compile_amortised[{row.mode}]"
    needed = row.saving_needed_ms
    if needed is None:
        why = (
            "every step built: no steady step to time (more --steps)"
            if row.status == "ok" and not row.step_ms
            else "no step time against off: run off in the same sweep"
        )
        return Gate(name, False, why)
    nan = float("nan")
    ends = (row.saving_per_step_ms, row.saving_per_step_ms_low, row.saving_per_step_ms_high)
    saving = Interval(*(nan if v is None else v for v in ends), row.rounds or 0)
    verdict = {"yes": PASS, "no": FAIL}.get(row.worth_compiling, INCONCLUSIVE)

    def steps(value) -> str:
        return "never" if value is None else f"{value:,.0f}"

    detail = (
        f"saving {saving.estimate:.4f} ms/step [{saving.low:.4f}, {saving.high:.4f}] against "
        f"{needed:.4f} needed to repay {row.compile_s:.2f} s within {horizon:,} steps; "
        f"breakeven {steps(row.breakeven_steps)} [{steps(row.breakeven_steps_low)}, "
        f"{steps(row.breakeven_steps_high)}] steps"
    )
    if verdict == INCONCLUSIVE:
        more = row.worth_rounds_to_decide
        detail += "; can't tell at this noise" + (
            f" (about {more} more rounds would likely decide)" if more else ""
        )
    return interval_gate(name, verdict, detail, saving, round(needed, 6))


D = CompileSpec()


def compile_command(
    model: o.Model = D.model,
    modes: o.Modes = D.modes,
    rows: o.Rows = D.rows,
    max_batch: o.MaxBatch = D.max_batch,
    prompt_len: o.PromptLen = D.prompt_len,
    steps: o.Steps = D.steps,
    rounds: o.Rounds = D.rounds,
    max_rounds: o.MaxRounds = D.max_rounds,
    processes: o.Processes = D.processes,
    rel_ci: o.RelCi = D.rel_ci,
    budget_s: o.BudgetS = D.budget_s,
    bucketed: o.Bucketed = D.bucketed,
    width_multiple: o.WidthMultiple = D.width_multiple,
    max_model_len: o.MaxModelLen = D.max_model_len,
    block_size: o.BlockSize = D.block_size,
    cache: o.Cache = D.cache,
    backend: o.Backend = D.backend,
    path: o.DecodePath = D.path,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    horizon: o.Horizon = D.horizon,
    timeout: o.Timeout = D.timeout,
    out: o.Out = D.out,
    target: o.Target = D.target,
    trace: o.Trace = D.trace,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Sweep compile modes over the decode step, each mode in its own fresh process.

    Each worker builds once and runs a first pass (builds, reuse, fall-back measured and
    predicted, guard kind, recompile reasons, compile seconds); then the modes take turns at
    timed windows in rotating rounds, each mode's rounds dealt over --processes workers: step
    ms (median, IQR), speedup against off, saving and breakeven with 95% intervals (between-
    process variance inside them), worth compiling yes / no / can't tell.

    Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
    Example: nanobench compile --target my_step.py:factory --steps 12 --backend eager
    Example: nanobench compile --modes off,static --cache warm --check
    """
    options = {k: v for k, v in locals().items() if k not in ("json_mode", "check", "quiet")}
    with run_command(quiet) as status:
        spec = CompileSpec(**options).validate()
        run_compile(spec, status, json_mode=json_mode, check=check)


def run_compile(spec: CompileSpec, status, *, json_mode: bool, check: bool) -> None:
    """Resolve the model, run the sweep in rounds, write the outputs and exit with the gates."""
    from nanobench.compile.bench import interleaved_sweep
    from nanobench.compile.rows import derive
    from nanobench.harness.env_record import collect_env, with_load, write_env
    from nanobench.harness.load import crowded_note, look_before_timing, sample_load
    from nanobench.harness.rounds import (
        SAMPLE_COLUMNS,
        describe,
        look_confidence,
        round_plan,
        sample_rows,
    )
    from nanobench.harness.rows import as_dicts, columns
    from reports.compile import draw_compiled_decode, render_compile
    from reports.csvio import write_rows
    from reports.style import title

    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    directory = ""
    if spec.target:
        from nanobench.harness.targets import target_option

        target_option(spec.target)
    if not spec.target or spec.target in BUILTINS:
        directory, config = model_option(spec.model)
        # Every worker of every mode holds its model; one at a time also loads a probe to set up.
        fits_option(config, dtype, spec.device, copies=len(spec.modes) * spec.processes + 1)
        if spec.prompt_len + spec.steps > config.max_position_embeddings:
            raise BadInput("--prompt-len + --steps exceed the model's max_position_embeddings")
    where = out_dir(spec.out)
    worker_spec = spec.worker(str(directory), dtype, str(trace_root(where)) if spec.trace else "")
    csv_path, samples_path = where / "compile.csv", where / "compile-samples.csv"
    record = collect_env(spec.threads, sys.argv)
    before, note = look_before_timing(record.threads)
    record = with_load(record, before)
    env_path = write_env(where / "compile-env.json", record)
    done: dict[str, CompileRow] = {}
    windows: list = []
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)

    def save() -> list[CompileRow]:
        level = look_confidence(plan, max((w.round for w in windows), default=0))
        rows_now = derive(with_dynamic_row(list(done.values())), spec.horizon, windows, level)
        # every row timed while the machine was crowded says so (seen before timing or after)
        rows_now = [replace(r, load_note=note) for r in rows_now] if note else rows_now
        write_rows(csv_path, as_dicts(rows_now), columns(CompileRow))
        write_rows(samples_path, sample_rows(windows, "mode"), ["mode", *SAMPLE_COLUMNS])
        return rows_now

    def on_row(row: CompileRow) -> None:
        if spec.trace and row.mode != "off":
            row = replace(row, **render_trace(trace_root(where) / row.mode))
        if not spec.target:
            row = replace(row, remedies=engine_remedies(row, spec))
        done[row.mode] = row
        save()

    def on_round(r: int, found: dict) -> None:
        save()
        status(
            f"round {r}: " + "; ".join(describe(f"{m}/off speedup", i) for m, i in found.items())
        )

    def decided(timed: list, level: float) -> bool:
        """Every gate of the run pass or fail at this look's level: no round can change it."""
        rows_now = derive(list(done.values()), spec.horizon, timed, level)
        return all(g.verdict != INCONCLUSIVE for g in gates(spec, rows_now))

    try:
        interleaved_sweep(
            worker_spec,
            list(spec.modes),
            plan,
            timeout=spec.timeout,
            processes=spec.processes,
            decided=decided,
            on_status=status,
            on_row=on_row,
            on_window=windows.append,
            on_round=on_round,
        )
    except KeyboardInterrupt:
        save()
        missing = [m for m in spec.modes if m not in done]
        raise interrupted(len(done), len(windows), missing, csv_path, samples_path) from None
    after = sample_load()
    record = with_load(record, after=after)
    write_env(env_path, record)
    note = note or crowded_note(record.threads, after)
    rows_out = save()
    found = gates(spec, rows_out)
    rounds_run = max((r.rounds or 0 for r in rows_out), default=0)
    heading = title(
        "compiled decode" + (f" of target {spec.target}" if spec.target else ""),
        # A target of the user's own takes no --model: the title names the target alone.
        model=spec.model if not spec.target or spec.target in BUILTINS else None,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        steps=f"{spec.steps} x {rounds_run} rounds in {spec.processes} processes",
        shapes="bucketed" if spec.bucketed else "open",
        inductor_cache=spec.cache,
        backend=spec.backend,
    )
    png = draw_compiled_decode(rows_out, where / "compiled-decode.png", heading)
    code = finish(
        "compile",
        as_dicts(rows_out),
        found,
        {"csv": str(csv_path), "png": str(png), "samples": str(samples_path), "env": str(env_path)},
        json_mode=json_mode,
        check=check,
        render=lambda: render_compile(stdout_console(), rows_out, found, heading),
        failed=any(r.status != "ok" for r in rows_out),
        env=asdict(record),
    )
    raise typer.Exit(code)
