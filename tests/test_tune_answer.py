"""tune's answer: the cheapest start at each horizon (against a brute-force scan of the
horizons, not the envelope's own arithmetic), and the lines to paste, executed and held to
what a worker of the same configuration sets and calls."""

from __future__ import annotations

import pytest

from nanobench.tune.paste import paste_lines
from nanobench.tune.rows import ConfigRow, decision, envelope, paired_ratio, rivals, total_cost_s
from nanobench.tune.space import Config
from nanobench.tune.words import decision_lines


def cheapest_by_scan(costs, steps):
    return min(costs, key=lambda c: (total_cost_s(c[1], c[2], steps), c[2]))[0]


@pytest.mark.parametrize("seed", range(20))
def test_the_envelope_is_the_cheapest_start_at_every_horizon(seed):
    import random

    rng = random.Random(seed)
    costs = [("off", 0.0, rng.uniform(3, 6))]
    costs += [(f"c{i}", rng.uniform(5, 60), rng.uniform(1, 6)) for i in range(rng.randint(1, 6))]
    changes = envelope(costs)
    assert changes[0] == (0.0, "off")
    for steps in [0, 1, 10, 100, 1_000, 10_000, 31_337, 100_000, 10**6, 10**8]:
        chosen = [name for at, name in changes if at <= steps][-1]
        want = cheapest_by_scan(costs, steps)
        assert total_cost_s(*next(c[1:] for c in costs if c[0] == chosen), steps) == pytest.approx(
            total_cost_s(*next(c[1:] for c in costs if c[0] == want), steps)
        ), (steps, changes)


def test_the_crossing_is_where_the_two_costs_meet():
    # off 5 ms a step, compiled 3 ms after 20 s: they meet at 20 / 0.002 = 10,000 steps
    changes = envelope([("off", 0.0, 5.0), ("dynamic", 20.0, 3.0)])
    assert changes == [(0.0, "off"), (pytest.approx(10_000), "dynamic")]


# off 1 ms a step; dynamic 0.5 ms after a 10 s warm compile: they cross at 10 / 0.0005 = 20,000
# steps. dynamic / off paired by round: 0.5 [0.45, 0.55]; off / dynamic its inverse.
LINES = [("off", 0.0, 1.0), ("dynamic", 10.0, 0.5)]
RATIOS = {("dynamic", "off"): (0.5, 0.45, 0.55), ("off", "dynamic"): (2.0, 1 / 0.55, 1 / 0.45)}


def ratio(a, b):
    return RATIOS[(a, b)]


@pytest.mark.parametrize(
    ("steps", "choice", "tied"),
    [
        # off 10 s; dynamic 10 + 10,000 x 1 ms x [0.45, 0.55] = [14.5, 15.5] s: decided
        (10_000, "off", ()),
        # off 19 s; dynamic 10 + 19,000 x [0.45, 0.55] ms = [18.55, 20.45] s: 18.55 < 19
        (19_000, "off", (("dynamic", 18.55, 20.45),)),
        # dynamic 10.5 s; off 21,000 x 0.5 ms x [1/0.55, 1/0.45] = [19.09, 23.33] s: 19.09 < 20.5
        (21_000, "dynamic", (("off", 19.091, 23.333),)),
        # dynamic 22.5 s; off 25,000 x 0.5 x [1/0.55, 1/0.45] = [22.73, 27.78] s: decided
        (25_000, "dynamic", ()),
    ],
)
def test_a_start_the_steps_interval_lets_cost_less_is_tied_with_the_choice(steps, choice, tied):
    """Each expected value worked by hand from LINES and RATIOS, above."""
    rows = [ConfigRow("off", "off", "", "dropped", "", 5, step_ms=1.0, compile_s=0.0),
            ConfigRow("dynamic", "dynamic", "", "survivor", "", None, step_ms=0.5,
                      compile_s=30.0, compile_warm_s=10.0)]  # fmt: skip
    found = decision(rows, steps, ratio)
    assert found.choice == choice
    assert [t[0] for t in found.tied] == [t[0] for t in tied]
    assert [t[1:] for t in found.tied] == [pytest.approx(t[1:], abs=1e-3) for t in tied]
    assert rivals(LINES, choice, steps, ratio) == found.tied
    verdict = decision_lines(found, ["pass"], rows)[0]
    if tied:
        assert f"can't tell {choice} " in verdict and "ship" not in verdict, verdict
        assert f"from {tied[0][0]} ({tied[0][1]:,.1f} to {tied[0][2]:,.1f} s" in verdict
    else:
        assert verdict.startswith(f"at {steps:,} steps a start (--steps-per-start): ship {choice}:")


