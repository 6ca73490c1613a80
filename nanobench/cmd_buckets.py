"""`nanobench buckets` (alias `bucketbench`): price a closed decode shape set before capturing.

What it is: the command. It validates every option (a mistake is one line and exit 2, before
anything is measured or written), runs `nanobench.buckets_bench` on the host (a real cache and
real plans, no weights, no compiler), prints table 1 (per run length) and table 2 (the capture
list per width multiple, both kernels), writes `<out>/buckets.csv` and
`<out>/bucketed-decode-shape.png`, and turns the gates into an exit status under `--check`.
What it is not: the measurement (`nanobench.buckets_bench`) or the formatting (`reports.buckets`).
Invariant: a gate failure is exit 1 under --check and never exit 2; bad input leaves the out
directory untouched.
"""

from __future__ import annotations

import typer

from nanobench.common import capture_sizes_option, choice, finish, int_list, positive
from nanobench.console import run_command, stdout_console
from nanobench.errors import BadInput

DEFAULT_WIDTH_MULTIPLE = 128
DEFAULT_MULTIPLES = "128,512,2048,8192"
CSV_NAME = "buckets.csv"
PNG_NAME = "bucketed-decode-shape.png"


def buckets(
    rows: int = typer.Option(3, help="Rows in the decode batch (real sequences)."),
    max_batch: int = typer.Option(8, help="Rows in the cache (the row ladder's top)."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row before the first step."),
    steps: str = typer.Option("8,64,128,512", help="Comma-separated run lengths (decode steps)."),
    width_multiple: int | None = typer.Option(
        None,
        help=f"Width bucket multiple (default {DEFAULT_WIDTH_MULTIPLE}). Given without "
        "--multiples: print the one-screen answer for it.",
        show_default=False,
    ),
    max_model_len: int | None = typer.Option(
        None,
        help="Tokens per row in the cache (default: prompt + steps of each run).",
        show_default=False,
    ),
    block_size: int = typer.Option(16, help="Tokens per KV block."),
    capture_rows: int = typer.Option(256, help="Rows of the serving config table 2 prices."),
    capture_tokens: int = typer.Option(8192, help="Tokens per row of that serving config."),
    capture_sizes: str | None = typer.Option(
        None,
        help="Table 2's row axis: a comma-separated list (1,2,4,8,16,24,32), or a server's "
        "default for --max-batch sequences: vllm | sglang (replaces --capture-rows).",
        show_default=False,
    ),
    multiples: str | None = typer.Option(
        None,
        help=f"Comma-separated width multiples for table 2 (default {DEFAULT_MULTIPLES}).",
        show_default=False,
    ),
    kernel: str = typer.Option(
        "reference", help="reference (width is a tensor axis) | triton (width-free)."
    ),
    heads: int = typer.Option(32, help="Query heads, for the score-rectangle workspace."),
    max_shapes: int = typer.Option(64, help="Capture budget: most shapes a list may hold."),
    max_waste: float = typer.Option(
        0.6, help="Largest share of bucketed cells that may be padding."
    ),
    out: str = typer.Option("nanobench-out", help="Directory for buckets.csv and the diagram."),
    json_mode: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables."
    ),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a gate fails."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress on stderr."),
) -> None:
    """Price a closed decode shape set on the host: shapes, padding and plan time per run, and
    the capture list per width multiple for the reference and the Triton kernel.

    Example: nanobench buckets --width-multiple 2048
    """
    with run_command(quiet) as status:
        for name, value in (
            ("--rows", rows),
            ("--max-batch", max_batch),
            ("--prompt-len", prompt_len),
            ("--block-size", block_size),
            ("--capture-rows", capture_rows),
            ("--capture-tokens", capture_tokens),
            ("--heads", heads),
            ("--max-shapes", max_shapes),
        ):
            positive(name, value)
        run_steps = int_list("--steps", steps)
        if width_multiple is not None:
            positive("--width-multiple", width_multiple)
        table_multiples = int_list("--multiples", multiples or DEFAULT_MULTIPLES)
        choice("--kernel", kernel, ("reference", "triton"))
        if not 0.0 <= max_waste <= 1.0:
            raise BadInput(f"--max-waste {max_waste}: expected a share between 0 and 1")
        if rows > max_batch:
            raise BadInput(
                f"--rows {rows}: above --max-batch {max_batch}; the cache has no row for it"
            )
        if max_model_len is not None:
            positive("--max-model-len", max_model_len)
            longest = prompt_len + max(run_steps)
            if longest > max_model_len:
                raise BadInput(
                    f"--max-model-len {max_model_len}: a run grows to {longest} tokens "
                    f"(--prompt-len {prompt_len} + --steps {max(run_steps)})"
                )
        sizes = capture_sizes_option(capture_sizes, max_batch)
        if sizes is not None and rows > sizes[-1]:
            raise BadInput(
                f"--rows {rows}: above the largest --capture-sizes size {sizes[-1]}; the typical "
                "run must fit the capture list"
            )
        if sizes is None and rows > capture_rows:
            raise BadInput(
                f"--rows {rows}: above --capture-rows {capture_rows}; the typical run must fit "
                "the serving config"
            )
        if prompt_len >= capture_tokens:
            raise BadInput(
                f"--prompt-len {prompt_len}: leaves no decode step inside --capture-tokens "
                f"{capture_tokens}"
            )
        # Given alone means the user asked one question about one multiple.
        short = width_multiple is not None and multiples is None

        from nanobench.buckets_bench import BucketsSpec, gates, measure
        from nanobench.common import out_dir

        directory = out_dir(out)
        spec = BucketsSpec(
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            steps=tuple(run_steps),
            width_multiple=width_multiple or DEFAULT_WIDTH_MULTIPLE,
            max_model_len=max_model_len,
            block_size=block_size,
            capture_rows=capture_rows,
            capture_tokens=capture_tokens,
            multiples=tuple(table_multiples),
            kernel=kernel,
            heads=heads,
            max_shapes=max_shapes,
            max_waste=max_waste,
            capture_sizes=sizes,
        )
        result = measure(spec, status)
        found = gates(result)

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
        keys = list(dict.fromkeys(k for r in result.rows for k in r))
        csv_rows = [{k: r.get(k, "") for k in keys} for r in result.rows]
        csv_path = write_rows(directory / CSV_NAME, csv_rows, BUCKETS_COLUMNS)
        fig = draw_buckets(
            result.runs,
            result.capture,
            [asdict(t) for t in result.traces],
            max_shapes,
            max_waste,
        )
        png_path = save_buckets_figure(fig, directory / PNG_NAME)
        outputs = {"csv": str(csv_path), "png": str(png_path)}

        def render() -> None:
            console = stdout_console()
            if short:
                render_short_answer(
                    console, result.chosen, found, outputs, kernel=kernel, max_shapes=max_shapes
                )
            else:
                render_buckets(
                    console,
                    result.runs,
                    result.capture,
                    found,
                    outputs,
                    kernel=kernel,
                    max_shapes=max_shapes,
                    explicit_len=max_model_len is not None,
                )
                if sizes is not None:
                    from reports.capture_sizes import capture_sizes_table

                    console.print(capture_sizes_table(result.chosen))

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
