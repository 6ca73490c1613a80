"""Sliced generations: the slices' arithmetic, the pause taken out of a step, the same tokens.

The pause test drives `SlicedGeneration` with a clock whose time is a number the test moves
(one second a step, a hundred while another system has its turn); the session test decodes the
tiny model whole and in slices and compares the tokens.
"""

from __future__ import annotations

import pytest

from nanobench.decode.rows import RunSpec
from nanobench.decode.session import DecodeSession, TokenClock
from nanobench.harness.workers.slices import SlicedGeneration, slice_bounds, slices_for


def test_slice_bounds_cover_every_step_once_in_order_the_first_slices_longer():
    # 10 steps in 3: 4, 3, 3
    assert slice_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert slice_bounds(6, 1) == [(0, 6)]
    assert slice_bounds(5, 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


def test_slices_make_eight_rounds_fit_the_budget_at_two_steps_a_slice_at_least():
    # the smollm2 run: 586 s for 4 rounds is 146.5 s a round; 8 rounds in 120 s need
    # ceil(8 * 146.5 / 120) = ceil(9.77) = 10 slices of its 31 decode steps
    assert slices_for(146.5, 120.0, 31) == 10
    # 8 rounds of 10 s fit in 120 s: whole generations
    assert slices_for(10.0, 120.0, 127) == 1
    # 1000 s a round would want 67 slices; 31 steps make at most 15 of two steps
    assert slices_for(1000.0, 120.0, 31) == 15
    assert slices_for(1000.0, 120.0, 1) == 1


class SteppedClock(TokenClock):
    """A TokenClock on a time the test moves: every token one second after the last."""

    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def begin(self) -> None:
        self.start = self.start_cpu = self.t

    def token(self) -> None:
        self.t += 1.0
        self.wall.append(self.t)
        self.cpu.append(self.t)
        self.built.append(0)


def test_a_step_after_a_pause_is_timed_without_the_pause():
    clock = SteppedClock()

    def generate(c) -> str:
        c.begin()
        for _ in range(1 + 9):  # the prefill's token, then 9 decode steps
            c.token()
        return "tokens"

    sliced = SlicedGeneration(generate, clock, slice_bounds(9, 3), now=lambda: clock.t)
    got = []
    for _ in range(3):
        got.append(sliced.next_slice())
        clock.t += 100.0  # the other systems' turns: 100 s in which this generation waits
    assert [ms for ms, _ in got] == [[1000.0] * 3] * 3
    assert [built for _, built in got] == [[0] * 3] * 3
    assert sliced.result() == "tokens"
    summary = sliced.summary()
    assert summary["step_ms"] == [1000.0] * 9 and summary["mean_ms"] == pytest.approx(1000.0)


def test_an_error_in_a_sliced_generation_reaches_the_caller():
    def generate(c):
        c.begin()
        c.token()
        raise ValueError("non-finite logits at step 1")

    sliced = SlicedGeneration(generate, SteppedClock(), slice_bounds(4, 2))
    with pytest.raises(ValueError, match="non-finite"):
        sliced.next_slice()


@pytest.mark.parametrize("system", ["engine-eager", "hf-eager"])
def test_a_generation_in_slices_makes_the_same_tokens_as_a_whole_one(system):
    from engine.sources import materialize_preset

    steps = 9
    spec = RunSpec(
        model=str(materialize_preset("tiny")), rows=2, prompt_len=4, steps=steps,
        max_model_len=4 + steps, width_multiple=128, device="cpu", dtype="float32", threads=1,
        backend="inductor", hf_attn="sdpa", weight_bytes=1, kv_bytes=1, step_flops=0,
        system=system,
    )  # fmt: skip
    session = DecodeSession(spec)
    whole = session.serve({"op": "window", "round": 1})
    sliced = [
        session.serve({"op": "window", "round": 1 + k, "slice": k, "slices": 3}) for k in (1, 2, 3)
    ]
    # 8 decode steps whole; 3 + 3 + 2 in slices, each slice a window of its own round
    assert len(whole["ms"]) == steps - 1
    assert [len(w["ms"]) for w in sliced] == [3, 3, 2]
    assert [w["round"] for w in sliced] == [2, 3, 4]
    row = session.finish()
    # every repeat, whole or sliced, made the warm-up's tokens: each step at its own context
    assert row["deterministic"] is True and row["builds_measured"] == 0
    assert len(session.clocks) == 2
