"""capture's timed rounds: eager against replayed, driven by fake clocks of known distributions.

The engines are real (a tiny model, a few steps); the clock each side's steps are timed by is a
fake with a chosen mean, noise and drift, so every verdict here is known in advance and no test
makes a timing claim about this machine.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.weights import synthesize_weights
from nanobench.capture.bench import run_rows
from nanobench.capture.gates import gates
from nanobench.capture.spec import CaptureSpec
from nanobench.capture.timing import EAGER, REPLAYED, SAMPLE_HEADER
from nanobench.harness.workers.rounds import RoundPlan
from tests.helpers import TINY_MHA

STEPS = 8
PLAN = RoundPlan(min_rounds=5, max_rounds=12, rel_ci=0.01, budget_s=120.0)


class FakeMachine:
    """Per-system clocks: a step of `system` lasts mean_ms[system] x (1 + noise N(0,1)) x drift.

    The drift is shared, as a shared machine's is: every step timed on either side makes every
    later step `drift` (a fraction) slower.
    """

    def __init__(self, mean_ms: dict[str, float], noise: float = 0.0, drift: float = 0.0, seed=0):
        self.mean_ms, self.noise, self.drift = mean_ms, noise, drift
        self.rng = np.random.default_rng(seed)
        self.steps = 0

    def clock_for(self, system: str):
        state = {"t": 0.0, "open": False}

        def clock() -> float:
            # time_steps reads the clock before and after each step: the second read advances.
            if state["open"]:
                factor = (1 + self.noise * self.rng.standard_normal()) * (
                    1 + self.drift * self.steps
                )
                state["t"] += self.mean_ms[system] * factor / 1e3
                self.steps += 1
            state["open"] = not state["open"]
            return state["t"]

        return clock


@pytest.fixture(scope="module")
def tensors():
    return synthesize_weights(TINY_MHA, 1, torch.float32)


def timed(tensors, machine: FakeMachine, plan: RoundPlan = PLAN):
    windows = []
    (row,), _ = run_rows(
        TINY_MHA,
        tensors,
        rows=2,
        prompt_len=8,
        steps=[STEPS],
        width_multiple=16,
        up_front=False,
        plan=plan,
        clock_for=machine.clock_for,
        on_window=lambda steps, w: windows.append((steps, w)),
    )
    return row, windows


def test_a_true_10pct_slower_replay_under_1pct_noise_fails(tensors):
    row, _ = timed(tensors, FakeMachine({EAGER: 2.0, REPLAYED: 2.2}, noise=0.01))
    assert row.replay_not_slower == "fail", row
    assert 1.0 < row.ratio_vs_eager_low < 1.1 < row.ratio_vs_eager_high, row
    assert row.step_ms_eager == pytest.approx(2.0, rel=0.02)
    assert row.step_ms_replayed == pytest.approx(2.2, rel=0.02)
    assert row.run_ms_eager == pytest.approx(STEPS * 2.0, rel=0.02)
    assert 0 < row.step_ms_eager_iqr < 0.1 and row.step_ms_eager_q1 < 2.0 < row.step_ms_eager_q3


def test_a_true_10pct_faster_replay_under_1pct_noise_passes(tensors):
    row, _ = timed(tensors, FakeMachine({EAGER: 2.0, REPLAYED: 1.8}, noise=0.01))
    assert row.replay_not_slower == "pass", row
    assert row.ratio_vs_eager_low < 0.9 < row.ratio_vs_eager_high < 1.0, row


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_gap_under_5pct_noise_is_inconclusive(tensors, seed):
    row, _ = timed(tensors, FakeMachine({EAGER: 2.0, REPLAYED: 2.0}, noise=0.05, seed=seed))
    assert row.replay_not_slower == "inconclusive", row
    assert row.ratio_vs_eager_low < 1.0 < row.ratio_vs_eager_high
    assert row.rounds == PLAN.max_rounds  # never tight enough to stop early


def test_drift_lands_on_both_sides_because_the_order_rotates(tensors):
    # Equal systems on a machine slowing 0.5% per step: were eager always first, replayed
    # would look ~4% slower every round and fail. Rotating, the drift cancels over rounds.
    machine = FakeMachine({EAGER: 2.0, REPLAYED: 2.0}, drift=0.005)
    row, windows = timed(tensors, machine, RoundPlan(6, 6, 0.01, 120.0))
    assert [w.system for _, w in windows] == [EAGER, REPLAYED, REPLAYED, EAGER] * 3
    assert row.replay_not_slower != "fail", row
    assert row.ratio_vs_eager_low < 1.0 < row.ratio_vs_eager_high, row


def test_every_timed_step_is_kept_and_the_counts_are_the_drive_s(tensors):
    row, windows = timed(
        tensors, FakeMachine({EAGER: 2.0, REPLAYED: 2.0}), RoundPlan(3, 3, 0.5, 60)
    )
    assert [(steps, w.system, w.round) for steps, w in windows] == [
        (STEPS, s, r)
        for r, pair in enumerate([(EAGER, REPLAYED), (REPLAYED, EAGER), (EAGER, REPLAYED)], 1)
        for s in pair
    ]
    for _, w in windows:
        assert len(w.ms) == STEPS and w.built == (0,) * STEPS and all(w.steady)
    # The timed windows replay too; the row's counts are the correctness drive's alone.
    assert row.replays == STEPS and row.recorded_mid_run == 1
    # Three rounds: a ratio, no interval yet, so no verdict but can't tell.
    assert row.rounds == 3 and row.ratio_vs_eager == 1.0 and row.ratio_vs_eager_low is None
    assert row.replay_not_slower == "inconclusive"
    assert SAMPLE_HEADER[:2] == ["run_length", "system"]


def test_the_replay_gate_is_a_gate_on_cuda_and_informational_on_cpu(tensors):
    row, _ = timed(tensors, FakeMachine({EAGER: 2.0, REPLAYED: 2.2}, noise=0.01))
    cpu = {g.name: g for g in gates(CaptureSpec(device="cpu"), [row])}
    assert f"replay_not_slower[{STEPS}]" not in cpu
    cuda = {g.name: g for g in gates(CaptureSpec(device="cuda"), [row])}
    found = cuda[f"replay_not_slower[{STEPS}]"]
    assert (found.verdict, found.target) == ("fail", 1.0)
    assert found.ci_low == pytest.approx(row.ratio_vs_eager_low, abs=1e-4)
    assert found.ci_high == pytest.approx(row.ratio_vs_eager_high, abs=1e-4)
    assert "replayed / eager step time at 8 steps is 1.10x" in found.detail
