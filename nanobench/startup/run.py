"""One `nanobench startup` run: every start in its own fresh process, back to back, then report.

What it is: `plan(spec)` (the starts in order: run by run, each mode's cold start before the warm
and hot ones that read what it left, the modes rotated from run to run so drift touches each;
with `--vs`, each start as a before and an after start back to back, `startup.vs.interleaved`),
`Starts` (the rows so far, on disk after every start) and `run_startup(spec, status, ...)`.
What it is not: a start (`startup.session`), its phases (`startup.phases`), the comparison's
arithmetic (`startup.vs`) or the report.
Invariant: a start is timed from the parent's clock at spawn; every row is on disk before the
next start; a start that failed is a failed row of its kind, never a figure of another kind; a
side's warm and hot starts read only what that side's cold start left.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from nanobench.compile.run import resolve
from nanobench.harness.change import Change, vs_gates
from nanobench.harness.console import interrupted, stdout_console
from nanobench.harness.env_record import collect_env, with_load, write_env
from nanobench.harness.errors import BadInput, as_vs
from nanobench.harness.eta import announce
from nanobench.harness.export import export_startup
from nanobench.harness.fresh import run_fresh
from nanobench.harness.load import sample_load
from nanobench.harness.output import finish
from nanobench.harness.rows import as_dicts, columns
from nanobench.harness.targets import BUILTINS
from nanobench.harness.validate import out_dir, out_file
from nanobench.startup.caches import CacheRoot, check_artifacts, start_env
from nanobench.startup.gates import gates
from nanobench.startup.phases import START_PHASES
from nanobench.startup.rows import GraphRow, StartRow, failed_row, rows_of, with_saved
from nanobench.startup.spec import KINDS, StartJob, StartupSpec
from nanobench.startup.vs import changes, interleaved
from reports.csvio import write_rows
from reports.startup import draw_startup, render_changes, render_startup
from reports.style import counted, title

WORKER = "nanobench.startup.session"


def plan(spec: StartupSpec) -> list[tuple[str, str, str, int]]:
    """(side, mode, kind, run) in the order they start; off compiles nothing, so it starts once
    a run. The side is "" in a plain run; with --vs both sides start each cell back to back.

    A hot start loads Inductor's cache artifacts; another backend leaves none, so it has none.
    """
    kinds = [k for k in KINDS if k in spec.starts and (k != "hot" or spec.backend == "inductor")]
    order = []
    for run in range(1, spec.runs + 1):
        k = (run - 1) % len(spec.modes)
        for mode in (*spec.modes[k:], *spec.modes[:k]):
            order += [(mode, kind, run) for kind in (kinds[:1] if mode == "off" else kinds)]
    return interleaved(order) if spec.compared else [("", *cell) for cell in order]


@dataclass
class Starts:
    """The run's rows as they come, written whole after every start."""

    where: Path
    compared: bool = False
    rows: list[StartRow] = field(default_factory=list)
    graphs: list[GraphRow] = field(default_factory=list)
    readies: dict = field(default_factory=dict)  # (side, mode, kind, run) -> its ready row

    def save(self) -> list[StartRow]:
        rows = with_saved(self.rows)
        write_rows(self.where / "startup.csv", *self.view(rows, StartRow))
        write_rows(self.where / "startup-graphs.csv", *self.view(self.graphs, GraphRow))
        if self.compared:
            write_rows(self.changes_path, as_dicts(changes(rows)), columns(Change))
        return rows

    @property
    def changes_path(self) -> Path:
        return self.where / "startup-changes.csv"

    def view(self, rows: list, row_type: type) -> tuple[list[dict], list[str]]:
        """Rows and columns as written: a plain run's have no side column, as before --vs."""
        if self.compared:
            return as_dicts(rows), columns(row_type)
        dicts = [{k: v for k, v in d.items() if k != "side"} for d in as_dicts(rows)]
        return dicts, [c for c in columns(row_type) if c != "side"]


def one_start(spec, side: str, job: StartJob, roots: CacheRoot, starts: Starts, status) -> None:
    """Spawn one start over its side's caches, wait for it, keep its rows."""
    tag = f"{side} {job.mode} {job.kind} (run {job.run})".lstrip()
    env = start_env(roots.cache(job.mode, job.run, job.kind, side), spec.pgo)
    status(f"{tag}: starting a fresh process")
    launched = time.time()
    ready = run_fresh(
        WORKER,
        asdict(job),
        timeout=spec.timeout,
        env=env,
        on_progress=lambda e: status(f"{tag}: first pass, step {e['step']}/{e['steps']}"),
    )
    wall = time.time() - launched
    if ready.get("status", "ok") != "ok" or "stamps" not in ready:
        starts.rows.append(failed_row(job.mode, job.kind, job.run, ready["status"], spec.pgo, side))
        return
    cold = starts.readies.get((side, job.mode, "cold", job.run))
    row, graphs = rows_of(ready, launched, wall, cold, spec.pgo, side)
    starts.readies[(side, job.mode, job.kind, job.run)] = ready
    starts.rows.append(row)
    starts.graphs.extend(graphs)
    status(f"{tag}: ready in {row.ready_s:.1f} s")


def job_for(spec, worker, roots: CacheRoot, side: str, mode: str, kind: str, run: int) -> StartJob:
    """The start's job: a cold start saves its artifacts; a hot one loads its run's cold's (its
    own side's)."""
    save = load = ""
    if kind == "cold" and mode != "off" and "hot" in spec.starts:
        save = str(roots.artifacts(mode, run, side))
    if kind == "hot":
        load = spec.artifacts or str(roots.artifacts(mode, run, side))
    fields = {**asdict(worker), "mode": mode}
    return StartJob(**fields, kind=kind, run=run, load_artifacts=load, save_artifacts=save,
                    pgo=spec.pgo)  # fmt: skip


