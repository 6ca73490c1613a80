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
    device_memory_bytes,
    device_option,
    dtype_option,
    out_dir,
)
from nanobench.harness.console import run_command
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
        # Heavy on purpose: the tracer and the engine load when the command runs.
        from nanobench.pool_budget.run import run_budget

        code = run_budget(spec, out_dir(out), status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


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
