"""`nanobench pool-budget`'s spec: every option's default and the rules across options.

What it is: `PoolBudgetSpec` (frozen; `validate()` resolves the dtype, the list and the device's
bytes; `budget`, the keyword arguments a list is priced with) and the output directory's default.
What it is not: the command (`command.py`) or the pricing (`run.py`, `budget.py`).
Invariant: a spec that validated prices without another check; a bad one is `BadInput`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.harness.cli.options import (
    Ints,
    Names,
)
from nanobench.harness.cli.validate import (
    capture_sizes_option,
    device_memory_bytes,
    device_option,
    dtype_option,
    record_s_option,
)
from nanobench.harness.errors import BadInput

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
    # Seconds to record one graph, measured; None: the model of --device (`cost.capture`).
    record_s_per_graph: float | None = None
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
        record_s_option(self.record_s_per_graph)
        if self.target:
            from nanobench.harness.step.targets import target_option

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
            "measured_record_s": self.record_s_per_graph,
            "device": self.device,
        }
