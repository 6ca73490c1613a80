"""The decode comparison: the engine against transformers, each in its own fresh worker, in rounds.

What it is: the systems and their targets (`DecodeTargets`), `sweep(...)` (the roofline probe,
then --processes live workers per system (the first ones one at a time, the later side by
side), then interleaved rounds of one timed generation each, or of its slices when whole ones
would not fit the budget, each system's rounds dealt over its workers,
`nanobench.harness.rounds`). The rows' derived columns are `nanobench.decode.derive`, the
gates and their checks `nanobench.decode.gates`, the worker side `nanobench.decode.session`, the
floor's arithmetic and probes `nanobench.decode.roofline`.
What it is not: the CLI or the report, and not a unit test: its milliseconds are what this
machine measured in this run.
Invariant: every system runs the same checkpoint, seeded prompts and number of greedy steps on
the same thread count, and a ratio is paired by round, never across rounds. A system whose
tokens differ from the reference's is a failed row whatever its speed: it did not compute the
same thing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from nanobench.decode.roofline import PROBE
from nanobench.decode.rows import ProbeRow, RunSpec, SystemRow
from nanobench.harness.choices import SYSTEMS  # noqa: F401 (the sweep's vocabulary)
from nanobench.harness.errors import BadInput
from nanobench.harness.fresh import LiveWorker, run_fresh, start_side_by_side
from nanobench.harness.inductor_cache import fresh_dir
from nanobench.harness.rounds import (
    Comparison,
    RoundPlan,
    Window,
    live_window,
    run_rounds,
    spread_over,
)
from nanobench.harness.rows import rebuild
from nanobench.harness.slices import ROUNDS_IN_BUDGET, slices_for

# The module every decode worker runs (`python -m`): a system's session or the probe's.
WORKER = "nanobench.decode.session"
ENGINE_SYSTEMS = ("engine-eager", "engine-compiled", "engine-captured")
HF_SYSTEMS = ("hf-eager", "hf-static-compiled")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

# A step reading fewer weight bytes than this is host-bound on a CPU (launches and Python).
HOST_BOUND_BYTES = 256 << 20


@dataclass(frozen=True)
class DecodeTargets:
    """The step-time ratios a comparison promises; None: not a target for this model.

    The engine eager is never slower than transformers eager. A host-bound model (a few MB of
    weights) must show what compiling buys: the compiled engine well under transformers' own
    best CPU configuration (static cache, compiled forward). A bandwidth-bound model (GBs per
    step) is held to the memory floor instead: no compiler makes a weight read faster.
    """

    eager_vs_hf_eager: float | None = 1.0
    compiled_vs_hf_compiled: float | None = None
    best_vs_floor: float | None = None


HOST_BOUND = DecodeTargets(compiled_vs_hf_compiled=0.7)
BANDWIDTH_BOUND = DecodeTargets(best_vs_floor=1.5)
TARGETS: dict[str, DecodeTargets] = {"tiny": HOST_BOUND, "llama-3.2-1b": BANDWIDTH_BOUND}


def targets_for(model: str, weight_bytes: int) -> DecodeTargets:
    """A preset's own targets; a checkpoint directory's by the weight bytes a step reads."""
    if model in TARGETS:
        return TARGETS[model]
    return HOST_BOUND if weight_bytes < HOST_BOUND_BYTES else BANDWIDTH_BOUND


class DecodeGateFailed(RuntimeError):
    """A decode comparison whose promise broke: tokens differ, or a target ratio is missed."""


def transformers_can_load(directory) -> None:
    """The checkpoint's config resolves to a transformers model class and its shard index (when
    sharded) reads as transformers reads it, without reading weights."""
    # transformers takes seconds to import: an engine worker, which imports this module, never does.
    import transformers
    from transformers.utils.hub import get_checkpoint_shard_files

    try:
        config = transformers.AutoConfig.from_pretrained(str(directory), local_files_only=True)
    except Exception as e:  # whatever transformers raises, it means it cannot load this
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(
            f"--model {directory}: transformers cannot load its config ({first})"
        ) from None
    index = Path(directory) / "model.safetensors.index.json"
    if index.is_file():
        # The engine reads an index without `metadata`; transformers' from_pretrained does not,
        # and would fail inside its worker as a row's "KeyError: 'metadata'".
        try:
            get_checkpoint_shard_files(str(directory), str(index), local_files_only=True)
        except Exception as e:
            raise BadInput(
                f"--model {directory}: transformers cannot read {index.name} "
                f"({type(e).__name__}: {e})"
            ) from None
    archs = getattr(config, "architectures", None) or []
    if not archs or getattr(transformers, archs[0], None) is None:
        raise BadInput(
            f"--model {directory}: transformers has no model class for architectures {archs}"
        )


# -- the sweep --------------------------------------------------------------------------------


def worker_env(threads: int) -> tuple[dict[str, str], str]:
    """A cold Inductor cache per system (returned for cleanup), offline transformers."""
    cache = fresh_dir("decode")
    env = {
        "TORCHINDUCTOR_CACHE_DIR": cache,
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # A checkpoint directory never needs the network; a typo must not become a download.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env, cache


def comparisons(systems: list[str]) -> list[Comparison]:
    """The ratios the gates judge: each engine system over each transformers system."""
    return [
        Comparison(f"{ours}/{theirs}", ours, theirs)
        for ours in systems
        if ours in ENGINE_SYSTEMS
        for theirs in systems
        if theirs in HF_SYSTEMS
    ]


def sweep(
    spec: RunSpec,
    systems: tuple[str, ...],
    plan: RoundPlan,
    *,
    timeout: float,
    processes: int = 1,
    decided: Callable[[list[Window], float], bool] = lambda w, c: False,
    on_status: Callable[[str], None] = lambda s: None,
    on_row: Callable[[SystemRow], None] = lambda r: None,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict], None] = lambda r, i: None,
    on_probe: Callable[[ProbeRow], None] = lambda p: None,
) -> tuple[list[SystemRow], ProbeRow]:
    """The probe, then `processes` live workers per system, then interleaved rounds, round r of
    every system in its worker (r - 1) mod processes, until `decided(windows, level)` says
    every gate is decided or the intervals are tight.

    A system's set-up facts (compile seconds, frames) are its first worker's, set up alone, one
    system after another; a later worker shares the first's Inductor cache directory, and the
    later workers of every system are set up side by side (`fresh.start_side_by_side`). Whatever ends it (an interrupt too), every
    worker's process group is killed and every Inductor cache directory removed. Returns the
    system rows (not derived) and the probe row. Each worker's payload is rebuilt into its row
    type: a renamed key is an error naming it.
    """
    # A worker past the last round would set up and time nothing.
    processes = min(processes, plan.max_rounds)
    env, cache = worker_env(spec.threads)
    caches = [cache]
    workers: dict[str, list[LiveWorker]] = {}
    rows: dict[str, SystemRow] = {}

    def keep(window: Window) -> None:
        if window.status != "ok":
            rows[window.system] = replace(rows[window.system], status=window.status)
        on_window(window)

    try:
        on_status("roofline probe (bandwidth, GEMM) in a fresh process")
        answer = run_fresh(WORKER, asdict(replace(spec, system=PROBE)), timeout=timeout, env=env)
        probe = rebuild(ProbeRow, {"system": PROBE, **answer})
        on_probe(probe)
        rows.update(
            start_workers(spec, systems, processes, timeout, workers, caches, on_status, on_row)
        )
        ready = [rows[s] for s in workers if rows[s].status == "ok"]
        slices = round_slices(ready, spec, plan, on_status)
        live = {
            s: spread_over([live_window(w, s, timeout, slices) for w in ws])
            for s, ws in workers.items()
            if rows[s].status == "ok"
        }
        run_rounds(
            live,
            plan,
            comparisons(list(live)),
            decided=decided,
            on_window=keep,
            on_round=on_round,
        )
        for worker in (w for s in live for w in workers[s]):
            worker.stop()  # every worker finishes its final row side by side
        for system in live:
            rows[system] = closed_row(rows[system], workers[system], timeout)
            on_row(rows[system])
    finally:
        for worker in (w for ws in workers.values() for w in ws):
            worker.kill()
        for cache in caches:
            shutil.rmtree(cache, ignore_errors=True)
    return list(rows.values()), probe


def system_worker(spec: RunSpec, process: int, env, into: list, on_status) -> LiveWorker:
    """Worker `process` of a system, spawned and registered in `into` before anyone waits for
    it, so an interrupt during its set-up kills it too."""
    tag = spec.system if process == 1 else f"{spec.system} (process {process})"
    on_status(f"{tag}: building and warming up in a fresh process")
    into.append(LiveWorker(WORKER, asdict(spec), env=env))
    return into[-1]


def start_workers(
    spec: RunSpec, systems, processes: int, timeout: float, workers: dict, caches: list, on_status,
    on_row,
) -> dict[str, SystemRow]:  # fmt: skip
    """Each system's first worker alone, one system after another (its compile seconds and
    warm-up are the row's), then every later worker side by side; a later one that fails marks
    its system's row. Workers join `workers[system]` in process order, caches `caches`."""
    rows, envs = {}, {}
    for system in systems:
        envs[system], cache = worker_env(spec.threads)
        caches.append(cache)
        workers[system] = []
        rows[system] = start_first(
            replace(spec, system=system), envs[system], timeout, workers[system], on_status
        )
        on_row(rows[system])
    spawns = [
        ((s, p), partial(system_worker, replace(spec, system=s), p, envs[s], workers[s], on_status))
        for s in systems
        if rows[s].status == "ok"
        for p in range(2, processes + 1)
    ]
    for (system, process), ready in start_side_by_side(spawns, timeout, spec.threads):
        got = rebuild(SystemRow, {"system": system, **ready})
        if rows[system].status == "ok" and got.status != "ok":
            rows[system] = replace(rows[system], status=f"process {process}: {got.status}")
    return rows


