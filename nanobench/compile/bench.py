"""The compile sweep: each mode in a fresh worker, timed in interleaved rounds against `off`.

What it is: the pieces the sweep hands the worker (`nanobench.compile.session`): its module
(`WORKER`), its Inductor cache (`cache_env`) and its payload read back as a row (`annotate`);
`interleaved_sweep(...)` (--processes live workers per mode through the run's fleet,
`harness.workers.fleet`: each mode's first set up alone and the later ones side by side, then timed
windows in rotating rounds, each mode's rounds dealt over its workers, until every gate is
decided or every speedup's interval is tight), `sweep(...)`
(one-shot: a mode's first pass in a fresh process, what the GPU check runs). Each worker is
handed a `WorkerSpec` (`compile.spec`) as its fields.
What it is not: the CLI, what the worker asks of dynamo (shapes, prediction, compiler:
`compile.dynamo`), the row type and its derived columns (`compile.rows`) or the report.
Invariant: builds are `counters["frames"]["ok"]`; compile seconds come from
`get_compilation_metrics()`; step time is steps that built nothing, and a ratio is paired by
round, never across rounds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial

from nanobench.compile.rows import CompileRow, from_worker
from nanobench.compile.spec import WorkerSpec
from nanobench.compile.vs import sped
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers import fleet as fleets
from nanobench.harness.workers.fleet import (
    Fleet,
    Listener,
    first_failure,
    first_pass_window,
    later_status,
)
from nanobench.harness.workers.fresh import run_fresh
from nanobench.harness.workers.inductor_cache import fresh_dir, warm_dir
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Comparison, RoundPlan, Window

WORKER = "nanobench.compile.session"  # the module each mode's fresh process runs


def cache_env(cache: str, mode: str, device: str) -> tuple[dict[str, str], str | None]:
    """Cold: a fresh Inductor cache per mode (returned for cleanup). Warm: the one shared
    directory for this machine's code-generation setting (`nanobench.harness.workers.inductor_cache`)."""
    # PGO pinned off: its state in the cache would let a later worker compile another graph.
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0"}
    if cache == "cold":
        fresh = fresh_dir(mode)
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh
        return env, fresh
    env["TORCHINDUCTOR_CACHE_DIR"] = str(warm_dir(device))
    return env, None


def annotate(payload: dict, spec: WorkerSpec, member: Member) -> CompileRow:
    """A worker's payload as a row (`from_worker` fails naming a renamed field), with the spec's
    facts and the member's side."""
    row = from_worker(payload, member.name)
    return replace(
        row, cache=spec.cache, device=spec.device, backend=spec.backend, bucketed=spec.bucketed,
        side=member.side,
    )  # fmt: skip


def sweep(
    spec: WorkerSpec,
    modes: list[str],
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda m, e: None,
    on_row: Callable[[CompileRow], None] = lambda r: None,
) -> list[CompileRow]:
    """One-shot: each mode's first pass in its own fresh process, one after another."""
    rows = []
    for mode in modes:
        env, fresh = cache_env(spec.cache, mode, spec.device)
        if spec.trace:
            env["TORCH_TRACE"] = os.path.join(spec.trace, mode)
        try:
            row = run_fresh(
                WORKER,
                asdict(replace(spec, mode=mode)),
                timeout=timeout,
                env=env,
                on_progress=lambda e, m=mode: on_progress(m, e),
            )
        finally:
            if fresh:
                shutil.rmtree(fresh, ignore_errors=True)
        rows.append(annotate(row, spec, Member("", mode)))
        on_row(rows[-1])
    return rows


@dataclass
class ModePart:
    """One mode of one side in the fleet (`fleet.Part`): its member ("dynamic", or after
    "dynamic" in a before-and-after run), what its workers step, their environment."""

    member: Member
    spec: WorkerSpec
    env: dict[str, str]
    on_status: Callable[[str], None]

    def payload(self, process: int) -> dict:
        return asdict(replace(self.spec, mode=self.member.name, process=process))

    def start(self, fleet: Fleet, timeout: float | None = None) -> dict:
        """The first worker, set up alone (the only one traced): its first pass is the row;
        past `timeout` (the fleet's by default) it is killed and its row says timeout."""
        env = self.env
        if self.spec.trace:
            env = {**env, "TORCH_TRACE": os.path.join(self.spec.trace, self.member.label)}

        def progress(e: dict) -> None:
            built = " (building)" if e.get("built") else ""
            self.on_status(f"{self.member}: first pass, step {e.get('step')}/{e.get('steps')}"
                           f"{built}")  # fmt: skip

        return fleet.first(self.member, self.payload(1), env, timeout, on_progress=progress)

    def first(self, ready: dict) -> CompileRow:
        return annotate(ready, self.spec, self.member)

    def first_window(self, row: CompileRow) -> Window:
        return first_pass_window(self.member, asdict(row))

    def later(self, row: CompileRow, ready: dict, process: int) -> CompileRow:
        return later_row(row, annotate(ready, self.spec, self.member), process)

    def closed(self, row: CompileRow, finals: list[dict], setup_s: float, later_s) -> CompileRow:
        row = closed_row(row, [annotate(f, self.spec, self.member) for f in finals])
        return replace(row, setup_s=setup_s, later_setup_s=later_s)


