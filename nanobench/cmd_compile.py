"""`nanobench compile` (alias compilebench): the sweep, one fresh process per mode, in rounds.

Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import typer

from nanobench.common import (
    Gate,
    choice,
    choice_list,
    device_option,
    dtype_option,
    finish,
    fits_option,
    gate,
    interval_gate,
    model_option,
    out_dir,
    positive,
    threads_option,
)
from nanobench.console import run_command, say_error, stdout_console
from nanobench.errors import BadInput
from nanobench.targets import BUILTINS
from nanobench.traces import render_trace, trace_root


def target_options(target: str, *, bucketed: bool, path: str) -> None:
    """A target builds its own inputs: the engine's shape options cannot apply to it."""
    from nanobench.targets import target_option

    if bucketed or path != "planned":
        raise BadInput("--target: --bucketed and --path apply to the engine, not to a target")
    target_option(target)


def engine_remedies(row: dict, spec: dict) -> list[str]:
    """The engine's fixes: its growing dimension is the width of the decode step's shape."""
    from nanobench.compile_bench import step_shapes
    from nanobench.remedies import Growth, remedies_for

    widths = [w for _, w in step_shapes(spec)]
    growth = [] if spec["bucketed"] else [Growth("width", 1, widths[0], widths[-1])]
    found = remedies_for(
        fell_back=bool(row.get("fell_back")),
        guard_kind=str(row.get("guard_kind")),
        value_guards=row.get("expected_value_guards") or [],
        growth=growth,
        limit=int(row.get("recompile_limit") or 8),
        inputs_where="engine/plan.py: plan_decode",
        engine=True,
    )
    return [r.text() for r in found]


def compile_gates(rows: list[dict], spec: dict, horizon: int) -> list[Gate]:
    from engine.buckets import DecodeBuckets
    from nanobench.compile_bench import step_shapes
    from nanobench.cost.compile import (
        check_graph_reused,
        check_no_fallback,
        check_shapes_bucketed,
    )

    gates = []
    shapes = step_shapes(spec)
    for r in rows:
        mode = r.get("mode")
        if r.get("status") != "ok":
            gates.append(Gate(f"measured[{mode}]", False, str(r.get("status"))))
            continue
        if mode == "off":
            continue
        gates.append(
            gate(
                f"check_no_fallback[{mode}]",
                check_no_fallback,
                bool(r.get("fell_back")),
                (r.get("recompile_reasons") or [""])[-1],
            )
        )
        if mode == "dynamic" or spec["bucketed"]:
            limit = 2 if mode == "dynamic" else len(set(shapes))
            gates.append(
                gate(
                    f"check_graph_reused[{mode}]",
                    check_graph_reused,
                    int(r.get("builds") or 0),
                    spec["steps"],
                    limit,
                )
            )
        gates.append(amortised_gate(r, horizon))
    if spec["bucketed"]:
        buckets = DecodeBuckets(spec["max_batch"], spec["max_model_len"], spec["width_multiple"])
        gates.append(gate("check_shapes_bucketed", check_shapes_bucketed, shapes, buckets))
    return gates


def amortised_gate(row: dict, horizon: int) -> Gate:
    """Compiling pays back within the horizon: the saving per step against compile_s / horizon.

    Its interval decides: yes when the whole saving interval is above what the horizon needs,
    no when it is wholly below, can't tell otherwise (with the rounds likely to decide).
    """
    from nanobench.common import FAIL, INCONCLUSIVE, PASS
    from nanobench.stats import Interval

    mode = row["mode"]
    name = f"check_compile_amortised[{mode}]"
    needed = row.get("saving_needed_ms")
    if needed is None:
        why = (
            "every step built: no steady step to time (more --steps)"
            if row.get("status") == "ok" and not row.get("step_ms")
            else "no step time against off: run off in the same sweep"
        )
        return Gate(name, False, why)
    nan = float("nan")
    saving = Interval(
        *(nan if row.get(k) is None else row[k] for k in SAVING_KEYS), row.get("rounds") or 0
    )
    verdict = {"yes": PASS, "no": FAIL}.get(row.get("worth_compiling"), INCONCLUSIVE)
    be, low, high = (
        row.get(k) for k in ("breakeven_steps", "breakeven_steps_low", "breakeven_steps_high")
    )

    def steps(value) -> str:
        return "never" if value is None else f"{value:,.0f}"

    detail = (
        f"saving {saving.estimate:.4f} ms/step [{saving.low:.4f}, {saving.high:.4f}] against "
        f"{needed:.4f} needed to repay {row.get('compile_s') or 0:.2f} s within {horizon:,} steps; "
        f"breakeven {steps(be)} [{steps(low)}, {steps(high)}] steps"
    )
    if verdict == INCONCLUSIVE:
        more = row.get("worth_rounds_to_decide")
        detail += "; can't tell at this noise" + (
            f" (about {more} more rounds would likely decide)" if more else ""
        )
    return interval_gate(name, verdict, detail, saving, round(needed, 6))


