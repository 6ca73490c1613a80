"""Non-finite logits end a measurement: a NaN run must never be timed as a healthy one.

What it is: `FiniteWatch`, which keeps one on-device flag per step (`isfinite(logits).all()`,
no host sync inside a timed step) and checks them once a run is over, and `NonFiniteLogits`,
the failure it raises, naming the first bad step (step 0 is the prefill's logits).
What it is not: a weight check (that is `engine.weights.check_finite`, at load) or a tolerance.
Invariant: a system whose logits were ever NaN or Inf yields a failed row, never `ok`:
argmax over NaN logits agrees with itself, so "tokens match" alone cannot catch it.
"""

from __future__ import annotations

import torch

from nanobench.harness.errors import MeasurementFailed


class NonFiniteLogits(MeasurementFailed):
    """Some step's logits held NaN or Inf."""


class FiniteWatch:
    def __init__(self) -> None:
        self.flags: list[torch.Tensor] = []

    def see(self, logits: torch.Tensor) -> None:
        self.flags.append(torch.isfinite(logits).all())  # () bool, stays on the device

    def check(self) -> None:
        """Raise NonFiniteLogits naming the first step whose logits were not all finite."""
        if not self.flags:
            return
        ok = torch.stack(self.flags).cpu()  # (steps,)
        self.flags.clear()
        if not bool(ok.all()):
            step = int((~ok).nonzero()[0, 0])
            raise NonFiniteLogits(f"non-finite logits at step {step}")
