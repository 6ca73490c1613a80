"""One `nanobench capture` run on the engine: record, replay and time; price the pools; report.

What it is: `run_capture(spec, status, ...)`, the command's work once its spec validated: load
the model, drive and time each run length (`bench.run_rows`, under `--threads`, every timed step
written to `capture-samples.csv` as it comes), price the capture list's pools (`pools`,
`workspace`), then the CSV, the diagram, the table and the exit code.
What it is not: the command's options or spec (`command.py`), a `--target`'s pricing
(`target.py`) or the tables themselves (`reports.capture`).
Invariant: every timed step is on disk before the next window; a kernel that cannot take the
model's shapes is bad input (exit 2), not a failed run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

from engine.config import ConfigError, ModelConfig
from engine.sources import load_model
from kernels.reference import KernelInputError
from nanobench.capture.bench import run_rows
from nanobench.capture.gates import gates, record_notes, up_front_notes
from nanobench.capture.pools import held_rows, measure_pools, pool_rows, with_measured
from nanobench.capture.rows import capture_columns
from nanobench.capture.spec import CaptureSpec
from nanobench.capture.timing import SAMPLE_HEADER, ratio_notes
from nanobench.capture.workspace import with_traced, workspace_rows
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import fits_option, model_option, out_dir
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.env_record import collect_env, write_env
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts
from nanobench.harness.runs.samples import sample_rows
from nanobench.harness.workers.threads import threads_applied
from nanobench.memory.decode_workspace import with_heads
from reports.capture import plot_capture, render_capture, write_capture_csv
from reports.csvio import write_rows
from reports.style import title


def run_capture(spec: CaptureSpec, status, *, json_mode: bool, check: bool) -> int:
    """Runs, pools and the report; returns the exit code `finish` picks."""
    directory, config = model_option(spec.model)
    fits_option(config, spec.dtype, spec.device)
    pool_heads = config.num_heads if spec.heads == 0 else spec.heads
    target = out_dir(spec.out)
    if spec.kernel == "triton" and spec.device == "cpu":
        # Without a device the Triton kernel runs under its interpreter; set before any build.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        with_heads(config, pool_heads)
    except ConfigError as e:
        raise BadInput(f"--heads {pool_heads}: {e}") from None
    status(f"loading {directory}")
    _, tensors = load_model(directory)  # a GGUF too
    record = collect_env(spec.threads, sys.argv)
    env_path = write_env(target / "capture-env.json", record)
    samples_path = target / "capture-samples.csv"
    runs, records = timed_runs(spec, config, tensors, samples_path, status)
    rows_out = [*runs, *records, *priced_pools(spec, config, pool_heads, status)]
    found = gates(spec, runs)
    notes = record_notes(runs) + up_front_notes(runs) + ratio_notes(runs)
    outputs = write_outputs(spec, target, rows_out)
    outputs.update(samples=str(samples_path), env=str(env_path))
    return finish(
        "capture",
        as_dicts(rows_out),
        found,
        outputs,
        json_mode=json_mode,
        check=check,
        render=lambda: render_capture(stdout_console(), rows_out, found, notes),
        failed=any(r.status != "ok" for r in runs),
        env=asdict(record),
    )


def timed_runs(spec: CaptureSpec, config: ModelConfig, tensors, samples_path: Path, status):
    """Each run length driven, recorded, replayed and timed: (run rows, record rows)."""
    samples: list[dict] = []

    def keep(steps: int, window) -> None:
        # Every timed step on disk as it comes: a run stopped midway keeps what it timed.
        samples.extend({"run_length": steps, **s} for s in sample_rows([window], "system"))
        write_rows(samples_path, samples, SAMPLE_HEADER)

    try:
        # Both engines are built, driven and timed in this process, under --threads.
        with threads_applied(spec.threads):
            return run_rows(
                config,
                tensors,
                rows=spec.rows,
                prompt_len=spec.prompt_len,
                steps=list(spec.run_lengths),
                width_multiple=spec.width_multiple,
                up_front=spec.up_front,
                kernel=spec.kernel,
                device=spec.device,
                dtype=spec.dtype,
                status=status,
                plan=spec.round_plan(),
                on_window=keep,
            )
    except KernelInputError as e:
        # The model's shapes are outside what the chosen kernel takes (e.g. Triton's head_dim).
        raise BadInput(f"--kernel {spec.kernel} with --model {spec.model}: {e}") from None


def priced_pools(spec: CaptureSpec, config: ModelConfig, pool_heads: int, status) -> list:
    """The capture list's pool rows (formula, traced, measured on CUDA), workspace and held."""
    widths = list(spec.width_multiples)
    rows, tokens = spec.capture_rows, spec.capture_tokens
    pools = pool_rows(pool_heads, rows, tokens, widths, spec.sizes)
    status("tracing the decode forward's memory under fake tensors")
    pools = with_traced(pools, config, spec.dtype)
    workspace = workspace_rows(config, pool_heads, rows, tokens, spec.dtype, spec.sizes)
    if spec.device == "cuda":
        measured = measure_pools(config, rows, tokens, widths, spec.dtype, status)
        pools = with_measured(pools, measured)
    return [*pools, *workspace, *held_rows(pool_heads, rows, tokens)]


def write_outputs(spec: CaptureSpec, target: Path, rows_out: list) -> dict:
    """capture.csv and captured-decode-replay.png, from the rows."""
    csv_path = write_capture_csv(target / "capture.csv", as_dicts(rows_out), capture_columns())
    heading = title(
        "captured decode",
        model=spec.model,
        device=spec.device,
        dtype=spec.dtype,
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        width_multiple=spec.width_multiple,
    )
    png_path = plot_capture(target / "captured-decode-replay.png", rows_out, heading)
    return {"csv": str(csv_path), "png": str(png_path)}