def start_first(spec: RunSpec, env, timeout: float, into: list, on_status) -> SystemRow:
    """A system's first worker, set up alone: its compile seconds and warm-up are the row's."""
    worker = system_worker(spec, 1, env, into, on_status)
    return rebuild(SystemRow, {"system": spec.system, **worker.start(timeout)})


def round_slices(ready: list[SystemRow], spec: RunSpec, plan: RoundPlan, on_status) -> int:
    """How many slices each generation is cut into so that 8 rounds fit the budget, said up
    front. A generation's seconds are its untimed warm-up's, less what compiling took there."""
    round_s = sum(max(0.0, (r.warmup_s or 0.0) - (r.compile_s or 0.0)) for r in ready)
    slices = slices_for(round_s, plan.budget_s, spec.steps - 1)
    if slices > 1:
        on_status(
            f"a round of whole generations takes about {round_s:.1f} s: {ROUNDS_IN_BUDGET} would "
            f"not fit --budget-s {plan.budget_s:g}, so each generation is cut into {slices} "
            "slices the systems take turns at (each slice a paired round)"
        )
    return slices


def closed_row(row: SystemRow, workers: list, timeout: float) -> SystemRow:
    """A system's row once every worker closed: the first worker's final row; builds while
    timed summed over the workers; deterministic only when every worker repeated itself and
    made the first's tokens; the first failure's status."""
    finals = [worker.close(timeout) for worker in workers]
    if row.status != "ok":
        return row
    done = [rebuild(SystemRow, {**asdict(row), **final}) for final in finals]
    failed = [(p, r.status) for p, r in enumerate(done, 1) if r.status != "ok"]
    if failed:
        process, status = failed[0]
        return replace(row, status=status if process == 1 else f"process {process}: {status}")
    first = done[0]
    return replace(
        first,
        builds_measured=sum(r.builds_measured or 0 for r in done),
        deterministic=all(r.deterministic and r.tokens == first.tokens for r in done),
    )
