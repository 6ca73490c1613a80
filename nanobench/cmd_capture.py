"""`nanobench capture` (alias `capturebench`): record once per shape, replay after; pool table."""

from __future__ import annotations

import os

import typer

from engine.config import KERNELS
from nanobench.common import (
    capture_sizes_option,
    choice,
    device_option,
    dtype_option,
    finish,
    fits_option,
    int_list,
    model_option,
    out_dir,
    positive,
)
from nanobench.console import run_command, stdout_console
from nanobench.errors import BadInput
from nanobench.options import CaptureSizes


def capture(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    rows: int = typer.Option(2, help="Rows in the decode batch (the engine's max batch)."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row."),
    steps: str = typer.Option("8,32,64,128", help="Comma-separated run lengths (decode steps)."),
    width_multiple: int = typer.Option(128, help="Width bucket multiple of the run's engine."),
    up_front: bool = typer.Option(
        False, "--up-front/--lazy", help="Record the whole list before the run, or on first sight."
    ),
    kernel: str = typer.Option("reference", help="reference | triton (attention read)."),
    device: str = typer.Option("cpu", help="cpu | cuda."),
    dtype: str = typer.Option(
        "auto",
        help="auto (the checkpoint's dtype on CUDA, float32 on CPU) | float32 | bfloat16 | float16.",
    ),
    capture_rows: int = typer.Option(256, help="Rows at the top of the priced capture list."),
    capture_tokens: int = typer.Option(8192, help="Tokens (max_model_len) of the priced list."),
    multiples: str = typer.Option("128,512,2048,8192", help="Width multiples for the pool table."),
    capture_sizes: CaptureSizes = None,
    heads: int = typer.Option(0, help="Query heads for the pool table (default: the model's)."),
    out: str = typer.Option("nanobench-out", help="Directory for capture.csv and the diagram."),
    json_mode: bool = typer.Option(False, "--json", help="Print one JSON document instead."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a gate fails."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress on stderr."),
) -> None:
    """Record the decode step once per shape and replay it: counts, run time, logits, pools.

    Example: nanobench capture --steps 8,32,64,128 --width-multiple 128 --up-front
    """
    with run_command(quiet) as status:
        dtype = dtype_option(dtype, model, device)
        directory, config = model_option(model)
        fits_option(config, dtype, device)
        positive("--rows", rows)
        positive("--prompt-len", prompt_len)
        run_lengths = int_list("--steps", steps)
        positive("--width-multiple", width_multiple)
        choice("--kernel", kernel, KERNELS)
        device_option(device)
        positive("--capture-rows", capture_rows)
        positive("--capture-tokens", capture_tokens)
        widths = int_list("--multiples", multiples)
        sizes = capture_sizes_option(capture_sizes, capture_rows)
        pool_heads = config.num_heads if heads == 0 else positive("--heads", heads)
        target = out_dir(out)
        if kernel == "triton" and device == "cpu":
            # Without a device the Triton kernel runs under its interpreter; set before any build.
            os.environ.setdefault("TRITON_INTERPRET", "1")

        from engine.config import ConfigError
        from engine.sources import load_model
        from kernels.reference import KernelInputError
        from nanobench.capture_bench import (
            held_rows,
            measure_pools,
            pool_rows,
            run_rows,
            with_measured,
        )
        from nanobench.capture_memory import with_heads
        from nanobench.capture_workspace import with_traced, workspace_rows
        from reports.capture import plot_capture, render_capture, write_capture_csv

        try:
            with_heads(config, pool_heads)
        except ConfigError as e:
            raise BadInput(f"--heads {pool_heads}: {e}") from None
        status(f"loading {directory}")
        _, tensors = load_model(directory)  # a GGUF too
        try:
            runs, gates, shapes = run_rows(
                config,
                tensors,
                rows=rows,
                prompt_len=prompt_len,
                steps=run_lengths,
                width_multiple=width_multiple,
                up_front=up_front,
                kernel=kernel,
                device=device,
                dtype=dtype,
                status=status,
            )
        except KernelInputError as e:
            # The model's shapes are outside what the chosen kernel takes (e.g. Triton's head_dim).
            raise BadInput(f"--kernel {kernel} with --model {model}: {e}") from None
        pools = pool_rows(pool_heads, capture_rows, capture_tokens, widths, sizes)
        status("tracing the decode forward's memory under fake tensors")
        pools = with_traced(pools, config, dtype)
        workspace = workspace_rows(config, pool_heads, capture_rows, capture_tokens, dtype, sizes)
        if device == "cuda":
            measured = measure_pools(config, capture_rows, capture_tokens, widths, dtype, status)
            pools = with_measured(pools, measured)
        held = held_rows(pool_heads, capture_rows, capture_tokens)
        rows_out = runs + pools + workspace + held
        notes = up_front_notes(runs)
        csv_path = write_capture_csv(target / "capture.csv", rows_out)
        png_path = plot_capture(target / "captured-decode-replay.png", rows_out)
        outputs = {"csv": str(csv_path), "png": str(png_path)}
        if shapes:
            outputs["shapes"] = shapes
        code = finish(
            "capture",
            rows_out,
            gates,
            outputs,
            json_mode=json_mode,
            check=check,
            render=lambda: render_capture(stdout_console(), rows_out, gates, notes),
            failed=any(r["status"] != "ok" for r in runs),
        )
    raise typer.Exit(code)


def up_front_notes(runs: list[dict]) -> list[str]:
    """vLLM's line for each up-front walk: "Graph capturing finished in X secs, took Y GiB"."""
    notes = []
    for r in runs:
        if r["mode"] != "up-front":
            continue
        took = r["capture_pool_bytes"]
        size = "n/a on cpu" if took is None else f"{took / 2**30:.2f} GiB"
        notes.append(
            f"{r['steps']} steps: graph capturing finished in {r['capture_s']:.3f} secs "
            f"({r['captured_up_front']} shapes, largest first, one pool), took {size}"
        )
    return notes
