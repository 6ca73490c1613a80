"""One `nanobench startup` run: every start in its own fresh process, back to back, then report.

What it is: `plan(spec)` (the starts in order: run by run, each mode's cold start before the warm
and hot ones that read what it left, the modes rotated from run to run so drift touches each;
with `--vs`, each start as a before and an after start back to back, `startup.vs.interleaved`),
`StartupKind` (what startup brings to a measured run, `harness.measured_run`: its rows with
their savings, the graphs beside them, its changes, gates and report) and
`run_startup(spec, status, ...)`.
What it is not: a start (`startup.session`), its phases (`startup.phases`), the comparison's
arithmetic (`startup.vs`), the report or the run's files, env record, interrupt and exit code
(`MeasuredRun`).
Invariant: a start is timed from the parent's clock at spawn; every row is on disk before the
next start; a start that failed is a failed row of its kind, never a figure of another kind; a
side's warm and hot starts read only what that side's cold start left.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

from nanobench.compile.run import resolve
from nanobench.harness.console import stdout_console
from nanobench.harness.export import export_startup
from nanobench.harness.fresh import run_fresh
from nanobench.harness.measured_run import MeasuredRun, RunKind, for_each_side
from nanobench.harness.member import Member
from nanobench.harness.rows import as_dicts, columns
from nanobench.harness.targets import BUILTINS
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


class StartupKind(RunKind):
    """What startup brings to a measured run: members are (side, "mode kind run"), one start
    each; the graphs each start built are written beside its rows."""

    command, label, row_type = "startup", "start", StartRow

    def __init__(self, spec: StartupSpec, dtype: str) -> None:
        super().__init__(spec)
        self.dtype = dtype
        self.graphs: list[GraphRow] = []
        self.readies: dict = {}  # (side, mode, kind, run) -> its ready row
        self.elapsed = 0.0

    def member(self, row: StartRow) -> Member:
        return start_member(row.side, row.mode, row.kind, row.run)

    def derive(self, side, rows, windows, level, history) -> list[StartRow]:
        return with_saved(rows)

    def changes(self, rows, windows, level) -> list:
        return changes(rows)

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def public(self, rows, sided: bool) -> list[dict]:
        """A plain run's rows have no side column, as before --vs."""
        dicts = as_dicts(rows)
        return dicts if sided else [{k: v for k, v in d.items() if k != "side"} for d in dicts]

    def csv_columns(self, sided: bool) -> list[str]:
        return [c for c in columns(StartRow) if sided or c != "side"]

    def save_more(self, run: MeasuredRun, rows) -> None:
        graphs = [d if run.sided else {k: v for k, v in d.items() if k != "side"}
                  for d in as_dicts(self.graphs)]  # fmt: skip
        cols = [c for c in columns(GraphRow) if run.sided or c != "side"]
        write_rows(run.path("-graphs"), graphs, cols)

    def more_outputs(self, run: MeasuredRun) -> dict[str, str]:
        return {"graphs": str(run.path("-graphs"))}

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype)

    def report(self, run: MeasuredRun, rows, found, changed, head):
        dicts = self.public(rows, run.sided)
        # the figure's bars are "before dynamic", "after dynamic": each side a mode of its own
        bars = [{**d, "mode": str(Member(d["side"], d["mode"]))} for d in as_dicts(rows)]
        png = draw_startup(bars, START_PHASES, run.where / "startup.png", head)
        if run.sided:
            return png, partial(render_changes, stdout_console(), as_dicts(changed), dicts,
                                found, head, self.elapsed)  # fmt: skip
        return png, partial(render_startup, stdout_console(), dicts, START_PHASES, found, head,
                            self.elapsed)  # fmt: skip

    def export(self, rows, record):
        return export_startup(self.spec, self.dtype, self.public(rows, self.spec.compared), record)


def start_member(side: str, mode: str, kind: str, run: int) -> Member:
    """A start as a member of its run: its side, and "dynamic warm 2" for people."""
    return Member(side, f"{mode} {kind} {run}")


def one_start(spec, side: str, job: StartJob, roots: CacheRoot, run: MeasuredRun, status) -> None:
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
        run.on_row(failed_row(job.mode, job.kind, job.run, ready["status"], spec.pgo, side))
        return
    kind = run.kind
    cold = kind.readies.get((side, job.mode, "cold", job.run))
    row, graphs = rows_of(ready, launched, wall, cold, spec.pgo, side)
    kind.readies[(side, job.mode, job.kind, job.run)] = ready
    kind.graphs.extend(graphs)
    run.on_row(row)
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


def not_startable(side: str, job: StartJob, readies: dict) -> str | None:
    """Why a warm or hot start cannot run as its kind: its cold start failed or left nothing."""
    if job.kind == "cold" or job.mode == "off":
        return None
    cold = (side, job.mode, "cold", job.run)
    if cold not in readies and not (job.kind == "hot" and job.load_artifacts
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


def measure(spec: StartupSpec, workers: dict, run: MeasuredRun, status) -> None:
    """Every start of the plan, back to back, each row kept as it comes. `workers`: each
    side's worker shape by its name ("" alone)."""
    roots = CacheRoot(spec.cache_dir)
    order = plan(spec)
    started = time.time()
    try:
        for i, (side, mode, kind, n) in enumerate(order, 1):
            job = job_for(spec, workers[side], roots, side, mode, kind, n)
            why = not_startable(side, job, run.kind.readies)
            if why:
                run.on_row(failed_row(mode, kind, n, why, spec.pgo, side))
            else:
                one_start(spec, side, job, roots, run,
                          lambda s, i=i: status(f"[{i}/{len(order)}] {s}"))  # fmt: skip
    finally:
        run.kind.elapsed = time.time() - started
        roots.close()


def run_startup(spec: StartupSpec, status, *, json_mode: bool, check: bool) -> int:
    """Resolve each side's model, run every start, write the outputs; the gates' exit code."""
    if spec.artifacts:
        check_artifacts(spec.artifacts)
    renames = {"--target": "--vs"}
    resolved = for_each_side(spec.sides(), resolve_model, renames)
    workers = {s: spec.sides()[s].worker(d, t) for s, (t, d) in resolved.items()}
    dtype = next(reversed(resolved.values()))[0]
    run = MeasuredRun(StartupKind(spec, dtype), status, check, None, spec.compared)
    run.open()
    planned = [start_member(*cell) for cell in plan(spec)]
    return run.run(partial(measure, spec, workers, run, status), planned, json_mode=json_mode)


def resolve_model(spec: StartupSpec) -> tuple[str, str]:
    """compile's resolution (dtype, model directory, fits) for one process at a time."""
    return resolve(replace(spec.as_compile(), modes=("off",)))
