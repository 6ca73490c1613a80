"""The compile sweep's verdicts from rounds of known step times, without a worker.

Rows are what a worker's first pass reports; windows carry per-round medians chosen by hand,
so speedup, saving, breakeven and `worth_compiling` follow by arithmetic written in each test.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from nanobench.compile.gates import amortised_gate
from nanobench.compile.rows import CANT_TELL, CompileRow, derive
from nanobench.compile.windows import steady_mask
from nanobench.harness.workers.rounds import Window


def windows(ms_by_round: dict[str, list[float]]) -> list[Window]:
    return [
        Window(mode, r + 1, "ok", (ms, ms), (0, 0), (True, True))
        for mode, values in ms_by_round.items()
        for r, ms in enumerate(values)
    ]


def rows(compile_s: float = 2.0, fell_back: bool = False, builds: int = 1, step_ms=None):
    off_ms, static_ms = step_ms or (None, None)
    return [
        CompileRow(mode="off", builds=0, compile_s=0.0, fell_back=False, step_ms=off_ms),
        CompileRow(
            mode="static",
            builds=builds,
            compile_s=compile_s,
            fell_back=fell_back,
            step_ms=static_ms,
            recompile_limit=8,
        ),
    ]


def test_a_clear_saving_is_worth_compiling_with_a_breakeven_interval():
    # off 10 ms, static 8 ms every round: speedup 1.25, saving 2 ms, breakeven 2 s / 2 ms = 1000
    got = derive(rows(), 10_000, windows({"off": [10.0] * 5, "static": [8.0] * 5}))
    static = got[1]
    assert (static.speedup, static.speedup_low, static.speedup_high) == (1.25,) * 3
    assert static.saving_per_step_ms == pytest.approx(2.0)
    assert static.breakeven_steps == pytest.approx(1000.0)
    assert static.breakeven_steps_low == static.breakeven_steps_high == pytest.approx(1000.0)
    # needs 2 s / 10,000 steps = 0.2 ms a step; saves 2 ms
    assert static.saving_needed_ms == pytest.approx(0.2)
    assert static.worth_compiling == "yes" and static.step_kind == "compiled"
    assert amortised_gate(static, 10_000).verdict == "pass"
    # a horizon of 500 steps repays only 1 s of the 2: no
    assert (
        derive(rows(), 500, windows({"off": [10.0] * 5, "static": [8.0] * 5}))[1].worth_compiling
        == "no"
    )


def test_a_saving_around_what_the_horizon_needs_cannot_tell_and_says_how_long_to_decide():
    # saving per round 0.1, 0.3, 0.15, 0.25, 0.2 ms against 0.2 needed: straddles it
    got = derive(
        rows(),
        10_000,
        windows({"off": [10.0] * 5, "static": [9.9, 9.7, 9.85, 9.75, 9.8]}),
    )[1]
    # the saving is off's geometric mean less static's: 10 - (9.9 9.7 9.85 9.75 9.8)^(1/5)
    gm = (9.9 * 9.7 * 9.85 * 9.75 * 9.8) ** 0.2
    assert got.saving_per_step_ms == pytest.approx(10.0 - gm, abs=1e-4)
    assert got.saving_per_step_ms_low < 0.2 < got.saving_per_step_ms_high
    assert got.worth_compiling == CANT_TELL
    # breakeven runs the other way from the saving: its low end is the saving's high end
    assert got.breakeven_steps_low == pytest.approx(2000 / got.saving_per_step_ms_high, 0.01)
    gate = amortised_gate(got, 10_000)
    assert gate.verdict == "inconclusive" and gate.target == pytest.approx(0.2)


def test_a_slower_compiled_step_never_breaks_even():
    got = derive(rows(), 10_000, windows({"off": [8.0] * 5, "static": [10.0] * 5}))[1]
    assert got.worth_compiling == "no" and got.breakeven_steps is None
    assert got.speedup == pytest.approx(0.8)


def test_the_static_arm_past_the_limit_is_labelled_eager_after_fall_back():
    # Two frames built, one of them up to the limit: a call checks that frame's 8 cached guard
    # sets, not one per build.
    got = derive(
        rows(fell_back=True, builds=10), 10_000, windows({"off": [10.0] * 5, "static": [10.0] * 5})
    )
    assert got[1].step_kind == "eager-after-fall-back"
    assert got[1].guard_sets_checked == 8
    assert got[0].step_kind == "eager" and got[0].guard_sets_checked is None


def test_steady_steps_built_nothing_and_past_a_fall_back_come_after_the_last_build():
    assert steady_mask([1, 0, 0, 1, 0], fell_back=False) == [False, True, True, False, True]
    # builds at steps 1, 2, 4, then dynamo gave up: step 3 ran a graph, 5 and 6 ran eagerly
    assert steady_mask([1, 1, 0, 1, 0, 0], fell_back=True) == [False] * 4 + [True, True]


def test_without_rounds_nothing_has_an_interval_and_nothing_is_decided():
    one_shot = rows(step_ms=(10.0, 5.0))
    got = derive(one_shot, 10_000)[1]
    assert got.speedup == 2.0 and got.speedup_low is None
    assert got.worth_compiling == CANT_TELL


def backend_rows(backend: str) -> list[CompileRow]:
    return [replace(r, backend=backend) for r in rows()]


def test_an_eager_backend_speedup_wholly_above_1_is_suspect_and_a_straddling_one_is_not():
    # off 10 ms, static 8 ms every round: 1.25x [1.25, 1.25], which eager cannot produce
    clear = windows({"off": [10.0] * 5, "static": [8.0] * 5})
    eager = derive(backend_rows("eager"), 10_000, clear)[1]
    assert eager.suspect and "eager backend" in eager.suspect and "[1.25, 1.25]" in eager.suspect
    # the same rounds under inductor are a plausible speedup; off is never suspect
    inductor = derive(backend_rows("inductor"), 10_000, clear)
    assert inductor[1].suspect is None and inductor[0].suspect is None
    # per-round speedups 1.25, 0.8, ...: the interval straddles 1, nothing to flag
    mixed = windows({"off": [10.0, 8.0] * 3, "static": [8.0, 10.0] * 3})
    assert derive(backend_rows("eager"), 10_000, mixed)[1].suspect is None


def test_rounds_from_two_processes_take_the_hierarchical_interval():
    # Process 1: static 8 ms against off 10 every round (1.25x); process 2: 10 against 10 (1x).
    # One process's rounds show nothing of the other's: flat, the interval would be a point
    # per process; over both it must hold the two process means, log 1.25 / 2 either side.
    spread_rounds = [
        replace(w, process=1 + (w.round - 1) % 2)
        for w in windows({"off": [10.0] * 8, "static": [8.0, 10.0] * 4})
    ]
    got = derive(rows(), 10_000, spread_rounds)[1]
    assert got.speedup == pytest.approx(math.sqrt(1.25), abs=1e-4)
    assert got.speedup_low < 1.0 < 1.25 < got.speedup_high
    assert got.worth_compiling == CANT_TELL


def test_a_second_process_is_a_warm_start_only_under_a_backend_that_keeps_a_cache():
    """Under --backend eager nothing is cached for process 2 to read: its compile seconds are a
    second cold compile (2.88 s against a 0.25 s first, seen by a user as a regression), never
    a warm start; under Inductor they are."""
    from nanobench.compile.bench import later_row

    for backend, warm in (("eager", None), ("aot_eager", None), ("inductor", 2.88)):
        first = CompileRow(mode="dynamic", status="ok", backend=backend, compile_s=0.25)
        later = CompileRow(mode="dynamic", status="ok", backend=backend, compile_s=2.88)
        assert later_row(first, later, 2).compile_warm_s == warm, backend


def test_every_step_built_never_advises_more_steps_unchecked():
    # No steady step and no word from a longer dry run (the engine's rows): the gate must not
    # send the user into the fall-back with "more --steps"; it says the limit's 8 and that the
    # step it would fall back at is unchecked.
    static = rows(builds=8)[1]
    why = amortised_gate(static, 10_000).detail
    assert why.startswith("every step built: no steady step to time; unchecked whether")
    assert "past recompile_limit 8" in why and "(more --steps)" not in why
    # A target's row carries what a dry run over more steps did: the gate quotes it.
    said = "fall back past recompile_limit 8 at step 8: a dry run over 10 steps built 9 (...)"
    why = amortised_gate(replace(static, more_steps=said), 10_000).detail
    assert why == f"every step built: no steady step to time; more --steps would {said}"
