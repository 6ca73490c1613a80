"""The compile sweep's row: one mode's first pass, its rounds and what is derived from them.

What it is: `CompileRow` (the CSV's columns, in order: PyTorch's dynamo harness columns where
they mean the same thing, then nanobench's), `FirstPass` (what a worker's first pass reports), `from_worker(payload)` (a worker's JSON back into
a row, loudly), and `derive(rows, horizon, windows)` (step-time spread; speedup, saving and
breakeven against `off` with their 95% intervals; `worth_compiling` yes / no / can't tell; a
`suspect` note when an interval claims what the configuration cannot produce).
What it is not: a measurement. The worker (`compile.session`) measures; this only names and
combines what it reported.
Invariant: a worker's `ok` payload carries every first-pass field under its own name; a
renamed or dropped field fails here, naming it, never as a column that reads as None or 0.
A ratio is paired by round, never across rounds; a failed row (or a sweep whose off failed)
derives nothing: speedup, saving, breakeven and worth compiling stay empty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from nanobench.cost.compile import breakeven_steps
from nanobench.harness.runs.rows import RowSchemaError, rebuild
from nanobench.harness.statistics.stats import (
    CONFIDENCE,
    difference_interval,
    processes_bind,
    ratio_interval,
    rounds_to_decide,
    spread,
    verdict_at_least,
)
from nanobench.harness.statistics.verdicts import FAIL, PASS
from nanobench.harness.workers.rounds import Comparison, Window, paired_rounds, window_pool

CANT_TELL = "can't tell at this noise"


@dataclass(frozen=True)
class CompileRow:
    """One mode of the sweep. Measured fields are None only in a failed row (status not ok)."""

    # PyTorch's benchmarks/dynamo harness columns, same meaning
    speedup: float | None = None
    abs_latency: float | None = None  # ms: step_ms under the harness's name
    compilation_latency: float | None = None  # s: compile_s under the harness's name
    calls_captured: int | None = None
    unique_graphs: int | None = None
    graph_breaks: int | None = None
    fallbacks_to_eager: int | None = None
    # nanobench's
    mode: str = ""
    side: str = ""  # before | after in a before-and-after run (--vs, --vs-path), else ""
    status: str = "ok"
    shapes: int | None = None
    predicted_shapes: int | None = None
    builds: int | None = None  # counters["frames"]["ok"]
    recompiles: int | None = None  # builds after a frame's first: dynamo's recompile reasons
    # One call of a fresh forward, as `explain` counts it (the first worker's probe; None else)
    graphs_per_call: int | None = None
    breaks_per_call: int | None = None  # dynamo's graph_break_count: graphs - 1
    break_sites: int | None = None  # source lines a break happened at
    break_lines: list[str] | None = None  # each site's file:line, most hit first
    break_hits: list[int] | None = None  # times one call passed each site
    reuse: float | None = None
    fell_back: bool | None = None
    predicted_fall_back: bool | None = None
    guard_kind: str | None = None
    predicted_guard_kind: str | None = None
    # which check the fall-back prediction came from: a dry run of dynamo alone over the same
    # steps (a target's), or the rule over the shape history (the engine's)
    predicted_by: str | None = None
    recompile_reasons: list[str] | None = None
    recompile_limit: int | None = None
    compile_s: float | None = None  # get_compilation_metrics(): entire_frame_compile_time_s
    inductor_s: float | None = None
    build_steps_s: float | None = None
    step_ms: float | None = None  # median of the steady steps of every round's window
    step_ms_q1: float | None = None
    step_ms_q3: float | None = None
    step_ms_iqr: float | None = None
    step_ms_cv: float | None = None  # std / mean of the same samples
    steady_steps: int | None = None
    rounds: int | None = None  # timed windows this mode ran (interleaved with the other modes)
    step_kind: str | None = None  # eager | compiled | eager-after-fall-back
    guard_sets_checked: int | None = None  # after a fall-back: guard sets checked per call
    speedup_low: float | None = None  # 95% bootstrap interval over rounds, paired by round
    speedup_high: float | None = None
    speedup_df: float | None = None  # the t quantile's degrees of freedom
    speedup_variance: str | None = None  # rounds, own processes, or pooled over the run's modes
    history: str | None = None  # this code's earlier runs here: none yet, how many, since when
    ci_level: float | None = None  # the intervals' level: 0.95 less what earlier looks spent
    saving_per_step_ms: float | None = None  # gm over rounds of off's medians minus this one's
    saving_per_step_ms_low: float | None = None
    saving_per_step_ms_high: float | None = None
    saving_needed_ms: float | None = None  # compile_s / horizon: what a step must save
    breakeven_steps: float | None = None
    breakeven_steps_low: float | None = None
    breakeven_steps_high: float | None = None
    worth_compiling: str | None = None  # yes | no | can't tell at this noise
    # The warm start's price: a later worker's compile seconds over the caches the first filled
    compile_warm_s: float | None = None
    saving_needed_warm_ms: float | None = None
    breakeven_steps_warm: float | None = None
    worth_compiling_warm: str | None = None  # yes | no | can't tell, priced at compile_warm_s
    worth_rounds_to_decide: int | None = None  # more rounds likely to decide a can't tell
    worth_processes_bind: bool | None = None  # no number of rounds would: the processes disagree
    builds_in_windows: int | None = None  # frames built during the timed windows
    suspect: str | None = None  # what the interval claims and the configuration cannot produce
    load_note: str | None = None  # timed while other processes held cores the threads needed
    cache: str | None = None
    fxgraph_cache_hit: int | None = None
    fxgraph_cache_miss: int | None = None
    backend: str | None = None
    bucketed: bool | None = None
    torch_version: str | None = None
    device: str | None = None
    threads: int | None = None
    builds_per_step: list[int] | None = None
    step_ms_all: list[float] | None = None
    # --target, reduce-overhead, remedies and --trace
    target: str = ""
    cudagraph_skips: int | None = None
    cudagraph_rerecords: int | None = None
    record_s: float | None = None  # tune's capture list: its CUDA graphs recorded up front
    remedies: list[str] | None = None
    trace_index: str | None = None
    trace_dir: str | None = None
    expected_value_guards: list[str] | None = None
    growing: list[str] | None = None  # a target's step inputs: which dims grew, from..to
    recompile_steps: list[int] | None = None  # a target's: the step (from 0) of each reason
    more_steps: str | None = None  # every step built: what more --steps do, by a longer dry run
    worker_s: float | None = None
    setup_s: float | None = None  # the first worker's spawn to ready, the parent's clock
    later_setup_s: float | None = None  # a later worker's, median: what each process costs
    # each first-pass step's output: per row, argmax and top logits (`output_check`); a --try
    # side's are held against plain's, then dropped from the CSV and JSON
    outputs: list | None = None


@dataclass(frozen=True)
class FirstPass:
    """What every worker's ok first pass reports (the engine's session and a target's alike),
    under CompileRow's names; built in one place (`compile.ledger.first_pass`)."""

    mode: str
    status: str
    shapes: int
    predicted_shapes: int
    builds: int
    recompiles: int
    unique_graphs: int
    calls_captured: int
    graph_breaks: int
    fallbacks_to_eager: int
    reuse: float | None
    fell_back: bool
    predicted_fall_back: bool
    guard_kind: str
    predicted_guard_kind: str
    expected_value_guards: list[str]
    recompile_reasons: list[str]
    recompile_limit: int
    compile_s: float
    inductor_s: float
    fxgraph_cache_hit: int
    fxgraph_cache_miss: int
    cudagraph_skips: int | None
    cudagraph_rerecords: int | None
    torch_version: str
    threads: int
    build_steps_s: float
    step_ms_all: list[float]
    builds_per_step: list[int]
    step_ms: float | None
    steady_steps: int
    outputs: list | None  # each step's top logits per row (`output_check.fingerprint`)


