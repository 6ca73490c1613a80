"""The compile sweep: each mode in a fresh worker, timed in interleaved rounds against `off`.

What it is: the pieces the sweep hands the worker (`nanobench.compile.session`): its module
(`WORKER`), its Inductor cache (`cache_env`) and its payload read back as a row (`annotate`);
`interleaved_sweep(...)` (--processes live workers per mode through the run's fleet,
`harness.fleet`: each mode's first set up alone and the later ones side by side, then timed
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
from nanobench.harness.fleet import Fleet, first_failure, later_status
from nanobench.harness.fresh import run_fresh
from nanobench.harness.inductor_cache import fresh_dir, warm_dir
from nanobench.harness.rounds import Comparison, RoundPlan, Window, first_pass_window

WORKER = "nanobench.compile.session"  # the module each mode's fresh process runs


def cache_env(cache: str, mode: str, device: str) -> tuple[dict[str, str], str | None]:
    """Cold: a fresh Inductor cache per mode (returned for cleanup). Warm: the one shared
    directory for this machine's code-generation setting (`nanobench.harness.inductor_cache`)."""
    # PGO pinned off: its state in the cache would let a later worker compile another graph.
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0"}
    if cache == "cold":
        fresh = fresh_dir(mode)
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh
        return env, fresh
    env["TORCHINDUCTOR_CACHE_DIR"] = str(warm_dir(device))
    return env, None


def annotate(payload: dict, member: Member) -> CompileRow:
    """A worker's payload as a row (`from_worker` fails naming a renamed field), with the spec's
    and the member's side."""
    spec = member.spec
    row = from_worker(payload, member.mode)
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
        rows.append(annotate(row, Member("", mode, spec)))
        on_row(rows[-1])
    return rows


@dataclass(frozen=True)
class Member:
    """One mode of one side in the fleet: `name` is its windows' system ("dynamic", or
    "after dynamic" in a before-and-after run), `spec` what its workers step."""

    side: str  # "" alone; before | after
    mode: str
    spec: WorkerSpec

    @property
    def name(self) -> str:
        return member_name(self.side, self.mode)


def member_name(side: str, mode: str) -> str:
    return f"{side} {mode}" if side else mode


def members_of(sides: dict[str, WorkerSpec], modes: list[str]) -> list[Member]:
    """Every side's modes, the before side first: one fleet member each."""
    return [Member(side, mode, spec) for side, spec in sides.items() for mode in modes]


def comparisons(members: list[Member]) -> list[Comparison]:
    """Each side's compiled modes' speedups (off's step time over its own) and, with two sides,
    each mode's change (after's step time over before's): every ratio the stop rule reads."""
    names = {m.name for m in members}
    found = []
    for m in members:
        off = member_name(m.side, "off")
        if m.mode != "off" and off in names:
            found.append(Comparison(m.name, off, m.name))
        before = member_name("before", m.mode)
        if m.side == "after" and before in names:
            found.append(Comparison(f"{m.mode} after/before", m.name, before))
    return found


def interleaved_sweep(
    members: list[Member],
    plan: RoundPlan,
    *,
    timeout: float,
    processes: int = 1,
    decided: Callable[[list[Window], float], bool] = lambda w, c: False,
    on_status: Callable[[str], None] = lambda s: None,
    on_row: Callable[[CompileRow], None] = lambda r: None,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict], None] = lambda r, i: None,
    history: dict | None = None,
) -> tuple[list[CompileRow], list[Window]]:
    """`processes` live workers per member (`harness.fleet`), then rounds, round r of every
    member in its worker (r - 1) mod processes, until `decided(windows, level)` says every gate
    is decided or the intervals are tight. A before-and-after run is one fleet: both sides'
    modes take turns in every round, so each change is paired by round like each speedup.

    Each member's first worker is set up alone, one after another (no two compile at once):
    its builds, compile seconds and first pass are the member's row. A later worker shares the
    first's Inductor cache directory and skips what only the row needs (the guard-kind probe),
    so its set-up is a warm start: process 2's compile seconds are the row's `compile_warm_s`.
    on_row sees each row when its first worker is ready and again when the member closes;
    on_window every window, the first pass (round 0) included; `history` (by mode) lends the
    stop rule each speedup's earlier runs on this machine, as the rows will.
    """
    processes = min(processes, plan.max_rounds)  # a worker past the last round times nothing
    rows: dict[str, CompileRow] = {}
    windows: list[Window] = []
    by_name = {m.name: m for m in members}

    def keep(window: Window) -> None:
        windows.append(window)
        if window.status != "ok":
            rows[window.system] = replace(rows[window.system], status=window.status)
        on_window(window)

    # A later worker's set-up is compiling (one core: TORCHINDUCTOR_COMPILE_THREADS=1), so as many
    # set up at once as there are cores; its few first-pass steps are all it runs on its threads.
    with Fleet(WORKER, timeout, 1, on_status) as fleet:
        envs = {}
        for m in members:
            envs[m.name] = member_env(fleet, m)
            rows[m.name] = first_row(fleet, m, envs[m.name], on_status)
            if rows[m.name].status == "ok":
                keep(first_pass_window(m.name, asdict(rows[m.name])))
            on_row(rows[m.name])
        later = {n: (partial(payload, m), envs[n]) for n, m in by_name.items()
                 if rows[n].status == "ok"}  # fmt: skip
        for name, process, ready in fleet.later(later, processes):
            rows[name] = later_row(rows[name], annotate(ready, by_name[name]), process)
        live = [n for n in by_name if rows[n].status == "ok"]
        fleet.rounds(live, plan, comparisons(members), decided=decided, on_window=keep,
                     on_round=on_round, history=history)  # fmt: skip
        for name, finals in fleet.close(live).items():
            row = closed_row(rows[name], [annotate(f, by_name[name]) for f in finals])
            rows[name] = replace(row, setup_s=fleet.setup_s[name][1],
                                 later_setup_s=fleet.later_setup_s(name))  # fmt: skip
            on_row(rows[name])
    return list(rows.values()), windows


def payload(member: Member, process: int) -> dict:
    """Worker `process` of a member, as the fields it is handed."""
    return asdict(replace(member.spec, mode=member.mode, process=process))


def member_env(fleet: Fleet, member: Member) -> dict[str, str]:
    """A member's workers' environment; a cold cache directory goes when the fleet does."""
    label = member.name.replace(" ", "-")
    env, fresh = cache_env(member.spec.cache, label, member.spec.device)
    fleet.clean(fresh)
    return env


def first_row(fleet: Fleet, member: Member, env: dict, on_status) -> CompileRow:
    """A member's first worker, set up alone (the only one traced): its first pass is the row."""
    if member.spec.trace:
        env = {**env, "TORCH_TRACE": os.path.join(member.spec.trace, member.name.replace(" ", "-"))}

    def progress(e: dict) -> None:
        built = " (building)" if e.get("built") else ""
        on_status(f"{member.name}: first pass, step {e.get('step')}/{e.get('steps')}{built}")

    ready = fleet.first(member.name, payload(member, 1), env, on_progress=progress)
    return annotate(ready, member)


def later_row(row: CompileRow, later: CompileRow, process: int) -> CompileRow:
    """A mode's row once its worker `process` set up: its failure marks the row; process 2's
    compile seconds are a warm start, measured for free (the first's caches, a fresh process)."""
    status = later_status(row.status, process, later.status)
    if status != row.status:
        return replace(row, status=status)
    if process == 2 and later.status == "ok":
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
