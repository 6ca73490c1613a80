"""The compile sweep: each mode in a fresh worker, timed in interleaved rounds against `off`.

What it is: the pieces the sweep hands the worker (`nanobench.compile.session`): its module
(`WORKER`), its Inductor cache (`cache_env`) and its payload read back as a row (`annotate`);
`interleaved_sweep(...)` (--processes live workers per mode, each mode's first set up alone and
the later ones side by side, then timed windows in rotating rounds, each mode's rounds dealt
over its workers, until every gate is decided or every speedup's interval is tight), `sweep(...)`
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
from nanobench.harness.fresh import LiveWorker, run_fresh, start_side_by_side
from nanobench.harness.inductor_cache import fresh_dir, warm_dir
from nanobench.harness.rounds import (
    Comparison,
    RoundPlan,
    Window,
    first_pass_window,
    live_window,
    run_rounds,
    spread_over,
)

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
    """`processes` live workers per mode, then rounds, round r of every mode in its worker
    (r - 1) mod processes (`rounds.spread_over`), until `decided(windows, level)` says every gate
    is decided or the intervals are tight.

    Each mode's first worker is set up alone, one mode after another (no two compile at once):
    its builds, compile seconds and first pass are the mode's row. A later worker of the mode
    shares the first's Inductor cache directory, so it mostly loads what the first built; only
    its status and the frames its windows built count, so the later workers of every mode are
    set up side by side (`fresh.start_side_by_side`). on_row sees each row when its first worker is ready and
    again when the mode closes; on_window every window, the first pass (round 0) included.
    Whatever ends the sweep (an interrupt too), every worker's process group is killed and every
    cold cache directory removed.
    """
    # A worker past the last round would set up and time nothing.
    processes = min(processes, plan.max_rounds)
    workers: dict[str, list[LiveWorker]] = {}
    envs: dict[str, dict] = {}
    rows: dict[str, CompileRow] = {}
    fresh_dirs: list[str] = []
    windows: list[Window] = []

    def keep(window: Window) -> None:
        windows.append(window)
        if window.status != "ok":
            rows[window.system] = replace(rows[window.system], status=window.status)
        on_window(window)

    try:
        for mode in modes:
            envs[mode], fresh = cache_env(spec.cache, mode, spec.device)
            fresh_dirs.extend([fresh] if fresh else [])
            workers[mode] = []
            first = mode_worker(spec, mode, 1, envs[mode], on_status, workers[mode])
            rows[mode] = annotate(first.start(timeout), spec, mode)
            if rows[mode].status == "ok":
                keep(first_pass_window(mode, asdict(rows[mode])))
            on_row(rows[mode])
        spawns = [
            ((m, p), partial(mode_worker, spec, m, p, envs[m], on_status, workers[m]))
            for m in modes
            if rows[m].status == "ok"
            for p in range(2, processes + 1)
        ]
        for (mode, process), ready in start_side_by_side(spawns, timeout, spec.threads):
            row = annotate(ready, spec, mode)
            if rows[mode].status == "ok" and row.status != "ok":
                rows[mode] = replace(rows[mode], status=f"process {process}: {row.status}")
            elif process == 2 and row.status == "ok":
                # A warm start, measured for free: the first worker's caches, a fresh process.
                rows[mode] = replace(rows[mode], compile_warm_s=row.compile_s)
        live = {
            m: spread_over([live_window(w, m, timeout) for w in workers[m]])
            for m in workers
            if rows[m].status == "ok"
        }
        run_rounds(
            live, plan, comparisons(modes), decided=decided, on_window=keep, on_round=on_round
        )
        for worker in (w for m in live for w in workers[m]):
            worker.stop()  # every worker finishes its final row side by side
        for mode in live:
            rows[mode] = closed_row(rows[mode], workers[mode], spec, timeout)
            on_row(rows[mode])
    finally:
        for worker in (w for ws in workers.values() for w in ws):
            worker.kill()
        for fresh in fresh_dirs:
            shutil.rmtree(fresh, ignore_errors=True)
    return list(rows.values()), windows


def mode_worker(
    spec: WorkerSpec, mode: str, process: int, env: dict, on_status, into: list
) -> LiveWorker:
    """Worker `process` of a mode, spawned and registered in `into` before anyone waits for it,
    so an interrupt during its set-up kills it too. Only the first is traced: its first pass is
    the mode's row."""
    tag = f"{mode}" if process == 1 else f"{mode} (process {process})"
    on_status(f"{tag}: starting a fresh process")
    env = dict(env)
    if spec.trace and process == 1:
        env["TORCH_TRACE"] = os.path.join(spec.trace, mode)
    worker = LiveWorker(
        WORKER,
        asdict(replace(spec, mode=mode)),
        env=env,
        on_progress=lambda e: on_status(
            f"{tag}: first pass, step {e.get('step')}/{e.get('steps')}"
            + (" (building)" if e.get("built") else "")
        ),
    )
    into.append(worker)
    return worker


def closed_row(row: CompileRow, workers: list, spec: WorkerSpec, timeout: float) -> CompileRow:
    """A mode's row once every worker closed: the first's final row, every worker's builds in
    windows summed (any of them would have timed a compile), the first failure's status."""
    finals = [annotate(worker.close(timeout), spec, row.mode) for worker in workers]
    failed = [(p, f.status) for p, f in enumerate(finals, 1) if f.status != "ok"]
    if row.status != "ok":
        return row
    if failed:
        process, status = failed[0]
        return replace(row, status=status if process == 1 else f"process {process}: {status}")
    built = sum(f.builds_in_windows or 0 for f in finals)
    return replace(finals[0], builds_in_windows=built, compile_warm_s=row.compile_warm_s)