FIRST_PASS = tuple(f.name for f in fields(FirstPass))


def from_worker(payload: Mapping[str, Any], mode: str) -> CompileRow:
    """A worker's row: unknown keys fail; an ok row lacking a first-pass field fails too."""
    row = rebuild(CompileRow, {"mode": mode, **payload})
    if row.status == "ok":
        missing = [k for k in FIRST_PASS if k not in payload]
        if missing:
            raise RowSchemaError(f"CompileRow: payload lacks field {missing[0]!r}")
    return row


def derive(
    rows: list[CompileRow],
    horizon: int,
    windows: list[Window] | tuple = (),
    confidence: float = CONFIDENCE,
    history: Mapping | None = None,
) -> list[CompileRow]:
    """Step-time spread, and speedup, saving and breakeven against `off` with their intervals.

    With windows (interleaved rounds) every timing is the rounds' steady samples and every
    comparison is paired by round; without (a one-shot run) the first pass's median stands
    alone and nothing has an interval, so `worth_compiling` cannot say yes or no. `confidence`
    is the level of every interval (`rounds.look_confidence` of the rounds run); `history[mode]`
    (`history.Calibration`) lends a mode's speedup its earlier runs' spread on this machine.
    """
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    spread_rows = []
    for r in rows:
        found = spread([m for w in timed if w.system == r.mode for m in w.steady_ms()])
        times = {}
        if found is not None:
            times = dict(
                step_ms=round(found.median_ms, 4),
                step_ms_q1=round(found.q1_ms, 4),
                step_ms_q3=round(found.q3_ms, 4),
                step_ms_iqr=round(found.iqr_ms, 4),
                step_ms_cv=round(found.cv, 4),
                steady_steps=found.n,
            )
        r = replace(
            r,
            **times,
            rounds=len({w.round for w in timed if w.system == r.mode}),
            step_kind="eager"
            if r.mode == "off"
            else ("eager-after-fall-back" if r.fell_back else "compiled"),
            # Past the limit dynamo still walks the frame's cached entries' guards (as many as
            # the limit) before running it eagerly; builds count every frame's, so not those.
            guard_sets_checked=r.recompile_limit if r.fell_back else None,
            **{k: None for k in (*INTERVAL_FIELDS, "worth_compiling", "suspect")},
        )
        spread_rows.append(replace(r, abs_latency=r.step_ms, compilation_latency=r.compile_s))
    # A failed row (its own or off's) is compared with nothing: no speedup, saving, breakeven
    # or verdict is derived from a sweep that did not finish.
    off = next((r for r in spread_rows if r.mode == "off" and r.step_ms and r.status == "ok"), None)
    out = []
    for r in spread_rows:
        if off is None or not r.step_ms or r.status != "ok":
            out.append(r)
            continue
        off_ms, mode_ms, processes = paired_rounds(timed, "off", r.mode)
        if r is off or not off_ms:
            out.append(compared(r, [off.step_ms], [r.step_ms], horizon))
        else:
            pool = window_pool(timed, Comparison(r.mode, "off", r.mode))
            lent = (history or {}).get(r.mode)
            row = compared(r, off_ms, mode_ms, horizon, processes, confidence, pool, lent)
            out.append(replace(row, history=lent.describe()) if lent is not None else row)
    return out


