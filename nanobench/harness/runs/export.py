"""`--export-json FILE`: a run's rows as PyTorch OSS benchmark database records.

What it is: `records(...)`, one record per metric of each row in the format PyTorch's dynamo
harness (`benchmarks/dynamo/common.py`, its `<out>.json`) and vLLM's benchmarks
(`convert_to_pytorch_benchmark_format`) write: `{benchmark: {name, mode, dtype, extra_info},
model: {name, type, backend, origins}, metric: {name, benchmark_values, extra_info}}`;
`write_records(path, records)` (a JSON list, atomically); and each timing command's metric
list (`COMPILE_METRICS`, `DECODE_METRICS`, `STARTUP_METRICS`, `TUNE_METRICS`: the row field, and the unit in
the metric's name); a startup cell's runs are one record's `benchmark_values`.
What it is not: an uploader (nothing here reaches the network) or a schema of our own.
Invariant: every value is a row's field as the run measured it (a row that lacks one has no
record for it, never a 0); `benchmark_values` holds the row's own sample (its median), and
the interval, when the row has one, rides in the metric's `extra_info`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

BENCHMARK = "nanobench"
# (row field, metric name, the row fields that are its interval's ends)
COMPILE_METRICS = (
    ("step_ms", "step_latency_ms", ("step_ms_q1", "step_ms_q3")),
    ("speedup", "speedup", ("speedup_low", "speedup_high")),
    ("compile_s", "compilation_latency_s", ()),
    ("compile_warm_s", "compilation_latency_warm_s", ()),
    ("builds", "builds", ()),
    ("unique_graphs", "unique_graphs", ()),
    ("graph_breaks", "graph_breaks", ()),
    ("breakeven_steps", "breakeven_steps", ("breakeven_steps_low", "breakeven_steps_high")),
)
DECODE_METRICS = (
    ("ms_per_step", "step_latency_ms", ("ms_q1", "ms_q3")),
    ("tokens_per_s", "tokens_per_second", ()),
    ("prefill_ms", "prefill_latency_ms", ()),
    ("compile_s", "compilation_latency_s", ()),
    ("ratio_vs_hf_eager", "ratio_vs_hf_eager", ("ratio_vs_hf_eager_low", "ratio_vs_hf_eager_high")),
    ("ratio_vs_floor", "ratio_vs_floor", ("ratio_vs_floor_low", "ratio_vs_floor_high")),
)


TUNE_METRICS = (
    ("step_ms", "step_latency_ms", ()),
    ("vs_off", "ratio_vs_eager", ("vs_off_low", "vs_off_high")),
    ("vs_best", "ratio_vs_best", ("vs_best_low", "vs_best_high")),
    ("compile_s", "compilation_latency_s", ()),
    ("compile_warm_s", "compilation_latency_warm_s", ()),
    ("breakeven_steps", "breakeven_steps", ()),
)
STARTUP_METRICS = (
    ("ready_s", "time_to_ready_s", ()),
    ("first_token_s", "time_to_first_token_s", ()),
    ("compile_s", "compilation_latency_s", ()),
    ("graphs", "unique_graphs", ()),
    ("kernels_built", "kernels_built", ()),
)


def records(
    rows: list[Mapping],
    metrics: tuple,
    *,
    command: str,
    model_of,
    dtype: str,
    backend_of,
    extra_info: Mapping,
    label: str = "mode",
    by_side: Mapping[str, Mapping] | None = None,
) -> list[dict]:
    """One record per (row, metric) the row measured; `model_of(row)` and `backend_of(row)` name
    its model and backend, and
    `label` the row field that names it (mode, system), kept in the benchmark's extra_info."""
    found = []
    for row in rows:
        if row.get("status") != "ok":
            continue
        bench_info = {**extra_info, label: row.get(label)}
        if row.get("side"):
            bench_info["side"] = row["side"]
            bench_info.update((by_side or {}).get(row["side"], {}))
        for field, metric, ends in metrics:
            value = row.get(field)
            if value is None:
                continue
            info = {"row_field": field}
            if ends and all(row.get(e) is not None for e in ends):
                info.update(low=row[ends[0]], high=row[ends[1]], interval=list(ends))
            found.append(_record(command, model_of(row), dtype, bench_info, metric,
                                 backend_of(row), [value], info))  # fmt: skip
    return found


def _record(command, model, dtype, bench_info, metric, backend, values, info) -> dict:
    """One record of the OSS benchmark database's format."""
    return {
        "benchmark": {
            "name": f"{BENCHMARK} {command}",
            "mode": "inference",
            "dtype": dtype,
            "extra_info": bench_info,
        },
        "model": {"name": model, "type": "decode-step", "backend": backend,
                  "origins": ["nanobench"]},
        "metric": {"name": metric, "benchmark_values": values, "extra_info": info},
    }  # fmt: skip


