"""`compile_bench.derive` on made-up sweep rows whose answers are worked out by hand here.

derive sets speedup, saving, breakeven and worth_compiling of every row against the `off` row of
the same sweep; nothing here runs a worker. Without rounds (these tests) nothing has an interval,
so worth_compiling can only say it cannot tell, or None where nothing was compared.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from nanobench.compile.rows import CANT_TELL, CompileRow, derive

# off 10 ms; dynamic 4 ms after 3 s of compiling; static 12.5 ms after 1 s.
OFF = {"mode": "off", "status": "ok", "step_ms": 10.0, "compile_s": 0.0}
DYNAMIC = {"mode": "dynamic", "status": "ok", "step_ms": 4.0, "compile_s": 3.0}
STATIC = {"mode": "static", "status": "ok", "step_ms": 12.5, "compile_s": 1.0}


def rows(*made_up: dict) -> list[CompileRow]:
    return [CompileRow(**r) for r in made_up]


def test_a_faster_mode_gets_its_ratio_saving_and_breakeven():
    off, dynamic, _ = derive(rows(OFF, DYNAMIC, STATIC), horizon=10_000)
    # 10 / 4 = 2.5x; 10 - 4 = 6 ms a step; 3 s / 6 ms = 500 steps to pay back the compile.
    assert dynamic.speedup == 2.5
    assert dynamic.saving_per_step_ms == 6.0
    assert dynamic.breakeven_steps == 500.0
    # 10,000 steps save 60 s against 3 s, but one sample has no interval: no verdict either way.
    assert dynamic.worth_compiling == CANT_TELL
    assert (off.speedup, off.saving_per_step_ms, off.breakeven_steps) == (1.0, 0.0, None)
    assert off.worth_compiling is None


def test_a_slower_mode_never_breaks_even():
    *_, static = derive(rows(OFF, DYNAMIC, STATIC), horizon=10_000)
    # 10 / 12.5 = 0.8x; it loses 2.5 ms a step, so no number of steps pays back its 1 s.
    assert static.speedup == 0.8
    assert static.saving_per_step_ms == -2.5
    assert static.breakeven_steps is None
    assert static.worth_compiling == CANT_TELL


@pytest.mark.parametrize(("horizon", "worth"), [(499, False), (501, True), (10_000, True)])
def test_worth_compiling_turns_at_the_breakeven(horizon, worth):
    # 3 s of compiling at 6 ms saved a step: net = horizon * 0.006 - 3, zero at 500 steps.
    (_, dynamic) = derive(rows(OFF, DYNAMIC), horizon=horizon)
    # what a step must save: 3,000 ms / horizon (6.012 at 499 steps, 5.988 at 501)
    assert dynamic.saving_needed_ms == pytest.approx(3000 / horizon, abs=1e-6)
    assert (dynamic.saving_per_step_ms > dynamic.saving_needed_ms) is worth


def test_without_a_measured_off_row_nothing_is_derived():
    failed_off = {"mode": "off", "status": "timeout", "step_ms": None}
    for sweep in (rows(DYNAMIC, STATIC), rows(failed_off, DYNAMIC)):
        for r in derive(sweep, horizon=10_000):
            assert (r.speedup, r.saving_per_step_ms, r.breakeven_steps) == (None,) * 3
            assert r.worth_compiling is None


def test_a_mode_whose_every_step_built_has_no_ratio():
    all_built = {"mode": "static", "status": "ok", "step_ms": None, "compile_s": 9.0}
    (_, static) = derive(rows(OFF, all_built), horizon=10_000)
    assert (static.speedup, static.breakeven_steps, static.worth_compiling) == (
        None,
        None,
        None,
    )


def test_the_off_row_is_found_wherever_it_sits():
    dynamic, _, off = derive(rows(DYNAMIC, STATIC, OFF), horizon=10_000)
    assert dynamic.speedup == 2.5 and off.speedup == 1.0


def test_a_row_that_failed_after_its_first_pass_derives_nothing():
    # A window failed: the rows keep their first-pass step times, but nothing is compared.
    failed = {**DYNAMIC, "status": "error: --target 'x': timed window 1, step 0 broke ..."}
    off, dynamic, static = derive(rows(OFF, failed, STATIC), horizon=10_000)
    assert (dynamic.speedup, dynamic.saving_per_step_ms, dynamic.breakeven_steps) == (None,) * 3
    assert dynamic.worth_compiling is None and dynamic.saving_needed_ms is None
    # static still stands against a measured off: 10 / 12.5.
    assert static.speedup == 0.8
    failed_off = {**OFF, "status": "error: timed window 1"}
    for r in derive(rows(failed_off, DYNAMIC, STATIC), horizon=10_000):
        assert (r.speedup, r.breakeven_steps, r.worth_compiling) == (None, None, None)


def test_the_warm_start_is_priced_beside_the_cold_one():
    """Cold 30 s needs 3 ms a step over 10,000 steps; warm 5 s needs 0.5 ms; it saves ~1 ms."""
    from nanobench.harness.workers.rounds import Window

    def window(system: str, r: int, ms: float) -> Window:
        steps = (ms, ms * 1.001, ms * 0.999)
        return Window(system, r, "ok", steps, (0, 0, 0), (True, True, True))

    jitter = [0.0, 0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.0]
    windows = [w for r, j in enumerate(jitter, 1) for w in
               (window("off", r, 10.0 + j), window("dynamic", r, 9.0 + j))]  # fmt: skip
    dynamic_row = {**DYNAMIC, "compile_s": 30.0, "compile_warm_s": 5.0}
    _, dynamic = derive(rows(OFF, dynamic_row), horizon=10_000, windows=windows)
    assert 0.9 < dynamic.saving_per_step_ms_low <= dynamic.saving_per_step_ms_high < 1.1
    assert dynamic.worth_compiling == "no"
    assert dynamic.worth_compiling_warm == "yes"
    assert dynamic.saving_needed_warm_ms == pytest.approx(5.0 * 1e3 / 10_000)
    # 5 s at the saving's estimate (about 1 ms a step): about 5,000 steps
    assert dynamic.breakeven_steps_warm == pytest.approx(
        5.0 / (dynamic.saving_per_step_ms / 1e3), rel=1e-3
    )
    # the table says both where they differ, and the note gives the warm start's figures
    from rich.console import Console

    from reports.compile import render_compile
    from tests.helpers import shown_rows

    console = Console(width=200, record=True)
    render_compile(console, [_, dynamic], [], "t", horizon=10_000)
    text = console.export_text()
    # the verdict says the horizon it was priced at
    assert shown_rows(text, "mode")["dynamic"]["worth it at 10,000 steps"] == "no cold / yes warm"
    # one process's rounds: a bootstrap over them, its df the rounds less one, said once
    assert dynamic.speedup_variance == "rounds: 1 process"
    assert dynamic.speedup_df == dynamic.rounds - 1
    assert f"speedup intervals: process variance rounds: 1 process, {dynamic.rounds - 1} df" in text
    assert (
        "dynamic: warm start (a later process over the caches the first filled): compile 5.00 s"
        in text
    )
    # without a later worker there is no warm price, and nothing is made up
    _, alone = derive(rows(OFF, {**DYNAMIC, "compile_s": 30.0}), 10_000, windows)
    assert (alone.worth_compiling_warm, alone.breakeven_steps_warm) == (None, None)


def test_one_recompile_names_its_guard_once_and_several_name_their_first_and_last():
    from reports.compile import why

    guard = "384 != (16 + 16*___stack0)"
    one = CompileRow(mode="dynamic", status="ok", recompile_reasons=[guard], guard_kind="shape")
    lines = [ln for ln in why(one) if "recompile" in ln and "guard" in ln]
    assert lines == [f"dynamic: 1 recompile (shape guards); the failed guard: {guard}"]
    two = replace(one, recompile_reasons=["size 17 != 18", "size 24 != 25"])
    assert "first: size 17 != 18; last: size 24 != 25" in " ".join(why(two))
