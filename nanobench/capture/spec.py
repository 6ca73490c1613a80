"""`nanobench capture`'s spec: every option's default and the rules across options.

What it is: `CaptureSpec` (frozen; `validate()` resolves the dtype and the list's rows) and its
round plan. What it is not: the command (`command.py`) or the run (`run.py`).
Invariant: a spec that validated runs without another check; a bad one is `BadInput`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.capture.timing import (
    BUDGET_S,
    MAX_ROUNDS,
    REL_CI,
    ROUNDS,
)
from nanobench.harness.cli.options import (
    Ints,
)
from nanobench.harness.cli.validate import capture_sizes_option, device_option, dtype_option


@dataclass(frozen=True)
class CaptureSpec:
    """One capture invocation: the command's option defaults live here."""

    model: str = "tiny"
    rows: int = 2
    prompt_len: int = 16
    run_lengths: tuple[int, ...] = Ints((8, 32, 64, 128))
    width_multiple: int = 128
    up_front: bool = False
    kernel: str = "reference"
    device: str = "cpu"
    dtype: str = "auto"
    capture_rows: int = 256
    capture_tokens: int = 8192
    width_multiples: tuple[int, ...] = Ints((128, 512, 2048, 8192))
    capture_sizes: str | None = None
    heads: int = 0
    rounds: int = ROUNDS
    max_rounds: int = MAX_ROUNDS
    rel_ci: float = REL_CI
    budget_s: float = BUDGET_S  # shared by every run length
    threads: int = 0  # torch threads while both engines run and are timed (0: torch's default)
    out: str = "nanobench-out"
    # module:factory or file.py:factory: the user's own step, its capture memory priced per size.
    target: str = ""
    # Resolved by validate(): the concrete dtype and the capture list's rows.
    sizes: tuple[int, ...] | None = None

    def validate(self) -> CaptureSpec:
        """Cross-option rules; returns the spec with dtype and the list's rows resolved."""
        device_option(self.device)
        self.round_plan()
        if self.target:
            from nanobench.harness.step.targets import target_option

            target_option(self.target)
        return replace(
            self,
            dtype=dtype_option(self.dtype, self.model, self.device),
            sizes=capture_sizes_option(self.capture_sizes, self.capture_rows),
        )

    def round_plan(self):
        from nanobench.harness.workers.rounds import round_plan

        return round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)