def write_records(path: str | Path, found: list[dict]) -> Path:
    """The records as one JSON list, written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(found, f, indent=1, default=str)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def run_info(spec, record, **more) -> dict:
    """What every record's benchmark carries: the run's shape and the machine it ran on."""
    shape = ("device", "rows", "prompt_len", "steps", "processes")  # startup has no processes
    return {
        **{k: getattr(spec, k) for k in shape if hasattr(spec, k)},
        **more,
        "threads": record.threads,
        "torch_version": record.torch_version,
        "cpu_model": record.cpu_model,
        "git_commit": record.git_commit,
    }


def environments_of(record) -> dict[str, dict]:
    """Each side's environment where a side ran elsewhere (`EnvRecord.sides`): what its own
    records carry in place of the run's torch version."""
    keep = ("python", "torch_version", "triton_version", "aten_cpu_capability", "variables")
    return {side: {k: found[k] for k in keep} for side, found in (record.sides or {}).items()}


def knobbed(sides, row: Mapping, backend: str) -> str:
    """A row's backend, with its side's knob where it has one: "inductor dynamic cpp-wrapper"."""
    knob = sides[row.get("side", "")].knob
    return f"{backend} {knob}" if knob else backend


def export_compile(spec, sides, dtype: str, rows, record) -> Path:
    """A compile run's rows (both sides of a --vs run, each side of a --try run, each tagged;
    a knob's backend is named with it: "inductor dynamic cpp-wrapper") as records; each row's
    model its own side's target or model."""
    from dataclasses import asdict

    info = run_info(spec, record, cache=spec.cache)
    side = lambda r: sides[r.get("side", "")].spec  # noqa: E731
    found = records(
        [asdict(r) for r in rows],
        COMPILE_METRICS,
        command="compile",
        model_of=lambda r: side(r).target or side(r).model,
        dtype=dtype,
        backend_of=lambda r: (
            "eager" if r["mode"] == "off" else knobbed(sides, r, f"{spec.backend} {r['mode']}")
        ),
        extra_info=info,
        by_side=environments_of(record),
    )
    return write_records(spec.export_json, found)


def export_decode(spec, sides, dtype: str, rows, record) -> Path:
    """A decode run's systems (the engine's and transformers') as records."""
    from dataclasses import asdict

    info = run_info(spec, record)
    found = records(
        [asdict(r) for r in rows],
        DECODE_METRICS,
        command="decode",
        model_of=lambda r: spec.model,
        dtype=dtype,
        backend_of=lambda r: knobbed(sides, r, r["system"]),
        extra_info=info,
        label="system",
        by_side=environments_of(record),
    )
    return write_records(spec.export_json, found)


def export_tune(spec, dtype: str, rows: list[Mapping], record, stop: str) -> Path:
    """A race's timed configurations (its rows as written) as records, each with its outcome;
    the race's stop in every record's benchmark."""
    info = run_info(spec, record, cache=spec.cache, race_stop=stop)
    timed = [{**r, "status": "ok"} for r in rows if r.get("step_ms") is not None]
    found = records(
        timed, TUNE_METRICS, command="tune", model_of=lambda r: spec.target or spec.model,
        dtype=dtype, extra_info=info, label="config",
        backend_of=lambda r: "eager" if r["mode"] == "off" else
        " ".join([spec.backend, r["mode"], *r["knobs"].split("+")]).strip(),
    )  # fmt: skip
    outcome = {r["config"]: r["outcome"] for r in timed}
    for f in found:
        f["benchmark"]["extra_info"]["outcome"] = outcome[f["benchmark"]["extra_info"]["config"]]
    return write_records(spec.export_json, found)


def export_startup(spec, sides, dtype: str, rows, record) -> Path:
    """A startup run's cells (side, mode, start kind): each metric's runs as one record's
    values, in run order; a run that failed or lacks the metric adds none."""
    from dataclasses import asdict

    cells: dict[tuple, list[dict]] = {}
    for row in map(asdict, rows):
        if row.get("status") == "ok":
            cells.setdefault((row.get("side", ""), row["mode"], row["kind"]), []).append(row)
    found = []
    for (side, mode, kind), runs in cells.items():
        runs = sorted(runs, key=lambda r: r["run"])
        info = {**run_info(spec, record), "mode": mode, "start": kind, "runs": len(runs)}
        if side:
            info.update(side=side, **environments_of(record).get(side, {}))
        model = sides[side].spec.target or sides[side].spec.model
        for field, metric, _ in STARTUP_METRICS:
            values = [r[field] for r in runs if r.get(field) is not None]
            if values:
                backend = "eager" if mode == "off" else knobbed(sides, {"side": side},
                                                                 f"{spec.backend} {mode}")  # fmt: skip
                found.append(_record("startup", model, dtype, info, metric, backend, values,
                                     {"row_field": field}))  # fmt: skip
    return write_records(spec.export_json, found)
