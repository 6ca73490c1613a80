"""One `nanobench buckets` run: plans on the host, the capture list priced, the report.

What it is: `run_buckets(spec, out, ...)`: `bench.measure` (real plans over a toy cache, no
weights), the gates, `buckets.csv` and `bucketed-decode-shape.png`, then the short answer or
both tables, a server list's padding and, with `--batch-trace`, the recommended lists.
What it is not: the spec (`spec.py`) or the arithmetic (`bench.py`, `nanobench.cost`).
Invariant: every figure printed is a field of the rows written.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.buckets.bench import CaptureRow, RecommendedRow, RunRow, measure
from nanobench.buckets.gates import gates
from nanobench.buckets.spec import CSV_NAME, PNG_NAME, BucketsSpec
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts, columns
from reports.buckets import (
    BUCKETS_COLUMNS,
    draw_buckets,
    render_buckets,
    render_short_answer,
)
from reports.capture_sizes import capture_sizes_table, recommended_table
from reports.csvio import save_figure, write_rows


def run_buckets(spec: BucketsSpec, out: str, status, *, json_mode: bool, check: bool) -> int:
    """Measure, write, report; the exit code `finish` picks."""
    directory = out_dir(out)
    result = measure(spec, status)
    found = gates(spec, result)

    status("writing the CSV and the diagram")
    # Missing cells as "" rather than None: a None makes pandas turn a column of counts
    # into floats ("8.0" steps), and each table leaves the other's columns empty.
    keys = [*columns(RunRow), *columns(CaptureRow), *columns(RecommendedRow)]
    keys = list(dict.fromkeys(keys))
    csv_rows = [{k: r.get(k, "") for k in keys} for r in result.rows]
    csv_path = write_rows(directory / CSV_NAME, csv_rows, BUCKETS_COLUMNS)
    runs, capture, chosen = (
        as_dicts(result.runs),
        as_dicts(result.capture),
        asdict(result.chosen),
    )
    fig = draw_buckets(
        runs,
        capture,
        [asdict(t) for t in result.traces],
        spec.max_shapes,
        spec.max_waste,
    )
    png_path = save_figure(fig, directory / PNG_NAME)
    outputs = {"csv": str(csv_path), "png": str(png_path)}

    return finish(
        "buckets",
        result.rows,
        found,
        outputs,
        json_mode=json_mode,
        check=check,
        render=lambda: render(spec, result, found, outputs, runs, capture, chosen),
    )


def render(spec: BucketsSpec, result, found, outputs, runs, capture, chosen) -> None:
    """The short answer (--width-multiple alone) or both tables; a list's padding; the picks."""
    console = stdout_console()
    if spec.short:
        render_short_answer(
            console, chosen, found, outputs, kernel=spec.kernel, max_shapes=spec.max_shapes
        )
    else:
        render_buckets(
            console,
            runs,
            capture,
            found,
            outputs,
            kernel=spec.kernel,
            max_shapes=spec.max_shapes,
            explicit_len=bool(spec.max_model_len),
        )
    if spec.sizes is not None and not spec.short:
        console.print(capture_sizes_table(result.chosen))
    if result.recommended:
        console.print(recommended_table(as_dicts(result.recommended)))
