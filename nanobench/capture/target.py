"""`nanobench capture --target SPEC`: the capture memory of the user's own step, per size.

What it is: `capture_target`, the `--target` branch of `capture`: the capture list (the
`--capture-sizes` list, or the row ladder up to `--capture-rows`) priced on the meta device by
`nanobench.memory.target_memory` at `prompt_len = --capture-tokens - 1` and one step, written as
`capture-target.csv` (a `TargetSizeRow` per size, then one `TargetPoolRow`) and a table. Nothing
is recorded or timed: a graph of the user's step is recorded on CUDA by `make gpu-check`.
What it is not: the fit against a device (`pool-budget --target` adds that).
Invariant: the pool row is the combination of the size rows above it (max, sum, sum or max).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.buckets import DecodeBuckets
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.memory.target_memory import list_memory
from nanobench.pool_budget.budget import TargetSizeRow, target_rows
from reports.csvio import write_rows
from reports.pool_budget import render_target_sizes


@dataclass(frozen=True)
class TargetPoolRow:
    """A --target's capture list combined as captured: shared pool, private pools, outputs."""

    table: str  # "pool"
    target: str
    capture_sizes: list[int]
    state_bytes: int  # at the largest size
    shared_pool_bytes: int
    private_pools_bytes: int
    outputs_bytes: int
    shared_output: bool
    capture_bytes: int  # shared pool + outputs: what the recorded list holds beside its state
    shared_pool_reserved_bytes: int
    private_pools_reserved_bytes: int
    dtype: str


def capture_target(spec, target: str, directory, status, *, json_mode: bool, check: bool) -> int:
    """Price `target` over the capture list of a `CaptureSpec`; returns the exit code."""
    ladder = DecodeBuckets(spec.capture_rows, spec.capture_tokens, spec.capture_tokens, True).rows
    sizes = tuple(spec.sizes or ladder)
    status(f"pricing {target} at {len(sizes)} capture sizes on the meta device")
    memory = list_memory(
        target,
        sizes,
        prompt_len=spec.capture_tokens - 1,
        steps=1,
        dtype=spec.dtype,
        model=spec.model,
        as_device=spec.device,
        length_option=f"--capture-tokens {spec.capture_tokens}",
    )
    per_size, fit = target_rows(target, memory, device_bytes=0, utilization=1.0, dtype=spec.dtype)
    pool = TargetPoolRow(
        table="pool",
        target=target,
        capture_sizes=fit.capture_sizes,
        state_bytes=fit.state_bytes,
        shared_pool_bytes=fit.shared_pool_bytes,
        private_pools_bytes=fit.private_pools_bytes,
        outputs_bytes=fit.outputs_bytes,
        shared_output=fit.shared_output,
        capture_bytes=fit.shared_pool_bytes + fit.outputs_bytes,
        shared_pool_reserved_bytes=fit.shared_pool_reserved_bytes,
        private_pools_reserved_bytes=fit.private_pools_reserved_bytes,
        dtype=spec.dtype,
    )
    rows = [*per_size, pool]
    keys = list(dict.fromkeys([*columns(TargetSizeRow), *columns(TargetPoolRow)]))
    csv_path = write_rows(directory / "capture-target.csv", as_dicts(rows), keys)
    return finish(
        "capture",
        as_dicts(rows),
        [],
        {"csv": str(csv_path)},
        json_mode=json_mode,
        check=check,
        render=lambda: render_target_sizes(stdout_console(), per_size, pool),
    )
