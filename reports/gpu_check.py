"""The GPU check's output: `gpu-check.csv`, grown one row at a time, and its closing table.

What it is: `GPU_CHECK_COLUMNS`, `RowLog` (every `add` rewrites the whole CSV atomically with
the rows so far, so a run killed at its time limit leaves every finished row on disk),
`summary` (one cell of numbers per row kind) and `render_gpu_check`.
What it is not: a measurement; rows come from `nanobench.gpu.check` and its checks.
Invariant: after any `add` returns, the CSV holds exactly the rows added so far, in order; a
missing number prints as nothing, never as a made-up value.
"""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.csvio import write_rows
from reports.style import binary_bytes

GPU_CHECK_COLUMNS = [
    "check",
    "name",
    "ok",
    "seconds",
    # kernel timing
    "rows",
    "context",
    "kernel",
    "dtype",
    "ms",
    "read_bytes",
    "gbps",
    "hbm_gbps",
    "hbm_fraction",
    "hbm_fraction_low",
    "hbm_fraction_high",
    "speedup",
    "speedup_low",
    "speedup_high",
    "rounds",
    "round_ms",
    "verdict",
    "max_err",
    # the capture path
    "steps",
    "shapes",
    "replays",
    "recorded_mid_run",
    "max_abs_diff",
    "tolerance",
    "pool_reserved_bytes",
    "pool_allocated_bytes",
    "pool_peak_bytes",
    "predicted_pool_bytes",
    "pool_diff_pct",
    "capture_output",
    "traced_pool_bytes",
    "traced_pool_diff_pct",
    "traced_kept_bytes",
    "traced_kept_diff_pct",
    "graph_output_bytes",
    "shared_output_bytes",
    "capture_s",
    # one graph's allocator peak against its traced peak
    "width",
    "traced_peak_bytes",
    "measured_peak_bytes",
    "library_bytes",
    "diff_pct",
    # compile rows
    "model",
    "mode",
    "step_ms",
    "compile_s",
    "builds",
    # pytest
    "passed",
    "failed",
    "skipped",
    "errors",
    "detail",
]
DETAIL_CHARS = 160


class RowLog:
    """Rows of one run, on disk after every add."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict] = []

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        write_rows(self.path, self.rows, GPU_CHECK_COLUMNS)
        return row


def _num(row: dict, key: str) -> bool:
    value = row.get(key)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def summary(row: dict) -> str:
    """The numbers that matter for the row's kind, in one short cell ('' when none)."""
    check = row.get("check")
    if check == "hbm" and _num(row, "gbps"):
        return f"{row['gbps']:.0f} GB/s device-to-device copy"
    if check == "kernel" and _num(row, "ms"):
        text = f"{row['ms'] * 1e3:.1f} us, {row['gbps']:.0f} GB/s"
        if _num(row, "hbm_fraction"):
            text += f" ({row['hbm_fraction']:.0%} of HBM)"
        if _num(row, "speedup"):
            text += f", x{row['speedup']:.1f}"
            if _num(row, "speedup_low") and _num(row, "speedup_high"):
                text += f" [{row['speedup_low']:.1f}, {row['speedup_high']:.1f}]"
            text += " vs reference"
        return text
    if check == "kernel-gate" and _num(row, "hbm_fraction"):
        text = f"{row['hbm_fraction']:.0%} of HBM"
        if _num(row, "hbm_fraction_low") and _num(row, "hbm_fraction_high"):
            text += f" [{row['hbm_fraction_low']:.0%}, {row['hbm_fraction_high']:.0%}]"
        return text
    if check == "capture" and _num(row, "max_abs_diff"):
        text = (
            f"{row['replays']} replays, diff {row['max_abs_diff']:.1e} "
            f"(tol {row['tolerance']:.1e}), pool {binary_bytes(row['pool_reserved_bytes'])}"
        )
        if _num(row, "pool_diff_pct"):
            text += (
                f" vs predicted {binary_bytes(row['predicted_pool_bytes'])} "
                f"({row['pool_diff_pct']:+.0f}%)"
            )
        if _num(row, "traced_pool_diff_pct"):
            text += (
                f", traced {binary_bytes(row['traced_pool_bytes'])} "
                f"({row['traced_pool_diff_pct']:+.0f}%)"
            )
        if _num(row, "pool_allocated_bytes"):
            text += (
                f"; kept {binary_bytes(row['pool_allocated_bytes'])} vs traced "
                f"{binary_bytes(row['traced_kept_bytes'])}"
            )
        return text
    if check == "capture-memory" and _num(row, "diff_pct"):
        return (
            f"peak {binary_bytes(row['measured_peak_bytes'] - row['library_bytes'])} "
            f"(+{binary_bytes(row['library_bytes'])} library) vs traced "
            f"{binary_bytes(row['traced_peak_bytes'])} ({row['diff_pct']:+.1f}%)"
        )
    if check == "compile" and _num(row, "step_ms"):
        text = f"{row['step_ms']:.2f} ms/step"
        if _num(row, "compile_s"):
            text += f", compile {row['compile_s']:.1f} s"
        if _num(row, "speedup"):
            text += f", x{row['speedup']:.2f} vs off"
        return text
    if check == "pytest" and _num(row, "passed"):
        return (
            f"{row['passed']} passed, {row['failed']} failed, {row['skipped']} skipped, "
            f"{row['errors']} errors"
        )
    return ""


def render_gpu_check(console: Console, rows: list[dict], csv_path: Path, seconds: float) -> None:
    table = Table(title=f"gpu-check ({seconds:.0f} s) -> {csv_path}")
    for column in ("check", "name", "ok"):
        table.add_column(column, no_wrap=True)
    table.add_column("result", overflow="fold")
    table.add_column("detail (full text in the CSV)", overflow="fold")
    for row in rows:
        ok = row.get("ok")
        mark = (
            Text("pass", style="green")
            if ok
            else Text("skip", style="yellow")
            if ok is None
            else Text("FAIL", style="red")
        )
        if row.get("verdict") == "inconclusive":
            mark = Text("can't tell", style="yellow")
        detail = str(row.get("detail") or "")
        detail = detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 3] + "..."
        table.add_row(str(row.get("check")), str(row.get("name")), mark, summary(row), detail)
    console.print(table)
