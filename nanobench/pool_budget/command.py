"""`nanobench pool-budget`: does the capture list fit beside the weights and the KV pool?

What it is: the command, its spec (`PoolBudgetSpec`: every option's default and the
cross-option rules) and its gates: one `check_pool_budget` per priced list.
What it is not: the arithmetic (`nanobench.pool_budget.budget`, from a `ModelConfig` alone, no
weights) or the table and diagram (`reports.pool_budget`).
Invariant: bad input (a size that parses to nothing, a share outside (0, 1]) is one line and
exit 2 before anything is written; a list that does not fit, even when none fits at all, is a
row with its shortfall and a failed gate: exit 1 under --check, 0 without.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import typer

from nanobench.harness.common import (
    Gate,
    capture_sizes_option,
    config_option,
    device_option,
    dtype_option,
    finish,
    out_dir,
)
from nanobench.harness.console import run_command, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.options import (
    BlockSize,
    CaptureOutput,
    CaptureSizes,
    CheckOpt,
    Device,
    DeviceMemory,
    Dtype,
    Ints,
    JsonOpt,
    Kernels,
    MaxBatch,
    MaxModelLen,
    MemoryUtilization,
    Model,
    Names,
    Out,
    QuietOpt,
    Target,
    WidthMultiples,
)

OUT = "nanobench-out"


@dataclass(frozen=True)
class PoolBudgetSpec:
    """One pool-budget invocation: the command's option defaults live here."""

    model: str = "tiny"
    device_memory: str = "80GiB"
    gpu_memory_utilization: float = 0.9
    max_batch: int = 256
    capture_sizes: str | None = None
    max_model_len: int = 8192
    block_size: int = 16
    width_multiples: tuple[int, ...] = Ints((2048,))
    kernels: tuple[str, ...] = Names(("reference", "triton"))
    capture_output: str = "shared"
    dtype: str = "auto"
    device: str = "cpu"
    # module:factory or file.py:factory: the user's own step, priced per capture size.
    target: str = ""
    # Resolved by validate(): the list's rows, the device's bytes, the concrete dtype.
    sizes: tuple[int, ...] | None = None
    device_bytes: int = 0

    def validate(self) -> PoolBudgetSpec:
        """Cross-option rules; returns the spec with sizes, device bytes and dtype resolved."""
        if self.gpu_memory_utilization <= 0.0:
            raise BadInput(
                f"--gpu-memory-utilization {self.gpu_memory_utilization}: expected a share in (0, 1]"
            )
        if self.max_model_len < 1:
            raise BadInput(f"--max-model-len {self.max_model_len}: expected a positive integer")
        device_option(self.device)
        if self.target:
            from nanobench.harness.targets import target_option

            target_option(self.target)
        return replace(
            self,
            dtype=dtype_option(self.dtype, self.model, self.device),
            sizes=capture_sizes_option(self.capture_sizes, self.max_batch),
            device_bytes=device_memory_bytes(self.device_memory, self.device),
        )

    @property
    def budget(self) -> dict:
        """The keyword arguments `budget_row` and `smallest_fitting` price a list against."""
        return {
            "device_bytes": self.device_bytes,
            "utilization": self.gpu_memory_utilization,
            "max_batch": self.max_batch,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "dtype": self.dtype,
            "capture_sizes": self.sizes,
            "capture_output": self.capture_output,
        }


