"""Persistent step inputs: the decode step's small tensors, allocated once and written in place.

What it is: `StepInputs`, four `[max_batch]` buffers (token ids, positions, write slots,
context lengths) that every decode step writes with one host-to-device copy, and hands out as
windows `buf[:rows]`.
What it is not: the slot table (that is `slots.py`) or a sampler.
Invariant: the storage of every buffer is fixed for the life of the engine, which is what a
recorded replay needs; `check_step_inputs_persistent` checks a plan against it.
"""

from __future__ import annotations

import torch


class InputsUnsound(RuntimeError):
    """A step input is not a window on the persistent buffer it should be."""


class StepInputs:
    def __init__(self, max_batch: int, device) -> None:
        self.packed = torch.zeros((4, max_batch), dtype=torch.int64, device=device)  # (4, R)
        self.input_ids = self.packed[0].view(max_batch, 1)  # (R, 1)
        self.positions = self.packed[1].view(max_batch, 1)  # (R, 1)
        self.write_slots = self.packed[2]  # (R,)
        self.context_lens = self.packed[3]  # (R,)

    @property
    def nbytes(self) -> int:
        return self.packed.numel() * self.packed.element_size()

    def write(self, positions: list[int], write_slots: list[int], context_lens: list[int]) -> None:
        """One copy for the plan's three fields of the first len(positions) rows."""
        n = len(positions)
        host = torch.tensor([positions, write_slots, context_lens], dtype=torch.int64)  # (3, B)
        self.packed[1:, :n].copy_(host)

    def write_ids(self, ids: list[int]) -> None:
        self.packed[0, : len(ids)].copy_(torch.tensor(ids, dtype=torch.int64))


def check_step_inputs_persistent(plan, inputs: StepInputs) -> None:
    pairs = (
        ("positions", plan.positions, inputs.positions),
        ("write_slots", plan.write_slots, inputs.write_slots),
        ("context_lens", plan.context_lens, inputs.context_lens),
    )
    for name, got, buf in pairs:
        if got.data_ptr() != buf.data_ptr():
            raise InputsUnsound(f"plan.{name} is a fresh tensor, not the persistent buffer")
