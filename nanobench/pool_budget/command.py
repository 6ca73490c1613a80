"""`nanobench pool-budget`: does the capture list fit beside the weights and the KV pool?

What it is: the command: its options (each defaulting to `PoolBudgetSpec`'s,
`pool_budget/spec.py`), validated and handed to `pool_budget/run.py`; its gates
(`pool_budget/gates.py`) are one `check_pool_budget` per priced list. Each list's row
also prices the seconds recording it adds to a start (`--record-s-per-graph`, or the model of
`--device` the row names).
What it is not: the arithmetic (`nanobench.pool_budget.budget`, from a `ModelConfig` alone, no
weights) or the table and diagram (`reports.pool_budget`).
Invariant: bad input (a size that parses to nothing, a share outside (0, 1]) is one line and
exit 2 before anything is written; a list that does not fit, even when none fits at all, is a
row with its shortfall and a failed gate: exit 1 under --check, 0 without.
"""

from __future__ import annotations

import typer

from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.options import (
    BlockSize,
    CaptureOutput,
    CaptureSizes,
    CheckOpt,
    Device,
    DeviceMemory,
    Dtype,
    JsonOpt,
    Kernels,
    MaxBatch,
    MaxModelLen,
    MemoryUtilization,
    Model,
    Out,
    QuietOpt,
    RecordSPerGraph,
    Target,
    WidthMultiples,
)
from nanobench.harness.cli.registry import COUNTED, Command
from nanobench.harness.cli.validate import out_dir, out_dir_tried, step_named
from nanobench.pool_budget.spec import OUT, PoolBudgetSpec


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
    record_s_per_graph: RecordSPerGraph = PoolBudgetSpec.record_s_per_graph,
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

    Example: nanobench pool-budget --width-multiples 128,2048 --record-s-per-graph 0.4
    """
    with run_command(quiet) as status:
        # The names first, with nothing imported: a built-in target's check loads torch.
        step_named(model, target)
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
            record_s_per_graph=record_s_per_graph,
        ).validate()
        out_dir_tried(out)
        # Heavy on purpose: the tracer and the engine load when the command runs.
        from nanobench.pool_budget.run import run_budget

        code = run_budget(spec, out_dir(out), status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


COMMAND = Command("pool-budget", pool_budget, doc="docs/memory.md", sweep=COUNTED)