def suspect(row: CompileRow, speedup) -> str | None:
    """A note when the speedup's interval claims what this configuration cannot produce.

    The eager backend runs the same aten kernels as `off`, behind dynamo's guards: its step can
    be slower than off's, never faster by a margin. An interval wholly above 1 there is noise the
    interval did not hold (a process effect, a loaded neighbour), so the row says so.
    """
    if row.backend == "eager" and speedup.low > 1:
        return (
            f"speedup [{speedup.low:.2f}, {speedup.high:.2f}] wholly above 1 with the eager "
            "backend, which runs off's kernels behind guards: noise, not compiling "
            "(more --processes, a quieter machine)"
        )
    return None


def compared(
    row: CompileRow,
    off_ms: list,
    mode_ms: list,
    horizon: int,
    processes: list | None = None,
    confidence: float = CONFIDENCE,
    pool=None,
    history=None,
) -> CompileRow:
    """One row against off: speedup and saving intervals (the machine's history, else the run's
    process pool lent to both, `rounds.window_pool`); breakeven and verdict unless off."""
    speedup = ratio_interval(off_ms, mode_ms, processes, confidence, pool, history)
    saving = difference_interval(off_ms, mode_ms, processes, confidence, pool, history)
    row = replace(row, **ends("speedup", speedup), **ends("saving_per_step_ms", saving))
    if math.isfinite(speedup.low):
        df = round(speedup.df, 2) if math.isfinite(speedup.df) else None
        row = replace(row, speedup_df=df, speedup_variance=speedup.variance_from or None)
    if row.speedup_low is not None:
        row = replace(row, ci_level=round(confidence, 4))
    if row.mode == "off":
        return row
    row = replace(row, suspect=suspect(row, speedup))
    compile_s = row.compile_s or 0.0  # an ok row's compile_s is 0.0 when nothing compiled
    # Worth it when horizon * saving > compile_s: the saving must beat compile_s / horizon.
    needed_ms = compile_s * 1e3 / horizon
    verdict = verdict_at_least(saving, needed_ms)
    if row.compile_warm_s is not None:
        warm_ms = row.compile_warm_s * 1e3 / horizon
        row = replace(
            row,
            saving_needed_warm_ms=round(warm_ms, 6),
            breakeven_steps_warm=steps_or_none(
                breakeven_steps(row.compile_warm_s, saving.estimate / 1e3)
            ),
            worth_compiling_warm={PASS: "yes", FAIL: "no"}.get(
                verdict_at_least(saving, warm_ms), CANT_TELL
            ),
        )
    return replace(
        row,
        # breakeven falls as the saving grows: its low end comes from the saving's high end.
        breakeven_steps=steps_or_none(breakeven_steps(compile_s, saving.estimate / 1e3)),
        breakeven_steps_low=steps_or_none(breakeven_steps(compile_s, saving.high / 1e3)),
        breakeven_steps_high=steps_or_none(breakeven_steps(compile_s, saving.low / 1e3)),
        worth_compiling={PASS: "yes", FAIL: "no"}.get(verdict, CANT_TELL),
        worth_rounds_to_decide=rounds_to_decide(saving, needed_ms),
        worth_processes_bind=processes_bind(saving, needed_ms),
        saving_needed_ms=round(needed_ms, 6),
    )


INTERVAL_FIELDS = tuple(
    f.name
    for f in fields(CompileRow)
    if f.name.startswith(("speedup", "saving_per_step_ms", "breakeven_steps"))
) + (
    "worth_rounds_to_decide",
    "worth_processes_bind",
    "saving_needed_ms",
    "ci_level",
    "saving_needed_warm_ms",
    "worth_compiling_warm",
)


def ends(name: str, interval) -> dict[str, float | None]:
    """name, name_low, name_high from an Interval; NaN ends (no interval) become None."""
    values = (interval.estimate, interval.low, interval.high)
    keys = (name, f"{name}_low", f"{name}_high")
    return {k: None if v != v else round(v, 4) for k, v in zip(keys, values)}


def steps_or_none(steps: float) -> float | None:
    """Breakeven steps rounded; None for never (inf) or no interval (NaN)."""
    return None if steps != steps or steps == float("inf") else round(steps, 1)
