"""`nanobench pool-budget`: does the capture list fit beside the weights and the KV pool?"""

from __future__ import annotations

import typer

from engine.config import KERNELS
from nanobench.common import (
    Gate,
    capture_sizes_option,
    choice_list,
    config_option,
    device_option,
    dtype_option,
    finish,
    int_list,
    out_dir,
    positive,
)
from nanobench.console import run_command, stdout_console
from nanobench.errors import BadInput


def pool_budget(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    device_memory: str = typer.Option(
        "80GiB", help="Device bytes (80GiB, 24GB, ...) or 'probe' (free memory, CUDA only)."
    ),
    gpu_memory_utilization: float = typer.Option(
        0.9, help="Share of the device the engine may use."
    ),
    max_batch: int = typer.Option(256, help="Rows at the top of the capture list."),
    capture_sizes: str | None = typer.Option(
        None,
        help="The capture list's rows: a comma-separated list, or vllm | sglang (that server's "
        "default for --max-batch sequences). Default: powers of two up to --max-batch.",
        show_default=False,
    ),
    max_model_len: int = typer.Option(8192, help="Tokens per row (slot table width)."),
    block_size: int = typer.Option(16, help="Tokens per KV block."),
    width_multiple: str = typer.Option("2048", help="Width multiple(s), comma-separated."),
    kernel: str = typer.Option(
        "reference,triton", help="reference and/or triton, comma-separated."
    ),
    dtype: str = typer.Option(
        "auto",
        help="auto (the checkpoint's dtype on CUDA, float32 on CPU) | float32 | bfloat16 | float16.",
    ),
    device: str = typer.Option("cpu", help="cpu | cuda (probe reads the CUDA device)."),
    out: str = typer.Option("nanobench-out", help="Directory for pool-budget.csv and the diagram."),
    json_mode: bool = typer.Option(False, "--json", help="Print one JSON document instead."),
    check: bool = typer.Option(False, "--check", help="Exit 1 when a requested list does not fit."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress on stderr."),
) -> None:
    """Price the capture list against a device: weights, capture pool, KV blocks left.

    Example: nanobench pool-budget --model llama-3.2-1b --device-memory 24GiB
    """
    with run_command(quiet) as status:
        dtype = dtype_option(dtype, model, device)
        config = config_option(model)
        positive("--max-batch", max_batch)
        sizes = capture_sizes_option(capture_sizes, max_batch)
        positive("--max-model-len", max_model_len)
        positive("--block-size", block_size)
        multiples = int_list("--width-multiple", width_multiple)
        kernels = choice_list("--kernel", kernel, KERNELS)
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise BadInput(
                f"--gpu-memory-utilization {gpu_memory_utilization}: expected a share in (0, 1]"
            )
        device_option(device)
        device_bytes = device_memory_bytes(device_memory, device)
        target = out_dir(out)

        from nanobench.pool_budget import budget_row, smallest_fitting
        from reports.pool_budget import (
            plot_pool_budget,
            render_pool_budget,
            write_pool_budget_csv,
        )

        status("pricing the capture lists")
        budget = {
            "device_bytes": device_bytes,
            "utilization": gpu_memory_utilization,
            "max_batch": max_batch,
            "max_model_len": max_model_len,
            "block_size": block_size,
            "dtype": dtype,
            "capture_sizes": sizes,
        }
        rows, gates, notes = [], [], []
        for k in kernels:
            best = smallest_fitting(config, k, **budget)
            if best is None:
                coarsest = budget_row(config, kernel=k, width_multiple=max_model_len, **budget)
                raise BadInput(
                    f"--device-memory {device_memory}: no {k} capture list fits, not even the "
                    f"coarsest ({coarsest['shapes']} shapes): {coarsest['fits_detail']}"
                )
            for multiple in multiples if k == "reference" else multiples[:1]:
                row = budget_row(config, kernel=k, width_multiple=multiple, **budget)
                row["smallest_fitting_width_multiple"] = best["width_multiple"]
                row["largest_fitting_shapes"] = best["shapes"]
                rows.append(row)
                name = f"check_pool_budget[{k}" + (f",{multiple}]" if k == "reference" else "]")
                gates.append(Gate(name, row["fits"], row["fits_detail"]))
            if k == "reference":
                notes.append(
                    f"reference: the largest list that fits is width multiple "
                    f"{best['width_multiple']} ({best['shapes']:,} shapes, "
                    f"{best['kv_tokens']:,} KV tokens left)"
                )
        csv_path = write_pool_budget_csv(target / "pool-budget.csv", rows)
        png_path = plot_pool_budget(target / "pool-budget.png", rows)
        code = finish(
            "pool-budget",
            rows,
            gates,
            {"csv": str(csv_path), "png": str(png_path)},
            json_mode=json_mode,
            check=check,
            render=lambda: render_pool_budget(stdout_console(), rows, gates, notes),
        )
    raise typer.Exit(code)


def device_memory_bytes(text: str, device: str) -> int:
    """A size, or with 'probe' the free memory of the current CUDA device."""
    if text.strip().lower() == "probe":
        if device != "cuda":
            raise BadInput(
                "--device-memory probe: reads free memory on a CUDA device; pass --device cuda "
                "on a machine with one, or give a size like 80GiB"
            )
        import torch

        return int(torch.cuda.mem_get_info()[0])
    from nanobench.cost.pool import parse_bytes

    try:
        value = parse_bytes(text)
    except ValueError as e:
        raise BadInput(f"--device-memory: {e}") from None
    if value < 1:
        raise BadInput(f"--device-memory {text!r}: expected a positive size")
    return value
