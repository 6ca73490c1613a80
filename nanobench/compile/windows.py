"""What a compile worker does after its first pass: timed windows, then its final row.

What it is: `steady_mask` (which steps of a pass are timed as steady) and `WindowServer`, the
half of a compile worker session (the engine's, `compile.session`, and a target's,
`compile.target_session`) that answers timed-window requests and closes with the row.
What it is not: the first pass (each session measures its own) or the rounds' schedule.
Invariant: a window replays the first pass's steps, and the steps it marks steady are the
ones that built nothing in the first pass (past a fall-back, only those after the last build).
"""

from __future__ import annotations

from dataclasses import asdict

from torch._dynamo.utils import counters

from nanobench.compile.spec import WorkerSpec
from nanobench.harness.workers.rounds import Window


def steady_mask(builds_per_step: list[int], fell_back: bool) -> list[bool]:
    """Steps that built nothing; after a fall-back, only the steps past the last build."""
    if fell_back:
        last = max((i for i, b in enumerate(builds_per_step) if b), default=-1)
        return [i > last for i in range(len(builds_per_step))]
    return [b == 0 for b in builds_per_step]


class WindowServer:
    """What a compile worker session does after its first pass: timed windows, then its row.

    A session sets `spec`, `ready`, `steady` (the first pass's steady-step mask) and
    `frames_after_first_pass`, and defines `run()` -> (ms, builds) of one pass.
    """

    spec: WorkerSpec

    def serve(self, request: dict) -> dict:
        """One timed window: the first pass's steps again."""
        ms, built = self.run()
        window = Window(
            self.spec.mode, int(request["round"]), "ok", tuple(ms), tuple(built), tuple(self.steady)
        )
        return asdict(window)

    def finish(self) -> dict:
        return {
            **self.ready,
            "builds_in_windows": counters["frames"]["ok"] - self.frames_after_first_pass,
        }
