"""A startup run's starts: which, in what order, each in its own fresh process, back to back.

What it is: `plan(spec, sides)` (the starts in order: run by run, each mode's cold start before the
warm and hot ones that read what it left, the modes rotated from run to run so drift touches
each; with `--vs`, each start as a before and an after start back to back,
`startup.vs.interleaved`) and `Starts` (the run's starts as they come: each start spawned over
its side's caches and its rows handed to `keep`, the ready rows a warm or hot start's saving is
read against, the graphs each built, the seconds the starts took).
What it is not: a start itself (`startup.session`), its phases (`startup.phases`), the run's
files and report (`startup.run`, `harness.runs.measured_run`).
Invariant: a start is timed from the parent's clock at spawn; a start that failed is a failed
row of its kind, never a figure of another kind; a side's warm and hot starts read only what
that side's cold start left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.fresh import run_fresh
from nanobench.startup.caches import CacheRoot, start_env
from nanobench.startup.rows import GraphRow, StartRow, failed_row, rows_of
from nanobench.startup.spec import KINDS, StartJob, StartupSpec
from nanobench.startup.vs import interleaved

WORKER = "nanobench.startup.session"


def plan(spec: StartupSpec, sides: Sides) -> list[tuple[str, str, str, int]]:
    """(side, mode, kind, run) in the order they start; off compiles nothing, so it starts once
    a run. Every side starts each cell back to back (`startup.vs.interleaved`): "" alone in a
    plain run; with --vs before and after.

    A hot start loads Inductor's cache artifacts; another backend leaves none, so it has none.
    """
    kinds = [k for k in KINDS if k in spec.starts and (k != "hot" or spec.backend == "inductor")]
    order = []
    for run in range(1, spec.runs + 1):
        k = (run - 1) % len(spec.modes)
        for mode in (*spec.modes[k:], *spec.modes[:k]):
            order += [(mode, kind, run) for kind in (kinds[:1] if mode == "off" else kinds)]
    # every side starts the cells of its own modes (a knob side: the compiled ones)
    return [cell for cell in interleaved(order, sides.names) if cell[1] in sides[cell[0]].members]


@dataclass
class Starts:
    """The run's starts as they come; `keep` is handed every row (the run's `on_row`)."""

    spec: StartupSpec
    sides: Sides
    status: Callable[[str], None]
    keep: Callable[[StartRow], None] = lambda row: None
    readies: dict = field(default_factory=dict)  # (side, mode, kind, run) -> its ready row
    graphs: list[GraphRow] = field(default_factory=list)
    elapsed: float = 0.0

    def measure(self, workers: dict) -> None:
        """Every start of the plan, back to back. `workers`: each side's worker shape by its
        name ("" alone)."""
        spec, roots, order = self.spec, CacheRoot(self.spec.cache_dir), plan(self.spec, self.sides)
        started = time.time()
        try:
            for i, (side, mode, kind, n) in enumerate(order, 1):
                job = job_for(spec, workers[side], roots, side, mode, kind, n)
                why = not_startable(side, job, self.readies)
                if why:
                    self.keep(failed_row(mode, kind, n, why, spec.pgo, side))
                else:
                    self.one(side, job, roots, f"[{i}/{len(order)}]")
        finally:
            self.elapsed = time.time() - started
            roots.close()

    def one(self, side: str, job: StartJob, roots: CacheRoot, count: str) -> None:
        """Spawn one start over its side's caches, wait for it, keep its rows."""
        spec = self.spec
        tag = f"{side} {job.mode} {job.kind} (run {job.run})".lstrip()

        def status(text: str) -> None:
            self.status(f"{count} {text}")

        where = self.sides[side].env
        env = where.over(start_env(roots.cache(job.mode, job.run, job.kind, side), spec.pgo))
        status(f"{tag}: starting a fresh process")
        launched = time.time()
        ready = run_fresh(
            WORKER,
            asdict(job),
            timeout=spec.timeout,
            env=env,
            on_progress=lambda e: status(f"{tag}: first pass, step {e['step']}/{e['steps']}"),
            python=where.python,
        )
        wall = time.time() - launched
        if ready.get("status", "ok") != "ok" or "stamps" not in ready:
            self.keep(failed_row(job.mode, job.kind, job.run, ready["status"], spec.pgo, side))
            return
        cold = self.readies.get((side, job.mode, "cold", job.run))
        row, graphs = rows_of(ready, launched, wall, cold, spec.pgo, side)
        self.readies[(side, job.mode, job.kind, job.run)] = ready
        self.graphs.extend(graphs)
        self.keep(row)
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
