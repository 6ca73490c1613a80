"""One `nanobench pool-budget` run: the engine's capture lists priced per kernel, or a target's.

What it is: `run_budget(spec, out, ...)`: per kernel, each requested list's budget row (and the
largest list that fits, with its note), or with `--target` the user's step priced per capture
size on the meta device and its fit; the CSV, the diagram, the table and the exit code.
What it is not: the spec (`command.py`) or the arithmetic (`budget.py`, `nanobench.memory`).
Invariant: a list that does not fit is a row with its shortfall and a failed gate, never bad
input; every byte figure in a message goes through `reports.style.binary_bytes`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.buckets import DecodeBuckets
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import config_option
from nanobench.harness.runs.gates import Gate
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.memory.target_memory import list_memory
from nanobench.pool_budget.budget import (
    BudgetRow,
    TargetFitRow,
    TargetSizeRow,
    budget_row,
    smallest_fitting,
    target_rows,
)
from nanobench.pool_budget.gates import gates
from nanobench.pool_budget.spec import PoolBudgetSpec
from reports.csvio import write_rows
from reports.pool_budget import (
    plot_pool_budget,
    plot_target_budget,
    render_pool_budget,
    render_target_budget,
)
from reports.style import binary_bytes


def run_budget(spec: PoolBudgetSpec, target: Path, status, *, json_mode: bool, check: bool) -> int:
    """The engine's lists per kernel (or a --target's sizes), written and reported."""
    if spec.target:
        return target_budget(spec, target, status, json_mode, check)
    config = config_option(spec.model)
    status("pricing the capture lists")
    rows, notes = [], []
    for k in spec.kernels:
        priced, note = price_kernel(config, spec, k)
        rows += priced
        notes += [note] if note else []
    found = gates(spec, rows)
    csv_path = write_rows(target / "pool-budget.csv", as_dicts(rows), columns(BudgetRow))
    png_path = plot_pool_budget(target / "pool-budget.png", rows, model=spec.model)
    return finish(
        "pool-budget",
        as_dicts(rows),
        found,
        {"csv": str(csv_path), "png": str(png_path)},
        json_mode=json_mode,
        check=check,
        render=lambda: render_pool_budget(stdout_console(), rows, found, notes),
    )


def target_budget(spec: PoolBudgetSpec, directory, status, json_mode: bool, check: bool) -> int:
    """--target: the user's step priced per capture size on the meta device, then the fit.

    Each size builds the target at that many rows with prompt_len = max_model_len - 1 and one
    step, and prices step 0: the last position of a full context, the widest step it takes.
    """
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
        length_option=f"--max-model-len {spec.max_model_len}",
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
