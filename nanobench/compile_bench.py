"""The compile sweep: each mode in a fresh worker, timed in interleaved rounds against `off`.

What it is: `predict(spec)` (builds and fall-back from the shape history alone, before
running), the pieces the worker (`nanobench.compile_session`)
uses, `interleaved_sweep(...)` (one live worker per mode, set up one at a time, then timed
windows in rotating rounds until every speedup's interval is tight), `sweep(...)` (one-shot:
a mode's first pass in a fresh process, what the GPU check runs) and `derive(rows, horizon,
windows)` (step-time spread; speedup, saving and breakeven against `off` with their 95%
intervals; `worth_compiling` yes / no / can't tell).
What it is not: the CLI or the report.
Invariant: builds are `counters["frames"]["ok"]`; compile seconds come from
`get_compilation_metrics()`; step time is steps that built nothing, and a ratio is paired by
round, never across rounds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from nanobench.cost.compile import breakeven_steps, predicts_fall_back
from nanobench.reduce_overhead import compile_kwargs, prediction_mode
from nanobench.rounds import Comparison, RoundPlan, Window

MODES = ("off", "dynamic", "static")
BACKENDS = ("inductor", "aot_eager", "eager")


def step_shapes(spec: dict) -> list[tuple[int, int]]:
    """(rows, width) each decode step presents: open, or through the bucket ladder."""
    from engine.buckets import DecodeBuckets
    from nanobench.cost.buckets import open_shapes

    shapes = open_shapes(spec["rows"], spec["prompt_len"], spec["steps"])
    if not spec["bucketed"]:
        return shapes
    buckets = DecodeBuckets(spec["max_batch"], spec["max_model_len"], spec["width_multiple"])
    return [buckets.shape_for(r, w) for r, w in shapes]


def recompile_limit() -> int:
    import torch._dynamo.config as dc

    return int(getattr(dc, "recompile_limit", getattr(dc, "cache_size_limit", 8)))


def predict(spec: dict, guard_kind: str) -> dict:
    history = step_shapes(spec)
    return {
        "shapes": len(set(history)),
        "predicted_fall_back": predicts_fall_back(
            history, prediction_mode(spec["mode"]), recompile_limit(), guard_kind
        ),
    }


def compiler_for(backend: str) -> Callable:
    def compile_with(fn, mode):
        import torch

        return torch.compile(fn, **compile_kwargs(mode, backend))

    return compile_with


def quiet_dynamo() -> None:
    """The recompile-limit warning is read from dynamo's records, not its log."""
    for name in ("torch._dynamo", "torch._inductor", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def short_reason(reason: str) -> str:
    first = reason.split("#")[0].strip()
    return first.split(": ", 1)[1] if first[:1].isdigit() and ": " in first else first


def derive(rows: list[dict], horizon: int, windows: list[Window] | tuple = ()) -> list[dict]:
    """Step-time spread, and speedup, saving and breakeven against `off` with their intervals.

    With windows (interleaved rounds) every timing is the rounds' steady samples and every
    comparison is paired by round; without (a one-shot run) the first pass's median stands
    alone and nothing has an interval, so `worth_compiling` cannot say yes or no.
    """
    from nanobench.common import FAIL, PASS
    from nanobench.rounds import paired_medians
    from nanobench.stats import (
        difference_interval,
        ratio_interval,
        rounds_to_decide,
        spread,
        verdict_at_least,
    )

    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    for r in rows:
        mode = r.get("mode")
        found = spread([m for w in timed if w.system == mode for m in w.steady_ms()])
        if found is not None:
            r["step_ms"] = round(found.median_ms, 4)
            r["step_ms_q1"], r["step_ms_q3"] = round(found.q1_ms, 4), round(found.q3_ms, 4)
            r["step_ms_iqr"], r["step_ms_cv"] = round(found.iqr_ms, 4), round(found.cv, 4)
            r["steady_steps"] = found.n
        r["rounds"] = len({w.round for w in timed if w.system == mode})
        r["step_kind"] = (
            "eager"
            if mode == "off"
            else "eager-after-fall-back"
            if r.get("fell_back")
            else "compiled"
        )
        # Past the limit dynamo still walks every cached entry's guards before running eagerly.
        r["guard_sets_checked"] = r.get("builds") if r.get("fell_back") else None
    off = next((r for r in rows if r.get("mode") == "off" and r.get("step_ms")), None)
    for r in rows:
        for key in INTERVAL_COLUMNS:
            r[key] = None
        r["worth_compiling"] = None
        if off is None or not r.get("step_ms"):
            continue
        off_ms, mode_ms = paired_medians(timed, "off", r["mode"])
        if r is off or not off_ms:
            speedup = ratio_interval([off["step_ms"]], [r["step_ms"]])
            saving = difference_interval([off["step_ms"]], [r["step_ms"]])
        else:
            speedup = ratio_interval(off_ms, mode_ms)
            saving = difference_interval(off_ms, mode_ms)
        put(r, "speedup", speedup)
        put(r, "saving_per_step_ms", saving)
        if r["mode"] == "off":
            continue
        compile_s = r.get("compile_s") or 0.0
        # breakeven falls as the saving grows: its low end comes from the saving's high end.
        r["breakeven_steps"] = steps_or_none(breakeven_steps(compile_s, saving.estimate / 1e3))
        r["breakeven_steps_low"] = steps_or_none(breakeven_steps(compile_s, saving.high / 1e3))
        r["breakeven_steps_high"] = steps_or_none(breakeven_steps(compile_s, saving.low / 1e3))
        # Worth it when horizon * saving > compile_s: the saving must beat compile_s / horizon.
        needed_ms = compile_s * 1e3 / horizon
        verdict = verdict_at_least(saving, needed_ms)
        r["worth_compiling"] = {PASS: "yes", FAIL: "no"}.get(verdict, CANT_TELL)
        r["worth_rounds_to_decide"] = rounds_to_decide(saving, needed_ms)
        r["saving_needed_ms"] = round(needed_ms, 6)
    return rows


CANT_TELL = "can't tell at this noise"
INTERVAL_COLUMNS = (
    "speedup",
    "speedup_low",
    "speedup_high",
    "saving_per_step_ms",
    "saving_per_step_ms_low",
    "saving_per_step_ms_high",
    "breakeven_steps",
    "breakeven_steps_low",
    "breakeven_steps_high",
    "worth_rounds_to_decide",
    "saving_needed_ms",
)


def put(row: dict, name: str, interval) -> None:
    """name, name_low, name_high from an Interval; NaN ends (no interval) become None."""
    for key, value in (
        (name, interval.estimate),
        (f"{name}_low", interval.low),
        (f"{name}_high", interval.high),
    ):
        row[key] = None if value != value else round(value, 4)


def steps_or_none(steps: float) -> float | None:
    """Breakeven steps rounded; None for never (inf) or no interval (NaN)."""
    return None if steps != steps or steps == float("inf") else round(steps, 1)


def cache_env(cache: str, mode: str, device: str) -> tuple[dict[str, str], str | None]:
    """Cold: a fresh Inductor cache per mode (returned for cleanup). Warm: the one shared
    directory for this machine's code-generation setting (`nanobench.inductor_cache`)."""
    from nanobench.inductor_cache import fresh_dir, warm_dir

    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if cache == "cold":
        fresh = fresh_dir(mode)
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh
        return env, fresh
    env["TORCHINDUCTOR_CACHE_DIR"] = str(warm_dir(device))
    return env, None


def annotate(row: dict, spec: dict, mode: str) -> dict:
    row.setdefault("mode", mode)
    for key in ("cache", "device", "backend", "bucketed"):
        row[key] = spec[key]
    return row


def sweep(
    spec: dict,
    modes: list[str],
    *,
    timeout: float,
    on_progress: Callable[[str, dict], None] = lambda m, e: None,
    on_row: Callable[[dict], None] = lambda r: None,
) -> list[dict]:
    """One-shot: each mode's first pass in its own fresh process, one after another."""
    import shutil

    from nanobench.fresh import run_fresh

    rows = []
    for mode in modes:
        env, fresh = cache_env(spec["cache"], mode, spec["device"])
        if spec.get("trace"):
            env["TORCH_TRACE"] = os.path.join(spec["trace"], mode)
        try:
            row = run_fresh(
                "nanobench.compile_worker",
                {**spec, "mode": mode},
                timeout=timeout,
                env=env,
                on_progress=lambda e, m=mode: on_progress(m, e),
            )
        finally:
            if fresh:
                shutil.rmtree(fresh, ignore_errors=True)
        rows.append(annotate(row, spec, mode))
        on_row(row)
    return rows


def comparisons(modes: list[str]) -> list[Comparison]:
    """Each compiled mode's speedup: off's step time over its own."""
    if "off" not in modes:
        return []
    return [Comparison(f"{m}", "off", m) for m in modes if m != "off"]


def interleaved_sweep(
    spec: dict,
    modes: list[str],
    plan: RoundPlan,
    *,
    timeout: float,
    on_status: Callable[[str], None] = lambda s: None,
    on_row: Callable[[dict], None] = lambda r: None,
    on_window: Callable[[Window], None] = lambda w: None,
    on_round: Callable[[int, dict], None] = lambda r, i: None,
) -> tuple[list[dict], list[Window]]:
    """A live worker per mode, set up one at a time (no two compile at once), then rounds.

    on_row sees each row when its worker is ready and again when it closes; on_window every
    window, the first pass (round 0) included. Whatever ends the sweep (an interrupt too),
    every worker's process group is killed and every cold cache directory removed.
    """
    import shutil

    from nanobench.fresh import LiveWorker
    from nanobench.rounds import first_pass_window, live_window, run_rounds

    workers: dict[str, LiveWorker] = {}
    rows: dict[str, dict] = {}
    fresh_dirs: list[str] = []
    windows: list[Window] = []

    def keep(window: Window) -> None:
        windows.append(window)
        if window.status != "ok":
            rows[window.system]["status"] = window.status
        on_window(window)

    try:
        for mode in modes:
            on_status(f"{mode}: starting a fresh process")
            env, fresh = cache_env(spec["cache"], mode, spec["device"])
            if spec.get("trace"):
                env["TORCH_TRACE"] = os.path.join(spec["trace"], mode)
            if fresh:
                fresh_dirs.append(fresh)
            worker = LiveWorker(
                "nanobench.compile_worker",
                {**spec, "mode": mode},
                env=env,
                on_progress=lambda e, m=mode: on_status(
                    f"{m}: first pass, step {e.get('step')}/{e.get('steps')}"
                    + (" (building)" if e.get("built") else "")
                ),
            )
            workers[mode] = worker
            row = rows[mode] = annotate(worker.start(timeout), spec, mode)
            if row.get("status") == "ok":
                keep(first_pass_window(mode, row))
            on_row(row)
        live = {
            m: live_window(w, m, timeout) for m, w in workers.items() if rows[m]["status"] == "ok"
        }
        run_rounds(live, plan, comparisons(modes), on_window=keep, on_round=on_round)
        for mode in live:
            final = workers[mode].close(timeout)
            if rows[mode]["status"] == "ok":
                rows[mode].update(final)
            on_row(rows[mode])
    finally:
        for worker in workers.values():
            worker.kill()
        for fresh in fresh_dirs:
            shutil.rmtree(fresh, ignore_errors=True)
    return list(rows.values()), windows


def spec_for(**kw) -> dict:
    base = dict(
        rows=4,
        max_batch=8,
        prompt_len=16,
        steps=16,
        bucketed=False,
        width_multiple=128,
        cache="cold",
        backend="inductor",
        device="cpu",
        dtype="float32",
        seed=0,
        decode_path="planned",
        threads=0,
        block_size=16,
        target="",
        trace="",
    )
    base.update(kw)
    base.setdefault("max_model_len", 2048)
    base["model"] = str(base["model"])
    return base
