"""The decode comparison: the engine against transformers, each in its own fresh worker, in rounds.

What it is: the systems and their targets (`DecodeTargets`), `sweep(...)` (the roofline probe,
then --processes live workers per system (the first ones one at a time, the later side by
side), then interleaved rounds of one timed generation each, or of its slices when whole ones
would not fit the budget, each system's rounds dealt over its workers, `nanobench.harness.rounds`), `derive(rows, spec, probe,
windows)` (tokens against the reference; step-time median and IQR over the rounds; each ratio
to transformers and to the roofline floor with its interval, paired by round; the floor probe
failed when a step beats it) and the `check_*` functions the gates run.
The worker side is `nanobench.decode.session`; the floor's arithmetic and probes are
`nanobench.decode.roofline`.
What it is not: the CLI or the report, and not a unit test: its milliseconds are what this
machine measured in this run.
Invariant: every system runs the same checkpoint, seeded prompts and number of greedy steps on
the same thread count, and a ratio is paired by round, never across rounds. A system whose
tokens differ from the reference's is a failed row whatever its speed: it did not compute the
same thing.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from nanobench.decode.roofline import PROBE, floor_beaten, roofline_ms
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec, SystemRow
from nanobench.harness.choices import SYSTEMS  # noqa: F401 (the sweep's vocabulary)
from nanobench.harness.errors import BadInput
from nanobench.harness.fresh import LiveWorker, run_fresh, start_side_by_side
from nanobench.harness.inductor_cache import fresh_dir
from nanobench.harness.rounds import (
    Comparison,
    RoundPlan,
    Window,
    live_window,
    paired_rounds,
    run_rounds,
    spread_over,
)
from nanobench.harness.rows import rebuild
from nanobench.harness.slices import ROUNDS_IN_BUDGET, slices_for
from nanobench.harness.stats import CONFIDENCE, Interval, ratio_interval, spread

# The module every decode worker runs (`python -m`): a system's session or the probe's.
WORKER = "nanobench.decode.session"
ENGINE_SYSTEMS = ("engine-eager", "engine-compiled", "engine-captured")
HF_SYSTEMS = ("hf-eager", "hf-static-compiled")
# The reference whose tokens every row is compared with, in order of preference.
REFERENCES = ("engine-eager", "hf-eager")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
INTERVAL_COLUMNS = ("ratio_vs_hf_eager", "ratio_vs_hf_compiled", "ratio_vs_floor")

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
    for (system, process), ready in start_side_by_side(spawns, timeout):
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


# -- derived columns ----------------------------------------------------------------------------


def first_difference(tokens: list[list[int]], ref: list[list[int]]) -> str | None:
    if len(tokens) != len(ref):
        return f"{len(tokens)} rows against {len(ref)}"
    for r, (a, b) in enumerate(zip(tokens, ref)):
        for s, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"row {r} step {s}: {x} vs {y}"
        if len(a) != len(b):
            return f"row {r}: {len(a)} tokens against {len(b)}"
    return None


def reference_row(rows: list[SystemRow]) -> SystemRow | None:
    for name in REFERENCES:
        for r in rows:
            if r.system == name and r.status == "ok" and r.tokens:
                return r
    return None


def derive(
    rows: list[SystemRow],
    spec: RunSpec,
    probe: ProbeRow | None,
    windows: list[Window] | tuple = (),
    confidence: float = CONFIDENCE,
) -> list[DecodeRow]:
    """tokens_match against the reference; each row's step-time spread over the rounds; its
    ratio to each transformers row and to the roofline floor, with intervals paired by round
    at `confidence` (95% less what the stop rule's earlier looks spent, `rounds.look_confidence`).
    """
    ref = reference_row(rows)
    timed = [w for w in windows if w.status == "ok"]
    # A failed probe measured nothing: no floor, never a floor from a made-up rate.
    measured = probe if probe is not None and probe.status == "ok" else ProbeRow("not run")
    step_bytes = spec.weight_bytes + spec.kv_bytes
    floor, bound = roofline_ms(
        step_bytes, measured.bandwidth_gbs, spec.step_flops, measured.gemm_gflops
    )
    out = []
    for r in rows:
        d = token_fields(r, ref)
        found = spread([m for w in timed if w.system == r.system for m in w.steady_ms()])
        d["rounds"] = len({w.round for w in timed if w.system == r.system})
        ok = found is not None and r.status == "ok"
        if ok:
            d["ms_per_step"] = round(found.median_ms, 4)
            d["ms_q1"], d["ms_q3"] = round(found.q1_ms, 4), round(found.q3_ms, 4)
            d["ms_iqr"], d["ms_cv"] = round(found.iqr_ms, 4), round(found.cv, 4)
            d["tokens_per_s"] = round(spec.rows * 1e3 / found.median_ms, 2)
        ok = ok and bool(d["ms_per_step"])
        for column, theirs in (
            ("ratio_vs_hf_eager", "hf-eager"),
            ("ratio_vs_hf_compiled", "hf-static-compiled"),
        ):
            ours_ms, theirs_ms, processes = paired_rounds(timed, r.system, theirs)
            found = (
                ratio_interval(ours_ms, theirs_ms, processes, confidence)
                if ok and ours_ms
                else None
            )
            put_interval(d, column, found)
        own, _, processes = paired_rounds(timed, r.system, r.system)
        floor_ratio = (
            ratio_interval(own, [floor] * len(own), processes, confidence)
            if ok and own and floor
            else None
        )
        put_interval(d, "ratio_vs_floor", floor_ratio)
        if any(d.get(f"{c}_low") is not None for c in INTERVAL_COLUMNS):
            d["ci_level"] = round(confidence, 4)
        d.update(
            bandwidth_gbs=measured.bandwidth_gbs,
            bandwidth_median_gbs=measured.bandwidth_median_gbs,
            gemm_gflops=measured.gemm_gflops,
            weight_bytes=spec.weight_bytes,
            kv_bytes=spec.kv_bytes,
            step_bytes=step_bytes,
            step_flops=spec.step_flops,
            floor_ms=round(floor, 4) if floor else None,
            floor_bound=bound,
            rows=spec.rows,
            prompt_len=spec.prompt_len,
            steps=spec.steps,
            dtype=spec.dtype,
            device=spec.device,
            model=spec.model,
        )
        out.append(DecodeRow(**{**asdict(r), **d}))
    return mark_floor(out)


def token_fields(r: SystemRow, ref: SystemRow | None) -> dict:
    """A row's tokens against the reference's: match, first mismatch, digest."""
    d: dict = {"tokens_ref": ref.system if ref else None}
    if r.tokens and ref is not None:
        diff = first_difference(r.tokens, ref.tokens)
        if diff is None and r.deterministic is False:
            diff = "repeats of this system disagree with each other"
        d["tokens_match"], d["first_mismatch"] = diff is None, diff
    if r.tokens:
        d["tokens_digest"] = digest(r.tokens)
    return d


def mark_floor(rows: list[DecodeRow]) -> list[DecodeRow]:
    """Every row's floor_probe: ok, or failed once any row's step ran below the shared floor."""
    failed = next(
        (f for r in rows if (f := floor_beaten(r.system, r.ms_per_step, r.floor_ms))), None
    )
    return [replace(r, floor_probe=failed or ("ok" if r.floor_ms else None)) for r in rows]


def put_interval(row: dict, column: str, interval) -> None:
    """column, column_low, column_high from an Interval (NaN or no interval: None)."""
    ends = (
        (float("nan"),) * 3
        if interval is None
        else (interval.estimate, interval.low, interval.high)
    )
    for key, value in zip((column, f"{column}_low", f"{column}_high"), ends):
        row[key] = None if value != value else round(value, 4)


def digest(tokens: list[list[int]]) -> str:
    return hashlib.sha256(repr(tokens).encode()).hexdigest()[:12]


# -- gates --------------------------------------------------------------------------------------


def check_tokens_match(row: DecodeRow) -> None:
    if row.tokens_match is None:
        raise DecodeGateFailed(
            f"{row.system}: no reference tokens to compare with (run engine-eager or hf-eager too)"
        )
    if not row.tokens_match:
        raise DecodeGateFailed(
            f"{row.system}: greedy tokens differ from {row.tokens_ref} at {row.first_mismatch}"
        )


def best_engine_row(rows: list[DecodeRow]) -> DecodeRow | None:
    """The fastest engine row that ran and made the reference tokens, or None."""
    done = [
        r
        for r in rows
        if r.system in ENGINE_SYSTEMS
        and r.status == "ok"
        and r.tokens_match is not False
        and r.ms_per_step
    ]
    return min(done, key=lambda r: r.ms_per_step) if done else None


def ratio_of(row: DecodeRow, column: str):
    """The Interval a row holds in column, column_low, column_high (None: NaN)."""
    nan = float("nan")
    ends = [getattr(row, k) for k in (column, f"{column}_low", f"{column}_high")]
    return Interval(*(nan if v is None else v for v in ends), row.rounds)


def check_nothing_built(row: DecodeRow) -> None:
    if row.builds_measured is None:
        raise DecodeGateFailed(f"{row.system}: the worker did not report builds_measured")
    if row.builds_measured:
        raise DecodeGateFailed(
            f"{row.system}: {row.builds_measured} frames compiled during the measured repeats: "
            "the warm-up did not reach every shape, so these step times include compiling"
        )