SAVING_KEYS = ("saving_per_step_ms", "saving_per_step_ms_low", "saving_per_step_ms_high")


def compile_command(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    modes: str = typer.Option(
        "off,dynamic,static",
        help="Comma-separated: off, dynamic, static, reduce-overhead (CUDA graphs, CUDA only).",
    ),
    rows: int = typer.Option(4, help="Rows decoded together."),
    max_batch: int = typer.Option(8, help="Rows the cache holds (the row bucket ladder's top)."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row."),
    steps: int = typer.Option(
        16, help="Decode steps per pass: the first pass, and each round's timed window."
    ),
    rounds: int = typer.Option(3, help="Rounds at least (each mode one timed window a round)."),
    max_rounds: int = typer.Option(30, help="Rounds at most."),
    rel_ci: float = typer.Option(
        0.03,
        help="Stop adding rounds once every speedup's 95% interval is this tight (half-width).",
    ),
    budget_s: float = typer.Option(120.0, help="Stop adding rounds after this many seconds."),
    bucketed: bool = typer.Option(
        False,
        "--bucketed/--open",
        help="Close the shape set (pad rows and width) or leave it open.",
    ),
    width_multiple: int = typer.Option(128, help="Width bucket multiple (with --bucketed)."),
    max_model_len: int = typer.Option(
        2048, help="Slot table width, as a server sets it (the engine's default)."
    ),
    block_size: int = typer.Option(16, help="Tokens per KV block."),
    cache: str = typer.Option(
        "cold", help="cold: a fresh Inductor cache per mode; warm: one shared cache."
    ),
    backend: str = typer.Option(
        "inductor", help="inductor | aot_eager | eager (eager isolates dynamo)."
    ),
    path: str = typer.Option(
        "planned", help="planned | unplanned (addressing inside the forward)."
    ),
    device: str = typer.Option("cpu", help="cpu | cuda."),
    dtype: str = typer.Option(
        "auto",
        help="auto (the checkpoint's dtype on CUDA, float32 on CPU) | float32 | bfloat16 | float16.",
    ),
    threads: int = typer.Option(0, help="torch threads per worker (0: torch's default)."),
    horizon: int = typer.Option(
        10000, help="Decode steps a served process runs: the amortisation horizon."
    ),
    timeout: int = typer.Option(600, help="Seconds before a mode's worker is killed."),
    out: str = typer.Option(
        "nanobench-out", help="Directory for compile.csv and compiled-decode.png."
    ),
    json_mode: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables."
    ),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when a gate fails, 3 when none fails but one can't tell."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
    target: str = typer.Option(
        "",
        help="Your decode step instead of the engine: package.module:factory, "
        "path/file.py:factory, hf-static or hf-dynamic (README: the target protocol).",
    ),
    trace: bool = typer.Option(
        False,
        "--trace",
        help="TORCH_TRACE per mode into <out>/trace/<mode>/; tlparse if installed.",
    ),
) -> None:
    """Sweep compile modes over the decode step, each mode in its own fresh process.

    Each worker builds once and runs a first pass (builds, reuse, fall-back measured and
    predicted, guard kind, recompile reasons, compile seconds); then the modes take turns at
    timed windows in rotating rounds: step ms (median, IQR), speedup against off, saving and
    breakeven with 95% intervals, worth compiling yes / no / can't tell.

    Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
    Example: nanobench compile --target my_step.py:factory --steps 12 --backend eager
    """
    with run_command(quiet) as status:
        dtype = dtype_option(dtype, model, device)
        from nanobench.compile_bench import BACKENDS, MODES, derive, interleaved_sweep, spec_for
        from nanobench.env_record import collect_env, write_env
        from nanobench.reduce_overhead import REDUCE_OVERHEAD, check_modes
        from nanobench.rounds import SAMPLE_COLUMNS, describe, round_plan, sample_rows
        from reports.compile import (
            COMPILE_COLUMNS,
            draw_compiled_decode,
            harness_aliases,
            render_compile,
        )
        from reports.csvio import write_rows

        mode_list = choice_list("--modes", modes, (*MODES, REDUCE_OVERHEAD))
        if len(set(mode_list)) != len(mode_list):
            raise BadInput(f"--modes {modes!r}: a mode is named twice")
        plan = round_plan(rounds, max_rounds, rel_ci, budget_s)
        for name, value in (
            ("--rows", rows),
            ("--max-batch", max_batch),
            ("--prompt-len", prompt_len),
            ("--steps", steps),
            ("--width-multiple", width_multiple),
            ("--timeout", timeout),
            ("--block-size", block_size),
            ("--horizon", horizon),
        ):
            positive(name, value)
        threads_option(threads)
        if rows > max_batch:
            raise BadInput(f"--rows {rows}: above --max-batch {max_batch}")
        positive("--max-model-len", max_model_len)
        if prompt_len + steps > max_model_len:
            raise BadInput(
                f"--prompt-len {prompt_len} + --steps {steps} exceed --max-model-len {max_model_len}"
            )
        choice("--cache", cache, ("cold", "warm"))
        choice("--backend", backend, BACKENDS)
        choice("--path", path, ("planned", "unplanned"))
        if path == "unplanned" and bucketed:
            raise BadInput("--path unplanned cannot be --bucketed: the unplanned path has no plan")
        device_option(device)
        check_modes(mode_list, device, backend)
        if target:
            target_options(target, bucketed=bucketed, path=path)
        if not target or target in BUILTINS:
            directory, config = model_option(model)
            # Every mode's worker holds its model; one at a time also loads a probe to set up.
            fits_option(config, dtype, device, copies=len(mode_list) + 1)
            if prompt_len + steps > config.max_position_embeddings:
                raise BadInput("--prompt-len + --steps exceed the model's max_position_embeddings")
        else:
            directory = ""
        where = out_dir(out)
        spec = spec_for(
            model=directory,
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            steps=steps,
            bucketed=bucketed,
            width_multiple=width_multiple,
            max_model_len=max_model_len,
            cache=cache,
            backend=backend,
            device=device,
            dtype=dtype,
            decode_path=path,
            threads=threads,
            block_size=block_size,
            target=target,
            trace=str(trace_root(where)) if trace else "",
        )
        csv_path = where / "compile.csv"
        samples_path = where / "compile-samples.csv"
        record = collect_env(threads, sys.argv)
        env = asdict(record)
        env_path = write_env(where / "compile-env.json", record)
        done: dict[str, dict] = {}
        windows: list = []

        def save() -> list[dict]:
            rows_now = derive([harness_aliases(r) for r in done.values()], horizon, windows)
            write_rows(csv_path, rows_now, COMPILE_COLUMNS)
            write_rows(samples_path, sample_rows(windows, "mode"), ["mode", *SAMPLE_COLUMNS])
            return rows_now

        def on_row(row: dict) -> None:
            if trace and row.get("mode") != "off":
                row.update(render_trace(trace_root(where) / row["mode"]))
            if not target:
                row["remedies"] = engine_remedies(row, spec)
            done[row["mode"]] = row
            save()

        def on_round(r: int, found: dict) -> None:
            save()
            status(
                f"round {r}: "
                + "; ".join(describe(f"{m}/off speedup", i) for m, i in found.items())
            )

        try:
            interleaved_sweep(
                spec,
                mode_list,
                plan,
                timeout=timeout,
                on_status=status,
                on_row=on_row,
                on_window=windows.append,
                on_round=on_round,
            )
        except KeyboardInterrupt:
            save()
            missing = [m for m in mode_list if m not in done]
            say_error(
                f"interrupted: {len(done)} rows and {len(windows)} windows are in {csv_path} and "
                f"{samples_path}; not run: {', '.join(missing) or 'none'}"
            )
            raise typer.Exit(130) from None
        rows_out = save()
        gates = compile_gates(rows_out, spec, horizon)
        failed = any(r.get("status") != "ok" for r in rows_out)
        rounds_run = max((r.get("rounds") or 0 for r in rows_out), default=0)
        title = (
            (f"target {target}, " if target else "")
            + f"{model} {device} {dtype}, {rows} rows, {steps} steps x {rounds_run} rounds, "
            f"{'bucketed' if bucketed else 'open'}, {cache} Inductor cache, backend {backend}"
        )
        png = draw_compiled_decode(rows_out, where / "compiled-decode.png", title)
        code = finish(
            "compile",
            rows_out,
            gates,
            {
                "csv": str(csv_path),
                "png": str(png),
                "samples": str(samples_path),
                "env": str(env_path),
            },
            json_mode=json_mode,
            check=check,
            render=lambda: render_compile(stdout_console(), rows_out, gates, title),
            failed=failed,
            env=env,
        )
    raise typer.Exit(code)
