"""A generation's clock: wall and thread-CPU time at its start and at every token on the host.

What it is: `TokenClock`, handed to a decode system's generation (the engine's loop, transformers'
`generate` as its streamer, vLLM's engine steps), and `summary`, its prefill and decode phase.
What it is not: the systems (`decode.session`) or the rounds they are timed in.
Invariant: a token is stamped after it is on the host; the first stamp is the prefill's token,
so a generation of N tokens has N - 1 decode steps.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from nanobench.decode.bench import DecodeGateFailed


class TokenClock:
    """Wall and thread-CPU time at the start of a generation and at every token on the host.

    For transformers it is the streamer `generate` calls: once with the prompt, then once per
    generated token after it has been picked and copied to the host.
    """

    def __init__(self, frames: Callable[[], int] = lambda: 0) -> None:
        self.start = self.start_cpu = 0.0
        self.wall: list[float] = []
        self.cpu: list[float] = []
        # dynamo's frames built so far, read at every token: what each step built
        self.frames = frames
        self.built: list[int] = []
        self.puts = 0

    def begin(self) -> None:
        self.start, self.start_cpu = time.perf_counter(), time.thread_time()

    def token(self) -> None:
        self.wall.append(time.perf_counter())
        self.cpu.append(time.thread_time())
        self.built.append(self.frames())

    # the transformers streamer protocol
    def put(self, value) -> None:
        self.puts += 1
        if self.puts > 1:  # the first put is the prompt
            self.token()

    def end(self) -> None:
        pass

    def summary(self) -> dict:
        """prefill ms (start to first token) and the decode phase (every later token)."""
        if len(self.wall) < 2:
            raise DecodeGateFailed(f"{len(self.wall)} tokens timed: a decode phase needs two")
        steps = [(b - a) * 1e3 for a, b in zip(self.wall, self.wall[1:])]
        n = len(steps)
        return {
            "prefill_ms": (self.wall[0] - self.start) * 1e3,
            "step_ms": steps,
            "built": [b - a for a, b in zip(self.built, self.built[1:])],
            "median_ms": statistics.median(steps),
            "mean_ms": (self.wall[-1] - self.wall[0]) * 1e3 / n,
            "cpu_ms": (self.cpu[-1] - self.cpu[0]) * 1e3 / n,
        }
