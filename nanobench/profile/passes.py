"""A mode's steady passes with and without the profiler, interleaved, and the steps kept of each.

What it is: `run_pass` (one pass of the session's steps, under torch.profiler or with none
alive; a profiled pass's events kept as `Event`s, with stacks each op's call site too, its
profiler let go), `interleaved` (pairs of such passes in the order plain-profiled,
profiled-plain, ..., so what else loads this shared box lands on both sides alike),
`least_disturbed` (at each step's index, the fastest steady step of each side: the profiled one
is the step attributed, the plain one the step beside the profile; and how far apart the passes
are) and `end_to_end` (the profiled passes' separate sessions as
one event list, each after the one before).
What it is not: the attribution (`profile.attribution`) or the profiler's cost
(`profile.overhead`), which are handed what this keeps.
Invariant: both sides keep the same step indices, so a mode whose steps differ by index (a
fall-back's eager steps among compiled ones, a longer context each step) is compared step for
step; a plain pass runs with no profiler alive; a step that built anything is never kept.
"""

from __future__ import annotations

import statistics
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from nanobench.profile.attribution import events_from_profiler
from nanobench.profile.rows import Event
from nanobench.profile.user_lines import CallLines, Site, call_sites

GAP_US = 1e3  # between two joined sessions' events: no range of one can hold the next's


@dataclass(frozen=True)
class Pass:
    """One pass of the session's steps: each step's ms and builds; its events, if profiled."""

    ms: list[float]
    built: list[int]
    events: list[Event] | None = None  # what the profiler recorded; None for a plain pass
    sites: dict[int, Site] | None = None  # with stacks: each op's call site, by its id


@dataclass(frozen=True)
class Kept:
    """The least disturbed steady step at each index kept on both sides, in index order."""

    steady: list[bool]  # each profiled step in run order: kept (attributed) or not
    profiled_ms: list[float]  # the kept profiled steps' ms, by index
    plain_ms: list[float]  # the kept plain steps' ms, by the same indices
    spread: float | None  # the passes' noise: the second fastest step at an index over the
    # fastest, less 1, the median over the indices, the larger side's (None with one pass a side)


def run_pass(session, profiled: bool, stacks: bool = False, trace: str = "",
             eager: bool = False) -> Pass:  # fmt: skip
    """One pass of the session's steps, under the profiler (host activity, the device's too on
    a GPU, shapes recorded; Python stacks where asked, each op's call site read off them, under
    `user_lines.CallLines` where the mode is `eager`; a chrome trace written to `trace` where
    given) or with none alive. CUPTI's cost on a GPU (it tripled the built-in model's profiled
    step on an H200, 4.1 ms unprofiled, 13.5 profiled) is the profiler's, measured and charged
    as any other (`profile.overhead`)."""
    if not profiled:
        ms, built = session.run()[:2]
        return Pass(list(ms), list(built))
    activities = [ProfilerActivity.CPU]
    activities += [ProfilerActivity.CUDA] if session.spec.device == "cuda" else []
    with profile(activities=activities, record_shapes=True, with_stack=stacks) as prof:
        with CallLines() if stacks and eager else nullcontext():
            ms, built = session.run()[:2]
    if trace:
        Path(trace).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(trace)
    sites = call_sites(prof) if stacks else None
    frames = {i: s.frame for i, s in sites.items() if s.path} if sites else None
    return Pass(list(ms), list(built), events_from_profiler(prof.events(), frames), sites)


def interleaved(session, pairs: int, trace: str = "") -> list[Pass]:
    """`pairs` pairs of passes, plain then profiled, then profiled then plain, and so on: a drift
    in the box's load over the run falls on both sides alike. In run order; the first profiled
    pass writes the trace."""
    passes: list[Pass] = []
    for i in range(pairs):
        for profiled in (False, True) if i % 2 == 0 else (True, False):
            first = profiled and not any(p.events is not None for p in passes)
            passes.append(run_pass(session, profiled, trace=trace if first else ""))
    return passes


def _fastest(passes: list[Pass], j: int) -> int | None:
    """Which of `passes` ran its step `j` fastest without building; None where none did."""
    steady = [(p.ms[j], k) for k, p in enumerate(passes) if j < len(p.ms) and p.built[j] == 0]
    return min(steady)[1] if steady else None


def least_disturbed(passes: list[Pass]) -> Kept:
    """At each step index, the fastest steady profiled step and the fastest steady plain one:
    a step another tenant preempted is one of several at its index and loses to a clean one, on
    either side. An index with no steady step on one side is kept on neither."""
    profiled = [p for p in passes if p.events is not None]
    plain = [p for p in passes if p.events is None]
    keep = [[False] * len(p.ms) for p in profiled]
    profiled_ms, plain_ms = [], []
    steps = max((len(p.ms) for p in passes), default=0)
    for j in range(steps):
        a, b = _fastest(profiled, j), _fastest(plain, j)
        if a is None or b is None:
            continue
        keep[a][j] = True
        profiled_ms.append(profiled[a].ms[j])
        plain_ms.append(plain[b].ms[j])
    steady = [k for ks in keep for k in ks]
    return Kept(steady, profiled_ms, plain_ms, spread_of([profiled, plain], steps))


def spread_of(sides: list[list[Pass]], steps: int) -> float | None:
    """The larger side's median, over the step indices, of the second fastest steady step over
    the fastest, less 1: how far the least disturbed step could be from another clean one."""
    found = []
    for passes in sides:
        gaps = []
        for j in range(steps):
            ms = sorted(p.ms[j] for p in passes if j < len(p.ms) and p.built[j] == 0)
            if len(ms) >= 2 and ms[0] > 0:
                gaps.append(ms[1] / ms[0] - 1)
        if gaps:
            found.append(statistics.median(gaps))
    return max(found) if found else None


def end_to_end(sessions: list[list[Event]]) -> list[Event]:
    """Several profiler sessions' events as one list: each session's clock (host and device
    records alike) moved to start GAP_US after the one before ends, and its correlation ids past
    the one before's, so no range or id of one session reaches into another. 0 (none) stays 0."""
    out: list[Event] = []
    end_us, ids = 0.0, 0
    for events in sessions:
        if not events:
            continue
        shift = end_us - min(e.start_us for e in events)
        out += [
            replace(e, start_us=e.start_us + shift, end_us=e.end_us + shift,
                    correlation=e.correlation + ids if e.correlation else 0)
            for e in events
        ]  # fmt: skip
        end_us = max(e.end_us for e in events) + shift + GAP_US
        ids += max(e.correlation for e in events)
    return out
