"""Block allocation and host-side block tables.

What it is: a free list of KV blocks (`BlockAllocator`), one `BlockTable` per sequence mapping
token positions to flat pool slots, and `audit_blocks`, which finds leaks and double owners.
What it is not: device state. Everything here is Python ints on the host; the device-side
copy of the addressing is `slots.SlotTable`, written one entry per row per step.
Invariant: every allocated block has exactly one owner; the sink slot is not a block and
can never be handed out (it lies one row past the allocator's space).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class OutOfBlocks(RuntimeError):
    """The KV pool has no free block left."""


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))
        self._allocated: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def allocated(self) -> frozenset[int]:
        return frozenset(self._allocated)

    def allocate(self) -> int:
        if not self._free:
            raise OutOfBlocks(
                f"KV pool exhausted: all {self.num_blocks} blocks are in use; "
                "raise --max-model-len headroom or lower the batch"
            )
        block = self._free.pop()
        self._allocated.add(block)
        return block

    def free(self, block: int) -> None:
        if block not in self._allocated:
            raise ValueError(f"block {block} is not allocated")
        self._allocated.remove(block)
        self._free.append(block)


@dataclass
class BlockTable:
    """One sequence's blocks; token p lives at `blocks[p // block_size] * block_size + p % bs`."""

    block_size: int
    blocks: list[int] = field(default_factory=list)
    num_tokens: int = 0

    @property
    def capacity(self) -> int:
        return len(self.blocks) * self.block_size

    def slot(self, position: int) -> int:
        return (
            self.blocks[position // self.block_size] * self.block_size + position % self.block_size
        )

    def append_tokens(self, n: int, allocator: BlockAllocator) -> list[int]:
        """Grow by n tokens, allocating blocks as needed; returns the new tokens' slots."""
        start = self.num_tokens
        while self.capacity < start + n:
            self.blocks.append(allocator.allocate())
        self.num_tokens = start + n
        return [self.slot(p) for p in range(start, start + n)]

    def release(self, allocator: BlockAllocator) -> None:
        for block in self.blocks:
            allocator.free(block)
        self.blocks = []
        self.num_tokens = 0


def audit_blocks(allocator: BlockAllocator, tables: list[BlockTable | None]) -> list[str]:
    """Problems in the ledger: blocks owned twice, owned but free, or allocated and unowned."""
    problems: list[str] = []
    owner: dict[int, int] = {}
    for row, table in enumerate(tables):
        if table is None:
            continue
        for block in table.blocks:
            if block in owner:
                problems.append(f"block {block} owned by rows {owner[block]} and {row}")
            owner[block] = row
            if block not in allocator.allocated:
                problems.append(f"block {block} owned by row {row} but free in the allocator")
        if table.num_tokens > table.capacity:
            problems.append(f"row {row} holds {table.num_tokens} tokens in {table.capacity} slots")
    for block in sorted(allocator.allocated - owner.keys()):
        problems.append(f"block {block} allocated and owned by no row (leak)")
    return problems
