"""`nanobench buckets` (alias `bucketbench`): price a closed decode shape set before capturing.

What it is: the command, its spec (`BucketsSpec`: every option's default and the cross-option
rules) and its gates. It runs `nanobench.buckets.bench` on the host (a real cache and real
plans, no weights, no compiler), prints table 1 (per run length) and table 2 (the capture list
per width multiple, both kernels), with `--batch-trace FILE --max-graphs K` table 3 (the capture
list chosen for the served trace, beside vLLM's and SGLang's priced on it), writes
`<out>/buckets.csv` and
`<out>/bucketed-decode-shape.png`, and turns the gates into an exit status under `--check`.
What it is not: the measurement (`nanobench.buckets.bench`) or the formatting (`reports.buckets`).
Invariant: a gate failure is exit 1 under --check and never exit 2; bad input leaves the out
directory untouched.
"""

from __future__ import annotations


import typer

from nanobench.harness.common import Gate, finish, gate
from nanobench.harness.console import run_command, stdout_console
from nanobench.buckets.spec import CSV_NAME, PNG_NAME, OUT, BucketsSpec
from nanobench.harness.options import (
    BatchTrace,
    BlockSize,
    CaptureRows,
    CaptureSizes,
    CaptureTokens,
    CheckOpt,
    DeviceMemory,
    Dtype,
    Heads,
    JsonOpt,
    Kernel,
    MaxBatch,
    MaxGraphs,
    MaxModelLen,
    MaxShapes,
    MaxWaste,
    MemoryUtilization,
    Out,
    PromptLen,
    QuietOpt,
    Rows,
    RunLengths,
    Target,
    WidthMultiple,
    WidthMultiples,
)

