"""The decode forward behind a compiler, and the bookkeeping of what that bought.

What it is: `CompiledDecode`, one callable in front of the decode forward in every mode
(`off`, `dynamic`, `static`). It records the shape each call presents and how many frames
were built during it, using an injectable compiler and an injectable build counter.
What it is not: the benchmark. Sweeps, fresh processes and reports live in `nanobench`.
Invariant: the call site has no branch; `off` goes through the same wrapper and counts too.
Builds are dynamo's `counters["frames"]["ok"]`, never `unique_graphs` (a frame rebuilt on a
failing value guard has one structure and would count once there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def torch_compiler(fn: Callable, mode: str) -> Callable:
    import torch

    # static must be dynamic=False: the default (None) would generalise sizes on a recompile.
    return torch.compile(fn, dynamic=(mode == "dynamic"))


def dynamo_frames_ok() -> int:
    from torch._dynamo.utils import counters

    return counters["frames"]["ok"]


@dataclass
class CompiledDecode:
    fn: Callable
    mode: str = "off"
    compiler: Callable | None = None
    build_counter: Callable[[], int] | None = None
    history: list[tuple[int, int]] = field(default_factory=list)
    builds_per_call: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in ("off", "dynamic", "static", "reduce-overhead"):
            raise ValueError(
                f"compile mode {self.mode!r}: expected off, dynamic, static or reduce-overhead"
            )
        self._call = (
            self.fn if self.mode == "off" else (self.compiler or torch_compiler)(self.fn, self.mode)
        )
        # off builds nothing, and importing dynamo just to read a zero costs seconds
        default = dynamo_frames_ok if self.mode != "off" else (lambda: 0)
        self._count = self.build_counter or default

    def __call__(self, input_ids, view):
        self.history.append(view.graph_shape)
        before = self._count()
        out = self._call(input_ids, view)
        self.builds_per_call.append(self._count() - before)
        return out

    @property
    def calls(self) -> int:
        return len(self.history)

    @property
    def builds(self) -> int:
        return sum(self.builds_per_call)

    @property
    def distinct(self) -> int:
        return len(set(self.history))

    @property
    def reuse(self) -> float:
        """Share of calls that built nothing."""
        if not self.builds_per_call:
            return 0.0
        return sum(1 for b in self.builds_per_call if b == 0) / len(self.builds_per_call)
