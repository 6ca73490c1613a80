"""What `nanobench profile` is asked for: compile's sweep, plus the profiled passes and a gate.

What it is: `ProfileSpec`, a `CompileSpec` (the same model or target, modes, shape, rounds,
processes and sides, so each mode's worker is compile's own, `compile.spec.WorkerSpec`) with
what is profile's own: how many pairs of steady passes run, one under the profiler and one not
(`passes`), how many kernels the table shows (`top`) and the host-share gate
(`max_overhead_share`); and
`ProfileJob`, what one mode's worker is handed: its `WorkerSpec`'s fields and the passes.
What it is not: the worker (`profile.session`), the attribution or the command.
Invariant: a default lives once: the shape and the statistics are compile's, so a profiled
mode is the same step `compile` times; the spec imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nanobench.compile.spec import CompileSpec
from nanobench.harness.errors import BadInput


@dataclass(frozen=True)
class ProfileSpec(CompileSpec):
    """The profile as asked for: compile's options with profile's defaults, and its own."""

    processes: int = 1  # one worker a mode: the profile is its first worker's; rounds time it
    rounds: int = 3
    max_rounds: int = 10
    history: bool = False  # a profile keeps no history: its figures are the categories
    passes: int = 3  # pairs of steady passes after warm-up: one profiled, one plain (`passes`)
    top: int = 8  # kernels a mode's table shows (the CSV has all)
    max_overhead_share: float | None = None  # --check: the host's share of a compiled step

    # compile's, and the variables that name Inductor's kernels to the profiler (`bench.PROFILE_ENV`)
    OWNS = (*CompileSpec.OWNS, "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE",
            "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES")  # fmt: skip

    def checked(self) -> ProfileSpec:
        """Compile's rules, then profile's own."""
        checked = CompileSpec.checked(self)
        if self.max_overhead_share is not None and not 0 < self.max_overhead_share <= 1:
            raise BadInput(
                f"--max-overhead-share {self.max_overhead_share}: expected a share in (0, 1]"
            )
        return checked

    def heading(self, sides, dtype: str, rows: list) -> str:
        """The table's and the figure's title: what was profiled, on what, how often."""
        from nanobench.harness.step.targets import BUILTINS
        from reports.style import counted, title

        rounds_run = max((r.rounds or 0 for r in rows), default=0)
        what = "profiled decode step" + (f" of target {self.target}" if self.target else "")
        return title(
            sides.worded(
                what,
                lambda knobs: f"{what}: knobs {knobs} against plain torch.compile",
                lambda b: f"{what} (after) vs {b.spec.target} (before)",
                what,
            ),
            model=self.model if not self.target or self.target in BUILTINS else None,
            device=self.device,
            dtype=dtype,
            rows=self.rows,
            steps=f"{self.steps} x {counted(rounds_run, 'round')}, {counted(self.passes, 'pair')} "
            "of passes profiled and not",
            backend=self.backend,
        )


@dataclass(frozen=True)
class ProfileJob:
    """One mode's profile worker: compile's worker spec (its fields) and the passes to profile."""

    worker: dict = field(default_factory=dict)  # `WorkerSpec`'s fields, rebuilt there
    passes: int = ProfileSpec.passes  # a later worker (process 2..) profiles none: it times
    trace: str = ""  # where the first worker writes its chrome trace ("" none)