def test_against_off_the_ratio_is_the_rows_own_vs_eager_and_its_inverse():
    rows = [ConfigRow("off", "off", "", "dropped", "", 5, step_ms=1.0),
            ConfigRow("dynamic", "dynamic", "", "survivor", "", None, step_ms=0.5,
                      vs_off=0.5, vs_off_low=0.45, vs_off_high=0.55),
            ConfigRow("static", "static", "", "survivor", "", None, step_ms=0.5)]  # fmt: skip
    ratio = paired_ratio(rows, [], {"off": "m0", "dynamic": "m1", "static": "m2"})
    for pair, want in RATIOS.items():
        assert ratio(*pair) == pytest.approx(want)
    # no interval against off, and no paired rounds between two compiled: no ratio to tie by
    assert ratio("static", "off") == (None, None, None)
    assert ratio("dynamic", "static") == (None, None, None)


def test_a_first_start_says_its_own_tie():
    # cold: off 19 s against dynamic 30 + 19,000 x [0.45, 0.55] ms = [38.55, 40.45] s: decided;
    # at 50,000: off 50 s, dynamic 30 + [22.5, 27.5] s = [52.5, 57.5] s: still decided, off;
    # at 60,000: off 60 s against dynamic [57, 63] s: tied (the cold crossing is 60,000)
    rows = [ConfigRow("off", "off", "", "dropped", "", 5, step_ms=1.0, compile_s=0.0),
            ConfigRow("dynamic", "dynamic", "", "survivor", "", None, step_ms=0.5,
                      compile_s=30.0, compile_warm_s=10.0)]  # fmt: skip
    assert decision(rows, 19_000, ratio).cold_tied == ()
    assert decision(rows, 50_000, ratio).cold_tied == ()
    at_60k = decision(rows, 60_000, ratio)
    assert at_60k.cold_choice in ("off", "dynamic") and at_60k.cold_tied
    line = next(x for x in decision_lines(at_60k, [], rows) if "a first start" in x)
    assert "not told from" in line, line


def executed(lines: list[str], backend: str):
    """Run the paste lines on a small step; what torch.compile was called with and the
    config entries they left set (restored after)."""
    import torch
    import torch._dynamo.config as dc
    import torch._inductor.config as ic

    calls = []
    real = torch.compile

    def spy(fn, **kwargs):
        # torch.compile pops what it reads from `options`: keep a copy as it was handed
        calls.append({k: dict(v) if isinstance(v, dict) else v for k, v in kwargs.items()})
        return real(fn, **kwargs)

    saved = (ic.save_config(), dc.save_config())
    try:
        torch.compile = spy
        scope = {"step": lambda x: x * 2}
        exec("\n".join(lines), scope)
        settings = {k: getattr(ic, k) for k in ("freezing", "cpp_wrapper", "max_autotune")}
        return calls, settings, scope["step"]
    finally:
        torch.compile = real
        ic.load_config(saved[0])
        dc.load_config(saved[1])


@pytest.mark.parametrize(
    "config",
    [
        Config("dynamic", "freezing+guard-filter"),
        Config("static", "cpp-wrapper"),
        Config("dynamic"),
        Config("static", "inductor.max_autotune=true"),
    ],  # fmt: skip
)
def test_the_paste_lines_set_and_call_what_a_worker_does(config):
    import torch

    from nanobench.compile.dynamo import compiler_for
    from nanobench.harness.step.knobs import checked_side, compile_options

    calls, settings, step = executed(paste_lines(config, "eager"), "eager")
    # the worker's own call: compiler_for with the side's options, in the mode
    seen = []
    real = torch.compile
    try:
        torch.compile = lambda fn, **kw: seen.append(kw) or fn
        compiler_for("eager", compile_options(config.knobs))(lambda x: x, config.mode)
    finally:
        torch.compile = real
    assert calls == seen
    for s in checked_side(config.knobs) if config.knobs else ():
        assert settings[s.key] == s.value
    assert torch.equal(step(torch.arange(3.0)), torch.arange(3.0) * 2)


def test_eager_off_pastes_no_compile_call():
    lines = paste_lines(Config("off"), "inductor")
    assert not any("torch.compile" in line for line in lines if not line.startswith("#"))
