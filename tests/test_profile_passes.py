"""The profiled and plain passes: their order, the steps kept of each, the sessions joined.

Expected values are counted by hand from the passes as built here, never read from `Kept`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from nanobench.profile.attribution import steady_steps
from nanobench.profile.overhead import event_cost_us
from nanobench.profile.passes import GAP_US, Pass, end_to_end, interleaved, least_disturbed
from nanobench.profile.rows import STEP_RANGE, Event

PROF: list[Event] = []  # a profiled pass's events: only their presence marks a pass profiled


def test_each_index_keeps_its_fastest_steady_step_of_each_side():
    passes = [
        Pass([1.0, 9.0, 1.0, 2.0], [0, 0, 0, 0]),  # plain: step 1 preempted
        Pass([1.3, 1.3, 0.5, 9.0], [0, 0, 1, 0], PROF),  # profiled: step 2 built, step 3 slow
        Pass([1.4, 1.2, 1.3, 2.6], [0, 0, 0, 0], PROF),
        Pass([1.1, 1.0, 1.1, 2.1], [0, 0, 0, 1]),  # plain: step 3 built
    ]
    kept = least_disturbed(passes)
    # index 0: profiled 1.3 (first), plain 1.0; 1: 1.2 (second), 1.0; 2: the built 0.5 loses to
    # 1.3 (second), plain 1.0; 3: 2.6 (second), plain 2.0 (the built 2.1 is never kept)
    assert kept.steady == [True, False, False, False] + [False, True, True, True]
    assert kept.profiled_ms == [1.3, 1.2, 1.3, 2.6]
    assert kept.plain_ms == [1.0, 1.0, 1.0, 2.0]
    # the second fastest over the fastest, less 1, median over the indices, the larger side's:
    # profiled 1.4/1.3, 1.3/1.2, none (one steady), 9.0/2.6 -> 0.083 (the median of three);
    # plain 1.1/1.0, 9.0/1.0, 1.1/1.0, none -> 0.10
    assert abs(kept.spread - 0.10) < 1e-9


def test_an_index_with_no_steady_step_on_one_side_is_kept_on_neither():
    passes = [Pass([1.0, 1.0], [0, 1]), Pass([1.2, 1.2], [0, 0], PROF)]
    kept = least_disturbed(passes)
    assert kept.steady == [True, False]
    assert (kept.profiled_ms, kept.plain_ms) == ([1.2], [1.0])
    assert kept.spread is None  # one pass a side: nothing to tell the noise by


def test_a_load_burst_on_either_side_leaves_the_overhead_as_it_was():
    rng = random.Random(7)
    clean = [rng.choice([1.0, 3.0]) for _ in range(16)]  # a fall-back's mix: kinds by index
    sides = {False: 1.0, True: 1.25}  # the profiler costs 25% on every step
    passes = []
    for k in range(6):
        ms = [c * sides[k % 2 == 1] for c in clean]
        passes.append(Pass(ms, [0] * len(ms), PROF if k % 2 else None))
    assert least_disturbed(passes).spread == 0.0  # before the bursts: every pass alike
    for j in range(len(clean)):  # one pass a side preempted at each index, 2 to 40 ms worth
        for side in (0, 1):
            hit = passes[side + 2 * rng.randrange(3)]
            hit.ms[j] += rng.uniform(2.0, 40.0)
    kept = least_disturbed(passes)
    assert kept.plain_ms == clean
    assert kept.profiled_ms == [c * 1.25 for c in clean]
    per_step = 100.0
    expected_us = 0.25 * sum(clean) / len(clean) * 1e3 / per_step
    assert abs(event_cost_us(kept.profiled_ms, kept.plain_ms, per_step) - expected_us) < 1e-9


@dataclass(frozen=True)
class _Spec:
    device: str = "cpu"


class _Session:
    """Records, per pass, whether a profiler was alive while its steps ran."""

    spec = _Spec()

    def __init__(self):
        self.seen: list[bool] = []

    def run(self):
        self.seen.append(torch.autograd.profiler._is_profiler_enabled)
        return [1.0], [0]


def test_pairs_alternate_their_order_and_a_plain_pass_runs_with_no_profiler(tmp_path):
    session = _Session()
    passes = interleaved(session, 3, trace=str(tmp_path / "traces" / "off.json"))
    assert (tmp_path / "traces" / "off.json").is_file()
    assert session.seen == [False, True, True, False, False, True]
    assert [p.events is not None for p in passes] == session.seen


def _session(t0: float, correlation: int) -> list[Event]:
    """A step range holding an op that launched a kernel (same correlation), on its own clock."""
    return [
        Event(STEP_RANGE, t0, t0 + 100.0),
        Event("aten::mm", t0 + 10.0, t0 + 50.0),
        Event("cudaLaunchKernel", t0 + 20.0, t0 + 25.0, correlation=correlation),
        Event("gemm_kernel", t0 + 30.0, t0 + 45.0, device=True, correlation=correlation),
    ]


def test_sessions_end_to_end_follow_each_other_and_keep_their_ids_apart():
    first, second = _session(5.0, 3), _session(0.0, 3)  # each clock starts near 0; ids clash
    events = end_to_end([first, [], second])
    assert [e.start_us for e in events[:4]] == [0.0, 10.0, 20.0, 30.0]
    assert events[4].start_us == 100.0 + GAP_US  # the first ended at 105, moved by -5
    assert [e.end_us - e.start_us for e in events] == [
        e.end_us - e.start_us for e in first + second
    ]
    assert [e.correlation for e in events] == [0, 0, 3, 3, 0, 0, 6, 6]
    assert [s.start_us for s in steady_steps(events, [True, True])] == [0.0, 100.0 + GAP_US]