def comparisons(members: list[Member], sides: Sides) -> list[Comparison]:
    """Each side's compiled modes' speedups (off's step time over its own; a knob side's over
    the off it borrows) and, per compared pair of sides (before and after, plain and a knob),
    each mode's change (the other side's step time over the base's): every ratio the stop rule
    reads."""
    found, changed = [], []
    for m in members:
        base = Member(sides.base_of(m.side) or "", m.name)
        lender = sides[m.side].lender
        off = next((o for o in (Member(m.side, "off"), Member(lender, "off")) if o in members),
                   None)  # fmt: skip
        if m.name != "off" and off is not None:
            found.append(Comparison(str(m), off, m))
        if sides.base_of(m.side) is not None and base in members:
            changed.append((m, base))
    # each mode's step change and each compiled mode's speedup change hold together (`vs.changes`)
    family = len(changed) + len([m for m, _ in changed if sped(sides, m.side, m.name)])
    return found + [Comparison(sides.ratio_name(m, b), m, b, family) for m, b in changed]


def interleaved_sweep(
    workers: dict[str, WorkerSpec],
    members: list[Member],
    plan: RoundPlan,
    *,
    sides: Sides,
    timeout: float,
    processes: int,
    listener: Listener,
    on_status: Callable[[str], None],
    history: dict | None = None,
) -> None:
    """`processes` live workers per mode of every side (`workers`, each side's spec), then rounds, round r
    of every member in its worker (r - 1) mod processes, until every gate is decided or the
    intervals are tight. A before-and-after run is one fleet: both sides' modes take turns in
    every round, so each change is paired by round like each speedup.

    Each member's first worker is set up alone, one after another (no two compile at once):
    its builds, compile seconds and first pass are the member's row. A later worker shares the
    first's Inductor cache directory and skips what only the row needs (the guard-kind probe),
    so its set-up is a warm start: process 2's compile seconds are the row's `compile_warm_s`.
    `members` are every side's (a knob side has no `off`), `sides` the run's comparison.
    `history` (by mode) lends the stop rule each speedup's earlier runs on this machine.
    """
    # A later worker's set-up is compiling (one core: TORCHINDUCTOR_COMPILE_THREADS=1), so as many
    # set up at once as there are cores; its few first-pass steps are all it runs on its threads.
    with Fleet(WORKER, timeout, 1, on_status, sides.envs()) as fleet:
        parts = [ModePart(m, workers[m.side], member_env(fleet, m, workers[m.side]), on_status)
                 for m in members]  # fmt: skip
        ratios = partial(comparisons, sides=sides)
        fleets.sweep(fleet, parts, plan, processes, listener, ratios, history=history)


def member_env(fleet: Fleet, member: Member, spec: WorkerSpec) -> dict[str, str]:
    """A member's workers' environment; a cold cache directory goes when the fleet does."""
    env, fresh = cache_env(spec.cache, member.label, spec.device)
    fleet.clean(fresh)
    return env


# The backends whose compiled output a later process reads back from a cache (Inductor's FX
# and AOT caches); under any other (eager, aot_eager) a second process compiles cold again.
CACHED_BACKENDS = ("inductor",)


def later_row(row: CompileRow, later: CompileRow, process: int) -> CompileRow:
    """A mode's row once its worker `process` set up: its failure marks the row; process 2's
    compile seconds are a warm start, measured for free (the first's caches, a fresh process),
    where the backend keeps a cache: under another, process 2 compiled cold again."""
    status = later_status(row.status, process, later.status)
    if status != row.status:
        return replace(row, status=status)
    if process == 2 and later.status == "ok" and row.backend in CACHED_BACKENDS:
        return replace(row, compile_warm_s=later.compile_s)
    return row


def closed_row(row: CompileRow, finals: list[CompileRow]) -> CompileRow:
    """A mode's row once every worker closed: the first's final row, every worker's builds in
    windows summed (any of them would have timed a compile), the first failure's status."""
    if row.status != "ok":
        return row
    failed = first_failure([f.status for f in finals])
    if failed:
        return replace(row, status=failed)
    built = sum(f.builds_in_windows or 0 for f in finals)
    return replace(finals[0], builds_in_windows=built, compile_warm_s=row.compile_warm_s)