def buckets(
    rows: Rows = BucketsSpec.rows,
    max_batch: MaxBatch = BucketsSpec.max_batch,
    prompt_len: PromptLen = BucketsSpec.prompt_len,
    run_lengths: RunLengths = BucketsSpec.run_lengths,
    width_multiple: WidthMultiple = BucketsSpec.width_multiple,
    max_model_len: MaxModelLen = BucketsSpec.max_model_len,
    block_size: BlockSize = BucketsSpec.block_size,
    capture_rows: CaptureRows = BucketsSpec.capture_rows,
    capture_tokens: CaptureTokens = BucketsSpec.capture_tokens,
    capture_sizes: CaptureSizes = BucketsSpec.capture_sizes,
    width_multiples: WidthMultiples = BucketsSpec.width_multiples,
    kernel: Kernel = BucketsSpec.kernel,
    heads: Heads = BucketsSpec.heads,
    max_shapes: MaxShapes = BucketsSpec.max_shapes,
    max_waste: MaxWaste = BucketsSpec.max_waste,
    batch_trace: BatchTrace = BucketsSpec.batch_trace,
    max_graphs: MaxGraphs = BucketsSpec.max_graphs,
    target: Target = BucketsSpec.target,
    device_memory: DeviceMemory = BucketsSpec.device_memory,
    gpu_memory_utilization: MemoryUtilization = BucketsSpec.gpu_memory_utilization,
    dtype: Dtype = BucketsSpec.dtype,
    out: Out = OUT,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Price a closed decode shape set on the host, per run length and per width multiple.

    Example: nanobench buckets --width-multiple 2048

    Example: nanobench buckets --run-lengths 8,512 --width-multiples 128,2048 --check

    Example: nanobench buckets --kernel triton --capture-sizes vllm --max-batch 64

    Example: nanobench buckets --batch-trace served.csv --max-graphs 8 --max-batch 64
    """
    with run_command(quiet) as status:
        spec = BucketsSpec(
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            run_lengths=tuple(run_lengths),
            width_multiple=width_multiple,
            max_model_len=max_model_len,
            block_size=block_size,
            capture_rows=capture_rows,
            capture_tokens=capture_tokens,
            capture_sizes=capture_sizes,
            width_multiples=None if width_multiples is None else tuple(width_multiples),
            kernel=kernel,
            heads=heads,
            max_shapes=max_shapes,
            max_waste=max_waste,
            batch_trace=batch_trace,
            max_graphs=max_graphs,
            target=target,
            device_memory=device_memory,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype="float32" if dtype == "auto" else dtype,
        ).validate()

        from nanobench.buckets.bench import CaptureRow, RecommendedRow, RunRow, measure
        from nanobench.harness.common import out_dir
        from nanobench.harness.rows import as_dicts, columns

        directory = out_dir(out)
        result = measure(spec, status)
        found = gates(spec, result)

        from dataclasses import asdict

        from reports.buckets import (
            BUCKETS_COLUMNS,
            draw_buckets,
            render_buckets,
            render_short_answer,
            save_buckets_figure,
        )
        from reports.csvio import write_rows

        status("writing the CSV and the diagram")
        # Missing cells as "" rather than None: a None makes pandas turn a column of counts
        # into floats ("8.0" steps), and each table leaves the other's columns empty.
        keys = [*columns(RunRow), *columns(CaptureRow), *columns(RecommendedRow)]
        keys = list(dict.fromkeys(keys))
        csv_rows = [{k: r.get(k, "") for k in keys} for r in result.rows]
        csv_path = write_rows(directory / CSV_NAME, csv_rows, BUCKETS_COLUMNS)
        runs, capture, chosen = (
            as_dicts(result.runs),
            as_dicts(result.capture),
            asdict(result.chosen),
        )
        fig = draw_buckets(
            runs,
            capture,
            [asdict(t) for t in result.traces],
            spec.max_shapes,
            spec.max_waste,
        )
        png_path = save_buckets_figure(fig, directory / PNG_NAME)
        outputs = {"csv": str(csv_path), "png": str(png_path)}

        def render() -> None:
            console = stdout_console()
            if spec.short:
                render_short_answer(
                    console, chosen, found, outputs, kernel=kernel, max_shapes=max_shapes
                )
            else:
                render_buckets(
                    console,
                    runs,
                    capture,
                    found,
                    outputs,
                    kernel=kernel,
                    max_shapes=max_shapes,
                    explicit_len=bool(max_model_len),
                )
            if spec.sizes is not None and not spec.short:
                from reports.capture_sizes import capture_sizes_table

                console.print(capture_sizes_table(result.chosen))
            if result.recommended:
                from reports.capture_sizes import recommended_table

                console.print(recommended_table(as_dicts(result.recommended)))

        code = finish(
            "buckets",
            result.rows,
            found,
            outputs,
            json_mode=json_mode,
            check=check,
            render=render,
        )
    raise typer.Exit(code)


def gates(spec: BucketsSpec, result) -> list[Gate]:
    """Closed runs, plans = arithmetic, the capture budget at the chosen multiple, bounded waste.

    `result` is `buckets_bench.measure`'s (its rows and the per-step traces they came from).
    Every gate goes through `nanobench.harness.common.gate`, so a broken promise is a failed gate (exit
    1 under --check) and never bad input.
    """
    from engine.buckets import check_capture_budget, check_run_closed, check_waste_bounded
    from nanobench.buckets.bench import capture_buckets, check_plans_match_arithmetic, run_buckets

    found: list[Gate] = []
    for row, trace in zip(result.runs, result.traces, strict=True):
        buckets = run_buckets(spec, row.max_model_len)
        found.append(
            gate(
                f"check_run_closed[steps={row.steps}]",
                check_run_closed,
                buckets,
                trace.bucketed_shapes,
            )
        )
        found.append(
            gate(
                f"check_plans_match_arithmetic[steps={row.steps}]",
                check_plans_match_arithmetic,
                row,
            )
        )
    found.append(
        gate(
            f"check_capture_budget[multiple={spec.multiple},kernel={spec.kernel}]",
            check_capture_budget,
            capture_buckets(spec, spec.multiple, spec.width_free),
            spec.max_shapes,
        )
    )
    waste_checks = [(f"steps={r.steps}", r.waste) for r in result.runs]
    waste_checks.append((f"typical,multiple={spec.multiple}", result.chosen.waste))
    for label, share in waste_checks:
        name = f"check_waste_bounded[{label}]"
        if spec.width_free:
            # The window is addressed, not computed: the kernel reads each row to its length,
            # padded rows have length 0, and there is no score rectangle to fill.
            found.append(Gate(name, True, "triton kernel: padded cells are never computed"))
        else:
            found.append(gate(name, check_waste_bounded, share, spec.max_waste))
    return found
