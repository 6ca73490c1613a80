"""The batched paged K/V cache: per-layer pools, the block ledger and the slot table.

What it is: `BatchedPagedKVCache`, owning K/V pools of shape `[num_blocks*block_size + 1, Hkv, D]`
per layer, the `BlockAllocator`, one `BlockTable` per row, and the persistent `SlotTable`.
What it is not: attention. The forward reads the pools through a plan (`plan.py`) or, on the
prefill path, through slots the engine computed on the host.
Invariant: the last pool row is the sink slot. No block maps to it and the allocator cannot
hand it out, so padded rows may write there without touching any sequence.
"""

from __future__ import annotations

import torch

from engine.blocks import BlockAllocator, BlockTable, audit_blocks
from engine.config import EngineConfig, ModelConfig
from engine.slots import SlotTable


class BatchedPagedKVCache:
    def __init__(self, model: ModelConfig, engine: EngineConfig, dtype: torch.dtype) -> None:
        self.block_size = engine.block_size
        self.max_model_len = engine.max_model_len
        self.max_batch = engine.max_batch_size
        self.device = torch.device(engine.device)
        num_blocks = engine.total_blocks
        self.sink_slot = num_blocks * engine.block_size
        pool_shape = (self.sink_slot + 1, model.num_kv_heads, model.head_dim)  # (S, Hkv, D)
        self.k_pools = [
            torch.zeros(pool_shape, dtype=dtype, device=self.device)
            for _ in range(model.num_layers)
        ]
        self.v_pools = [
            torch.zeros(pool_shape, dtype=dtype, device=self.device)
            for _ in range(model.num_layers)
        ]
        self.allocator = BlockAllocator(num_blocks)
        self.tables: list[BlockTable | None] = [None] * self.max_batch
        self.slots = SlotTable(self.max_batch, self.max_model_len, self.sink_slot, self.device)
        self.epoch = 0

    @property
    def pool_bytes(self) -> int:
        per = self.k_pools[0].numel() * self.k_pools[0].element_size()
        return 2 * per * len(self.k_pools)

    def active_rows(self) -> list[int]:
        return [r for r, t in enumerate(self.tables) if t is not None]

    def add(self, row: int, num_tokens: int) -> list[int]:
        """Admit a sequence of num_tokens at row; returns its slots (prefill writes there)."""
        if self.tables[row] is not None:
            raise ValueError(f"row {row} is already occupied")
        if num_tokens > self.max_model_len:
            raise ValueError(f"{num_tokens} tokens do not fit max_model_len {self.max_model_len}")
        table = BlockTable(self.block_size)
        try:
            slots = table.append_tokens(num_tokens, self.allocator)
        except Exception:
            table.release(self.allocator)
            raise
        self.tables[row] = table
        self.slots.write_prompt(row, slots)
        return slots

    def release(self, row: int) -> None:
        table = self.tables[row]
        if table is not None:
            table.release(self.allocator)
            self.tables[row] = None
            self.slots.clear_row(row)
        self.epoch += 1

    def release_all(self) -> None:
        for row in range(self.max_batch):
            self.release(row)

    def audit(self) -> list[str]:
        return audit_blocks(self.allocator, self.tables)
