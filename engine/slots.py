"""The persistent slot table: where every token of every row lives, kept on the device.

What it is: one `[max_batch, max_model_len]` int64 tensor allocated once. A prefill writes a
row's prompt slots; a decode step writes exactly one entry per row. A read is a window
`table[:rows, :width]`, a basic slice, so its storage never moves.
What it is not: the ledger. Ownership lives in `blocks.py`; this is its device-side copy.
Invariant: cells written by decode steps equal cells appended (no rectangle is rebuilt), and
entries nobody wrote hold the sink slot.
"""

from __future__ import annotations

import torch


class SlotsUnsound(RuntimeError):
    """A read that should have been a window on the slot table is not one."""


class SlotTable:
    def __init__(self, max_batch: int, max_model_len: int, sink_slot: int, device) -> None:
        self.sink_slot = sink_slot
        self.table = torch.full(
            (max_batch, max_model_len), sink_slot, dtype=torch.int64, device=device
        )  # (R, L)
        self.decode_cells_written = 0
        self.prefill_cells_written = 0

    @property
    def max_batch(self) -> int:
        return self.table.shape[0]

    @property
    def max_model_len(self) -> int:
        return self.table.shape[1]

    @property
    def nbytes(self) -> int:
        return self.table.numel() * self.table.element_size()

    def write_prompt(self, row: int, slots: list[int]) -> None:
        host = torch.tensor(slots, dtype=torch.int64)  # (W,)
        self.table[row, : len(slots)] = host.to(self.table.device)
        self.prefill_cells_written += len(slots)

    def write_step(self, rows: list[int], positions: list[int], slots: list[int]) -> None:
        """One index_put for the whole batch: one cell per row per step."""
        idx = torch.tensor([rows, positions], dtype=torch.int64).to(self.table.device)  # (2, B)
        values = torch.tensor(slots, dtype=torch.int64).to(self.table.device)  # (B,)
        self.table.index_put_((idx[0], idx[1]), values)
        self.decode_cells_written += len(rows)

    def clear_row(self, row: int) -> None:
        self.table[row].fill_(self.sink_slot)

    def read(self, rows: int, width: int) -> torch.Tensor:
        if rows > self.max_batch or width > self.max_model_len:
            raise SlotsUnsound(
                f"window [{rows}, {width}] exceeds the slot table "
                f"[{self.max_batch}, {self.max_model_len}]"
            )
        return self.table[:rows, :width]  # (B, W) window, same storage


def check_mapping_is_window(mapping: torch.Tensor, slots: SlotTable) -> None:
    """The read rectangle must share the table's storage and start at its origin."""
    if mapping.data_ptr() != slots.table.data_ptr() or mapping.stride() != slots.table.stride():
        raise SlotsUnsound("slot_mapping is not a window on the persistent slot table (a copy)")
