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
from dataclasses import asdict, replace
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


def annotate(payload: dict, spec: WorkerSpec, mode: str) -> CompileRow:
    """A worker's payload as a row (`from_worker` fails naming a renamed field), with the spec's."""
    row = from_worker(payload, mode)
    return replace(
        row, cache=spec.cache, device=spec.device, backend=spec.backend, bucketed=spec.bucketed
    )


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
        rows.append(annotate(row, spec, mode))
        on_row(rows[-1])
    return rows


def comparisons(modes: list[str]) -> list[Comparison]:
    """Each compiled mode's speedup: off's step time over its own."""
    if "off" not in modes:
        return []
    return [Comparison(f"{m}", "off", m) for m in modes if m != "off"]


def interleaved_sweep(
    spec: WorkerSpec,
    modes: list[str],
    plan: RoundPlan,
    *,
    timeout: float,
    processes: int = 1,
    decided: Callable[[list[Window], float], bool] = lambda w, c: False,
    on_status: Callable[[str], None] = lambda s: None,
    on_row: Callable[[CompileRow], None] = lambda r: None,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict], None] = lambda r, i: None,
) -> tuple[list[CompileRow], list[Window]]:
    """`processes` live workers per mode (`harness.fleet`), then rounds, round r of every mode
    in its worker (r - 1) mod processes, until `decided(windows, level)` says every gate is
    decided or the intervals are tight.

    Each mode's first worker is set up alone, one mode after another (no two compile at once):
    its builds, compile seconds and first pass are the mode's row. A later worker shares the
    first's Inductor cache directory and skips what only the row needs (the guard-kind probe),
    so its set-up is a warm start: process 2's compile seconds are the row's `compile_warm_s`.
    on_row sees each row when its first worker is ready and again when the mode closes;
    on_window every window, the first pass (round 0) included.
    """
    processes = min(processes, plan.max_rounds)  # a worker past the last round times nothing
    rows: dict[str, CompileRow] = {}
    windows: list[Window] = []

    def keep(window: Window) -> None:
        windows.append(window)
        if window.status != "ok":
            rows[window.system] = replace(rows[window.system], status=window.status)
        on_window(window)

    # A later worker's set-up is compiling (one core: TORCHINDUCTOR_COMPILE_THREADS=1), so as many
    # set up at once as there are cores; its few first-pass steps are all it runs on its threads.
    with Fleet(WORKER, timeout, 1, on_status) as fleet:
        envs = {}
        for mode in modes:
            envs[mode] = mode_env(fleet, spec, mode)
            rows[mode] = first_row(fleet, spec, mode, envs[mode], on_status)
            if rows[mode].status == "ok":
                keep(first_pass_window(mode, asdict(rows[mode])))
            on_row(rows[mode])
        later = {m: (partial(payload, spec, m), envs[m]) for m in modes if rows[m].status == "ok"}
        for mode, process, ready in fleet.later(later, processes):
            rows[mode] = later_row(rows[mode], annotate(ready, spec, mode), process)
        live = [m for m in modes if rows[m].status == "ok"]
        fleet.rounds(live, plan, comparisons(modes), decided=decided, on_window=keep,
                     on_round=on_round)  # fmt: skip
        for mode, finals in fleet.close(live).items():
            row = closed_row(rows[mode], [annotate(f, spec, mode) for f in finals])
            rows[mode] = replace(row, setup_s=fleet.setup_s[mode][0],
                                 later_setup_s=fleet.later_setup_s(mode))  # fmt: skip
            on_row(rows[mode])
    return list(rows.values()), windows


def payload(spec: WorkerSpec, mode: str, process: int) -> dict:
    """Worker `process` of a mode, as the fields it is handed."""
    return asdict(replace(spec, mode=mode, process=process))


def mode_env(fleet: Fleet, spec: WorkerSpec, mode: str) -> dict[str, str]:
    """A mode's workers' environment; a cold cache directory goes when the fleet does."""
    env, fresh = cache_env(spec.cache, mode, spec.device)
    fleet.clean(fresh)
    return env


def first_row(fleet: Fleet, spec: WorkerSpec, mode: str, env: dict, on_status) -> CompileRow:
    """A mode's first worker, set up alone (the only one traced): its first pass is the row."""
    if spec.trace:
        env = {**env, "TORCH_TRACE": os.path.join(spec.trace, mode)}

    def progress(e: dict) -> None:
        built = " (building)" if e.get("built") else ""
        on_status(f"{mode}: first pass, step {e.get('step')}/{e.get('steps')}{built}")

    ready = fleet.first(mode, payload(spec, mode, 1), env, on_progress=progress)
    return annotate(ready, spec, mode)


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