def pool_budget(
    model: Model = PoolBudgetSpec.model,
    device_memory: DeviceMemory = PoolBudgetSpec.device_memory,
    gpu_memory_utilization: MemoryUtilization = PoolBudgetSpec.gpu_memory_utilization,
    max_batch: MaxBatch = PoolBudgetSpec.max_batch,
    capture_sizes: CaptureSizes = PoolBudgetSpec.capture_sizes,
    max_model_len: MaxModelLen = PoolBudgetSpec.max_model_len,
    block_size: BlockSize = PoolBudgetSpec.block_size,
    width_multiples: WidthMultiples = PoolBudgetSpec.width_multiples,
    kernels: Kernels = PoolBudgetSpec.kernels,
    capture_output: CaptureOutput = PoolBudgetSpec.capture_output,
    dtype: Dtype = PoolBudgetSpec.dtype,
    device: Device = PoolBudgetSpec.device,
    target: Target = PoolBudgetSpec.target,
    out: Out = OUT,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Price the capture list against a device: weights, capture pool, KV blocks left.

    Example: nanobench pool-budget --model llama-3.2-1b --device-memory 24GiB

    Example: nanobench pool-budget --kernels reference --width-multiples 128,2048 --check

    Example: nanobench pool-budget --capture-sizes vllm --max-batch 64 --kernels triton

    Example: nanobench pool-budget --capture-output per-graph --width-multiples 128,2048

    Example: nanobench pool-budget --target my_step.py:factory --capture-sizes 1,8,64,256
    """
    with run_command(quiet) as status:
        spec = PoolBudgetSpec(
            model=model,
            device_memory=device_memory,
            gpu_memory_utilization=gpu_memory_utilization,
            max_batch=max_batch,
            capture_sizes=capture_sizes,
            max_model_len=max_model_len,
            block_size=block_size,
            width_multiples=tuple(width_multiples),
            kernels=tuple(kernels),
            capture_output=capture_output,
            dtype=dtype,
            device=device,
            target=target,
        ).validate()
        if spec.target:
            raise typer.Exit(target_budget(spec, out_dir(out), status, json_mode, check))
        config = config_option(spec.model)
        target = out_dir(out)

        from nanobench.harness.rows import as_dicts, columns
        from nanobench.pool_budget.budget import BudgetRow
        from reports.csvio import write_rows
        from reports.pool_budget import plot_pool_budget, render_pool_budget

        status("pricing the capture lists")
        rows, notes = [], []
        for k in spec.kernels:
            priced, note = price_kernel(config, spec, k)
            rows += priced
            notes += [note] if note else []
        found = gates(spec, rows)
        csv_path = write_rows(target / "pool-budget.csv", as_dicts(rows), columns(BudgetRow))
        png_path = plot_pool_budget(target / "pool-budget.png", rows, model=spec.model)
        code = finish(
            "pool-budget",
            as_dicts(rows),
            found,
            {"csv": str(csv_path), "png": str(png_path)},
            json_mode=json_mode,
            check=check,
            render=lambda: render_pool_budget(stdout_console(), rows, found, notes),
        )
    raise typer.Exit(code)


def target_budget(spec: PoolBudgetSpec, directory, status, json_mode: bool, check: bool) -> int:
    """--target: the user's step priced per capture size on the meta device, then the fit.

    Each size builds the target at that many rows with prompt_len = max_model_len - 1 and one
    step, and prices step 0: the last position of a full context, the widest step it takes.
    """
    from engine.buckets import DecodeBuckets
    from nanobench.harness.rows import as_dicts, columns
    from nanobench.memory.target_memory import list_memory
    from nanobench.pool_budget.budget import TargetFitRow, TargetSizeRow, target_rows
    from reports.csvio import write_rows
    from reports.pool_budget import plot_target_budget, render_target_budget

    ladder = DecodeBuckets(spec.max_batch, spec.max_model_len, spec.max_model_len, True).rows
    sizes = spec.sizes or ladder
    status(f"pricing {spec.target} at {len(sizes)} capture sizes on the meta device")
    memory = list_memory(
        spec.target,
        tuple(sizes),
        prompt_len=spec.max_model_len - 1,
        steps=1,
        dtype=spec.dtype,
        model=spec.model,
        as_device=spec.device,
    )
    per_size, fit = target_rows(
        spec.target,
        memory,
        device_bytes=spec.device_bytes,
        utilization=spec.gpu_memory_utilization,
        dtype=spec.dtype,
    )
    found = [Gate("check_pool_budget[target]", fit.fits, target_fit_detail(fit))]
    rows = [*per_size, fit]
    keys = list(dict.fromkeys([*columns(TargetSizeRow), *columns(TargetFitRow)]))
    csv_path = write_rows(directory / "pool-budget.csv", as_dicts(rows), keys)
    png_path = plot_target_budget(directory / "pool-budget.png", per_size, fit)
    return finish(
        "pool-budget",
        as_dicts(rows),
        found,
        {"csv": str(csv_path), "png": str(png_path)},
        json_mode=json_mode,
        check=check,
        render=lambda: render_target_budget(stdout_console(), per_size, fit, found),
    )


def target_fit_detail(fit) -> str:
    """The fit gate's line: every byte figure through the one formatter."""
    from reports.style import binary_bytes

    need = (
        f"state {binary_bytes(fit.state_bytes)} + shared pool "
        f"{binary_bytes(fit.shared_pool_bytes)} + outputs {binary_bytes(fit.outputs_bytes)} = "
        f"{binary_bytes(fit.need_bytes)} against {binary_bytes(fit.device_bytes)} x "
        f"{fit.utilization:g} = {binary_bytes(fit.usable_bytes)}"
    )
    if fit.fits:
        return f"{need}: fits"
    largest = ",".join(map(str, fit.largest_fitting_sizes)) or "none"
    return (
        f"{need}: short by {binary_bytes(fit.shortfall_bytes)}; the largest list that fits is "
        f"{largest}"
    )


def price_kernel(config, spec: PoolBudgetSpec, kernel: str) -> tuple[list, str | None]:
    """One kernel's rows (each requested width multiple, or the one Triton list) and its note.

    When no list fits at all the rows still come back, each with its shortfall: not fitting
    is the answer to the question asked, so it is a failed gate, never bad input.
    """
    from nanobench.pool_budget.budget import budget_row, smallest_fitting
    from reports.style import binary_bytes

    best = smallest_fitting(config, kernel, **spec.budget)
    multiples = spec.width_multiples if kernel == "reference" else spec.width_multiples[:1]
    rows = [
        replace(
            budget_row(config, kernel=kernel, width_multiple=multiple, **spec.budget),
            smallest_fitting_width_multiple=None if best is None else best.width_multiple,
            largest_fitting_shapes=None if best is None else best.shapes,
        )
        for multiple in multiples
    ]
    if best is None:
        coarsest = budget_row(
            config, kernel=kernel, width_multiple=spec.max_model_len, **spec.budget
        )
        return rows, (
            f"{kernel}: no capture list fits {spec.device_memory} x "
            f"{spec.gpu_memory_utilization:g}, not even the coarsest ({coarsest.shapes:,} "
            f"shapes): short by {binary_bytes(coarsest.shortfall_bytes)}"
        )
    if kernel == "reference" and spec.capture_output == "shared":
        finest = min(rows, key=lambda r: r.width_multiple)
        return rows, (
            "reference: with one shared logits buffer the pool is sized by the largest "
            "shape, not by the list: every width multiple needs the same "
            f"{binary_bytes(best.capture_pool_bytes)} (each graph keeping its own logits "
            f"would need {binary_bytes(finest.capture_pool_per_graph_bytes)} at width "
            f"multiple {finest.width_multiple}: --capture-output per-graph)"
        )
    if kernel == "reference":
        return rows, (
            f"reference: the largest list that fits is width multiple "
            f"{best.width_multiple} ({best.shapes:,} shapes, "
            f"{best.kv_tokens:,} KV tokens left)"
        )
    return rows, None


def gates(spec: PoolBudgetSpec, rows) -> list[Gate]:
    """One check_pool_budget per priced list: it fits when the KV pool left holds a sequence."""
    return [
        Gate(
            f"check_pool_budget[{r.kernel}"
            + (f",{r.width_multiple}]" if r.kernel == "reference" else "]"),
            r.fits,
            r.fits_detail,
        )
        for r in rows
    ]


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
