"""Capture's timed comparison: the eager engine against the capturing engine, in rounds.

What it is: `engine_window` (one engine as a rounds system: an untimed prefill, then the run's
decode steps each timed, fed the tokens the correctness drive fed), `time_run` (both systems
through `nanobench.harness.workers.rounds.run_rounds`, their order rotating each round), `timing_of(windows)`
(a `capture.rows.RunTiming`: per side the median and IQR of step ms and the median run ms over
rounds; the ratio replayed / eager with its 95% interval paired by round and its verdict against
REPLAY_TARGET) and `ratio_notes` (the ratio's line per run length).
What it is not: the correctness drive (`capture_bench.drive` compares logits, untimed by
rounds) or a process manager. Both systems live in this one process, unlike compile's and
decode's fresh workers; that is sound here because neither side involves dynamo state (no
recompile budget, counters or compiler cache one side could leave to the other): both are
the same eager forward, one behind the recorder.
Invariant: one window at a time, the order rotating each round, so drift on a shared machine
hits both sides alike; every timed step is kept (`on_window`); the ratio is over rounds paired
by round and has no interval (nor a pass/fail verdict) under `stats.MIN_ROUNDS` rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nanobench.capture.rows import RunTiming
from nanobench.harness.runs.samples import SAMPLE_COLUMNS
from nanobench.harness.statistics.stats import Interval, spread, verdict_at_most
from nanobench.harness.workers.rounds import (
    Comparison,
    RoundPlan,
    Window,
    intervals,
    run_rounds,
    time_steps,
)

EAGER, REPLAYED = "eager", "replayed"
COMPARISON = Comparison("replayed/eager", REPLAYED, EAGER)
# A replay must not be slower than the eager step it stands for: at most 1.0x.
REPLAY_TARGET = 1.0
# `nanobench capture`'s defaults: MIN_ROUNDS (5) rounds give the first interval; the budget is
# shared by every run length (each gets an equal part), so four run lengths on a 2-core CPU
# add about 15 s: the longest (128 steps) stops at its part of the budget after 5 rounds.
ROUNDS, MAX_ROUNDS, REL_CI, BUDGET_S = 5, 10, 0.03, 20.0
DEFAULT_PLAN = RoundPlan(ROUNDS, MAX_ROUNDS, REL_CI, BUDGET_S)
# `capture-samples.csv`: compile's and decode's long format with the run length in front.
SAMPLE_HEADER = ["run_length", "system", *SAMPLE_COLUMNS]

Clock = Callable[[], float]


def ratio_of(row) -> Interval:
    """The Interval a RunTiming (or a capture RunRow) holds; a None end is NaN."""
    return Interval.from_ends(estimate=row.ratio_vs_eager, low=row.ratio_vs_eager_low,
                              high=row.ratio_vs_eager_high, rounds=row.rounds)  # fmt: skip


def _sync(device: str) -> None:
    if device == "cuda":
        import torch  # not at import: the CLI reads this module's defaults

        torch.cuda.synchronize()


def engine_window(
    system: str, engine, batch: list[list[int]], fed: list[list[int]], clock: Clock
) -> Callable[[int], Window]:
    """`engine` as a rounds system: each window prefills (untimed) and times len(fed) steps.

    A step's `built` is the graphs recorded during it (0 on the eager engine; 0 on a capturing
    one that the correctness drive already walked), and only steps that built nothing are steady.
    """
    device = engine.config.device
    graphs = engine.decode_graphs

    def recordings() -> int:
        return 0 if graphs is None else graphs.recordings

    def window(round_index: int) -> Window:
        engine.prefill(batch)
        feed = iter(fed)

        def step() -> int:
            before = recordings()
            engine.decode_step(next(feed)).argmax(-1).tolist()  # the host reads it, as serving does
            return recordings() - before

        try:
            ms, built = time_steps(step, len(fed), clock=clock, sync=lambda: _sync(device))
        except (RuntimeError, ValueError) as e:
            return Window(system, round_index, f"error: {str(e).splitlines()[0]}")
        finally:
            engine.release_all()
        return Window(system, round_index, "ok", ms, built, [b == 0 for b in built])

    return window


def time_run(
    eager,
    replayed,
    batch: list[list[int]],
    fed: list[list[int]],
    plan: RoundPlan,
    *,
    clock_for: Callable[[str], Clock] = lambda system: time.perf_counter,
    on_window: Callable[[Window], None] = lambda w: None,
) -> list[Window]:
    """Eager and replayed windows in rotating rounds until the ratio is tight (or plan ends)."""
    systems = {
        EAGER: engine_window(EAGER, eager, batch, fed, clock_for(EAGER)),
        REPLAYED: engine_window(REPLAYED, replayed, batch, fed, clock_for(REPLAYED)),
    }
    return run_rounds(systems, plan, [COMPARISON], on_window=on_window)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or value != value else round(value, digits)


def timing_of(windows: list[Window]) -> RunTiming:
    """Spread per side over every steady step of every round; the ratio paired by round."""
    ok = [w for w in windows if w.status == "ok"]
    sides = {}
    for system in (EAGER, REPLAYED):
        own = [w for w in ok if w.system == system]
        found = spread([m for w in own for m in w.steady_ms()])
        runs = spread([sum(w.steady_ms()) for w in own if w.steady_ms()])
        sides[system] = (found, runs.median_ms if runs else None)
    interval = intervals(ok, [COMPARISON])[COMPARISON.name]

    def side(system: str) -> list[float | None]:
        found, _ = sides[system]
        if found is None:
            return [None] * 4
        return [_round(v) for v in (found.median_ms, found.q1_ms, found.q3_ms, found.iqr_ms)]

    return RunTiming(
        interval.rounds,
        _round(sides[EAGER][1], 3),
        _round(sides[REPLAYED][1], 3),
        *side(EAGER),
        *side(REPLAYED),
        _round(interval.estimate),
        _round(interval.low),
        _round(interval.high),
        verdict_at_most(interval, REPLAY_TARGET),
    )


def ratio_notes(runs) -> list[str]:
    """The replay ratio per run length; on a CPU its verdict is informational, not a gate."""
    notes = []
    for r in runs:
        if r.ratio_vs_eager is None:
            notes.append(f"{r.steps} steps: replayed / eager not measured ({r.status})")
            continue
        span = (
            "no interval yet"
            if r.ratio_vs_eager_low is None
            else f"[{r.ratio_vs_eager_low:.3f}, {r.ratio_vs_eager_high:.3f}]"
        )
        line = (
            f"{r.steps} steps: replayed / eager {r.ratio_vs_eager:.3f}x {span} over "
            f"{r.rounds} rounds; replay_not_slower: {r.replay_not_slower}"
        )
        if r.device != "cuda":
            line += " (informational on cpu: no launches to save)"
        notes.append(line)
    return notes
