"""tune's answer: the cheapest start at each horizon (against a brute-force scan of the
horizons, not the envelope's own arithmetic), and the lines to paste, executed and held to
what a worker of the same configuration sets and calls."""

from __future__ import annotations

import pytest

from nanobench.tune.paste import paste_lines
from nanobench.tune.rows import envelope, total_cost_s
from nanobench.tune.space import Config


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