def not_startable(side: str, job: StartJob, starts: Starts) -> str | None:
    """Why a warm or hot start cannot run as its kind: its cold start failed or left nothing."""
    if job.kind == "cold" or job.mode == "off":
        return None
    cold = (side, job.mode, "cold", job.run)
    if cold not in starts.readies and not (job.kind == "hot" and job.load_artifacts
                                           and Path(job.load_artifacts).exists()):  # fmt: skip
        return f"not run: its cold start (run {job.run}) failed, so it would start cold"
    if job.kind == "hot" and not Path(job.load_artifacts).exists():
        return f"not run: its cold start (run {job.run}) saved no cache artifacts"
    return None


def heading(spec: StartupSpec, dtype: str) -> str:
    if spec.compared:
        what = f"startup of target {spec.target} (after) vs {spec.vs} (before)"
    else:
        what = "startup" + (f" of target {spec.target}" if spec.target else "")
    return title(
        what,
        model=spec.model if not spec.target or spec.target in BUILTINS else None,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        steps=f"{spec.steps} in the first pass, {counted(spec.runs, 'run')}",
        backend=spec.backend,
        pgo="on" if spec.pgo else "off (pinned)",
    )


def measure(spec: StartupSpec, workers: dict, starts: Starts, status) -> None:
    """Every start of the plan, back to back; an interrupt says what is on disk. `workers`:
    each side's worker shape by its name ("" alone)."""
    roots = CacheRoot(spec.cache_dir)
    order = plan(spec)
    try:
        for i, (side, mode, kind, run) in enumerate(order, 1):
            job = job_for(spec, workers[side], roots, side, mode, kind, run)
            why = not_startable(side, job, starts)
            if why:
                starts.rows.append(failed_row(mode, kind, run, why, spec.pgo, side))
            else:
                one_start(spec, side, job, roots, starts,
                          lambda s, i=i: status(f"[{i}/{len(order)}] {s}"))  # fmt: skip
            starts.save()
    except KeyboardInterrupt:
        starts.save()
        done = {(r.side, r.mode, r.kind, r.run) for r in starts.rows}
        missing = [f"{s} {m} {k} {r}".lstrip() for s, m, k, r in order
                   if (s, m, k, r) not in done]  # fmt: skip
        raise interrupted(len(starts.rows), 0, missing, starts.where / "startup.csv",
                          starts.where / "startup-graphs.csv") from None  # fmt: skip
    finally:
        roots.close()


def run_startup(spec: StartupSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve the model, run every start, write the outputs; the gates' exit code."""
    if check and spec.compared and not (spec.no_more or spec.no_slower):
        raise BadInput("--check on a comparison gates the columns you name: give --no-more "
                       "and/or --no-slower")  # fmt: skip
    if spec.artifacts:
        check_artifacts(spec.artifacts)
    out_file(spec.export_json, "--export-json")
    dtype, workers = worker_specs(spec)
    where = out_dir(spec.out)
    record = collect_env(spec.threads, sys.argv)
    record = with_load(record, sample_load())
    env_path = write_env(where / "startup-env.json", record)
    starts = Starts(where, spec.compared)
    started = time.time()
    timer = announce("startup", spec, status)  # the estimate's line, before any start
    measure(spec, workers, starts, status)
    elapsed = time.time() - started
    record = with_load(record, after=sample_load())
    write_env(env_path, record)
    rows = starts.save()
    head = heading(spec, dtype)
    dicts, _ = starts.view(rows, StartRow)
    # the figure's bars are "before dynamic", "after dynamic": each side a mode of its own
    bars = [{**d, "mode": f"{d['side']} {d['mode']}".lstrip()} for d in as_dicts(rows)]
    outputs = {
        "csv": str(where / "startup.csv"),
        "graphs": str(where / "startup-graphs.csv"),
        "png": str(draw_startup(bars, START_PHASES, where / "startup.png", head)),
        "env": str(env_path),
    }
    if spec.export_json:
        outputs["export_json"] = str(export_startup(spec, dtype, dicts, record))
    found_changes = changes(rows) if spec.compared else []
    if spec.compared:
        found = vs_gates(spec.no_more, spec.no_slower, spec.margin, found_changes)
        outputs["changes"] = str(starts.changes_path)
        render = partial(render_changes, stdout_console(), as_dicts(found_changes), dicts,
                         found, head, elapsed)  # fmt: skip
    else:
        found = gates(spec, rows)
        render = partial(render_startup, stdout_console(), dicts, START_PHASES, found, head,
                         elapsed)  # fmt: skip
    timer.done(all(r.status == "ok" for r in rows))
    return finish(
        "startup",
        dicts,
        found,
        outputs,
        json_mode=json_mode,
        check=check,
        render=render,
        failed=any(r.status != "ok" for r in rows),
        env=asdict(record),
        extra={"changes": as_dicts(found_changes)} if spec.compared else None,
    )


def worker_specs(spec: StartupSpec) -> tuple[str, dict]:
    """The run's dtype and each side's worker shape ("" alone; before and after with --vs)."""
    workers = {}
    for side, side_spec in spec.sides().items():
        try:
            dtype, directory = resolve_model(side_spec)
        except BadInput as e:
            raise (as_vs(e) if side == "before" else e) from None
        workers[side] = side_spec.worker(directory, dtype)
    return dtype, workers


def resolve_model(spec: StartupSpec) -> tuple[str, str]:
    """compile's resolution (dtype, model directory, fits) for one process at a time."""
    return resolve(replace(spec.as_compile(), modes=("off",)))
