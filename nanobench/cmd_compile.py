"""`nanobench compile` (alias compilebench): the sweep, one fresh process per mode.

Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
"""

from __future__ import annotations

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
        check_compile_amortised,
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
        be = r.get("breakeven_steps")
        gates.append(
            gate(
                f"check_compile_amortised[{mode}]",
                check_compile_amortised,
                float("inf") if be is None else be,
                horizon,
            )
        )
    if spec["bucketed"]:
        buckets = DecodeBuckets(spec["max_batch"], spec["max_model_len"], spec["width_multiple"])
        gates.append(gate("check_shapes_bucketed", check_shapes_bucketed, shapes, buckets))
    return gates


def compile_command(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    modes: str = typer.Option(
        "off,dynamic,static",
        help="Comma-separated: off, dynamic, static, reduce-overhead (CUDA graphs, CUDA only).",
    ),
    rows: int = typer.Option(4, help="Rows decoded together."),
    max_batch: int = typer.Option(8, help="Rows the cache holds (the row bucket ladder's top)."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row."),
    steps: int = typer.Option(16, help="Decode steps per mode."),
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
    check: bool = typer.Option(False, "--check", help="Exit 1 when a gate fails."),
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
    """Sweep compile modes over the decode step, each mode in a fresh process.

    Reports builds, reuse, fall-back (measured and predicted), guard kind, recompile reasons,
    compile seconds, step ms, speedup against off, and breakeven.

    Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
    Example: nanobench compile --target my_step.py:factory --steps 12 --backend eager
    """
    with run_command(quiet) as status:
        dtype = dtype_option(dtype, model, device)
        from nanobench.compile_bench import BACKENDS, MODES, derive, spec_for, sweep
        from nanobench.reduce_overhead import REDUCE_OVERHEAD, check_modes
        from reports.compile import (
            COMPILE_COLUMNS,
            draw_compiled_decode,
            harness_aliases,
            render_compile,
        )
        from reports.csvio import write_rows

        mode_list = choice_list("--modes", modes, (*MODES, REDUCE_OVERHEAD))
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
            # The worker loads the checkpoint twice (a probe, then the measured engine).
            fits_option(config, dtype, device, copies=2)
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
        done: list[dict] = []

        def on_row(row: dict) -> None:
            if trace and row.get("mode") != "off":
                row.update(render_trace(trace_root(where) / row["mode"]))
            if not target:
                row["remedies"] = engine_remedies(row, spec)
            done.append(harness_aliases(row))
            write_rows(csv_path, derive(list(done), horizon), COMPILE_COLUMNS)

        def on_progress(mode: str, event: dict) -> None:
            status(
                f"{mode}: step {event.get('step')}/{event.get('steps')}"
                + (" (building)" if event.get("built") else "")
            )

        try:
            for mode in mode_list:
                status(f"{mode}: starting a fresh process")
                sweep(spec, [mode], timeout=timeout, on_progress=on_progress, on_row=on_row)
        except KeyboardInterrupt:
            missing = [m for m in mode_list if m not in {r["mode"] for r in done}]
            say_error(
                f"interrupted: {len(done)} finished rows are in {csv_path}; "
                f"not run: {', '.join(missing)}"
            )
            raise typer.Exit(130) from None
        rows_out = derive(done, horizon)
        write_rows(csv_path, rows_out, COMPILE_COLUMNS)
        png = draw_compiled_decode(rows_out, where / "compiled-decode.png")
        gates = compile_gates(rows_out, spec, horizon)
        failed = any(r.get("status") != "ok" for r in rows_out)
        title = (
            (f"target {target}, " if target else "")
            + f"{model} {device} {dtype}, {rows} rows, {steps} steps, "
            f"{'bucketed' if bucketed else 'open'}, {cache} Inductor cache, backend {backend}"
        )
        code = finish(
            "compile",
            rows_out,
            gates,
            {"csv": str(csv_path), "png": str(png)},
            json_mode=json_mode,
            check=check,
            render=lambda: render_compile(stdout_console(), rows_out, gates, title),
            failed=failed,
        )
    raise typer.Exit(code)
