"""Sliced generations: one timed generation cut into slices that the compared systems take turns at.

What it is: `slice_bounds(decode_steps, slices)` (contiguous step ranges, as equal as can be),
`slices_for(round_s, budget_s, decode_steps)` (how many slices let ROUNDS_IN_BUDGET paired
rounds fit the budget when whole generations cannot) and `SlicedGeneration` (the worker side: a
generation run in a thread whose clock stops after each slice's last step until the next slice
is asked for, so the systems take turns mid-generation).
What it is not: the statistics or the scheduler. A slice is a window like any other
(`nanobench.harness.workers.rounds`): each one is a paired round, dealt to the workers in turn like whole
windows, and every slice of a generation stays in the worker that started it (each worker's
k-th request is slice (k - 1) mod n + 1 of its own generation, `fleet.live_window`).
Invariant: a sliced generation runs every step in order at its own context length, exactly as
a whole one does (the same tokens); a step's time runs from the token before it to its own,
less the pause when a slice ended between them, so no step is timed across another system's
turn.
"""

from __future__ import annotations

import math
import queue
import statistics
import threading
import time
from collections.abc import Callable

# Paired rounds the budget must hold before an interval means much (MIN_ROUNDS is 5; the
# first looks are at 5 and 8).
ROUNDS_IN_BUDGET = 8
MIN_SLICE_STEPS = 2


def slice_bounds(decode_steps: int, slices: int) -> list[tuple[int, int]]:
    """[start, end) ranges of decode-step indexes (0-based), `slices` of them, sizes differing
    by at most one, earlier slices the longer."""
    base, extra = divmod(decode_steps, slices)
    bounds, start = [], 0
    for k in range(slices):
        end = start + base + (1 if k < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def slices_for(round_s: float, budget_s: float, decode_steps: int) -> int:
    """1 when ROUNDS_IN_BUDGET rounds of whole generations fit the budget; else the slices that
    make them fit, at most one per MIN_SLICE_STEPS decode steps."""
    wanted = math.ceil(ROUNDS_IN_BUDGET * round_s / budget_s) if budget_s > 0 else 1
    return max(1, min(wanted, decode_steps // MIN_SLICE_STEPS))


class SlicedGeneration:
    """`generate(clock)` in a daemon thread, stopped after each slice's last decode step.

    `clock` is a `decode.clock.TokenClock` (wall, cpu and built lists, appended by `token()`;
    wall[0] is the prefill's token, wall[i] decode step i's). `next_slice()` lets the thread
    run to the end of the next slice and returns that slice's (ms, built) per step; after the
    last, `result()` is the generation's return value. An error in the thread is raised there.
    """

    def __init__(
        self,
        generate: Callable,
        clock,
        bounds: list[tuple[int, int]],
        now: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.clock, self.bounds, self.now = clock, bounds, now
        self.ends = {end for _, end in bounds[:-1]}  # pause after these decode steps
        self.pauses: dict[int, float] = {}  # decode step index -> seconds paused before it
        self.slice = 0
        self._go = threading.Semaphore(0)
        self._events: queue.Queue = queue.Queue()
        token = clock.token

        def gated_token() -> None:
            token()
            done = len(clock.wall) - 1  # decode steps timed so far
            if done in self.ends:
                self._events.put(("slice", None))
                paused = self.now()
                self._go.acquire()
                self.pauses[done + 1] = self.now() - paused

        clock.token = gated_token
        self._thread = threading.Thread(target=self._run, args=(generate,), daemon=True)

    def _run(self, generate: Callable) -> None:
        try:
            self._events.put(("done", generate(self.clock)))
        except BaseException as e:  # raised in the caller's thread, where it is reported
            self._events.put(("error", e))

    def next_slice(self) -> tuple[list[float], list[int]]:
        """Run the next slice; its steps' ms (pauses taken out) and frames built."""
        if self.slice == 0:
            self._thread.start()
        else:
            self._go.release()
        kind, value = self._events.get()
        if kind == "error":
            raise value
        if kind == "done":
            self._result = value
        start, end = self.bounds[self.slice]
        self.slice += 1
        wall, built = self.clock.wall, self.clock.built
        ms = [
            (wall[i + 1] - wall[i] - self.pauses.get(i + 1, 0.0)) * 1e3 for i in range(start, end)
        ]
        return ms, [built[i + 1] - built[i] for i in range(start, end)]

    def result(self):
        """The generation's return value, once the last slice has run."""
        self._thread.join()
        return self._result

    def summary(self) -> dict:
        """As `TokenClock.summary`, with the pauses taken out of the decode phase's mean."""
        found = self.clock.summary()
        paused = sum(self.pauses.values()) * 1e3
        found["mean_ms"] -= paused / len(found["step_ms"])
        found["step_ms"] = [
            ms - self.pauses.get(i + 1, 0.0) * 1e3 for i, ms in enumerate(found["step_ms"])
        ]
        found["median_ms"] = statistics.median(found["step_ms"])
        return found
