"""Reserved, not only live, bytes: the CUDA caching allocator replayed on a traced sequence.

What it is: `CachingAllocator`, a model of PyTorch's CUDA caching allocator
(c10/cuda/CUDACachingAllocator.cpp) on one stream and one pool: every request is rounded up to
512 B; requests of at most 1 MiB are served from 2 MiB segments (the small pool), larger ones
from the large pool, whose segments are 20 MiB for a request under 10 MiB and the request
rounded up to 2 MiB otherwise; a free block is found best-fit (smallest, then lowest address),
split when the rest is at least 512 B (small) or more than 1 MiB (large), and merged with its
free neighbours when freed. Segments are never returned (no `empty_cache`), so the reserved
bytes only grow. `reserved_bytes(events)` replays an allocation sequence (the tracker's
(serial, +bytes / -bytes) events) on a fresh pool: what a graph's private pool reserves, which
holds whole segments. Several sequences replayed on one allocator are graphs sharing one pool.
What it is not: the allocator itself: no streams, no `max_split_size_mb`, no expandable
segments, no garbage collection threshold; `nanobench.gpu.capture` measures the real growth.
Invariant: reserved bytes are a sum of whole segments, at least the rounded live bytes at
their peak, and never shrink.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field

MIN_BLOCK_BYTES = 512  # kMinBlockSize: every request rounds up to a multiple
SMALL_BYTES = 1 << 20  # kSmallSize: requests up to this come from the small pool
SMALL_SEGMENT_BYTES = 2 << 20  # kSmallBuffer
LARGE_SEGMENT_BYTES = 20 << 20  # kLargeBuffer: the segment of a request under 10 MiB
MIN_LARGE_ALLOC_BYTES = 10 << 20  # kMinLargeAlloc
ROUND_LARGE_BYTES = 2 << 20  # kRoundLarge


def round_bytes(size: int) -> int:
    """A request rounded up to 512 B (a 0-byte request takes nothing)."""
    if size < 0:
        raise ValueError(f"size: expected a non-negative byte count, got {size}")
    return -(-size // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def segment_bytes(size: int) -> int:
    """The segment a new request of `size` (rounded) bytes opens when no free block fits."""
    if size <= SMALL_BYTES:
        return SMALL_SEGMENT_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


@dataclass(eq=False)  # blocks are compared by identity: two may match field for field
class _Block:
    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class CachingAllocator:
    """One pool's segments and blocks; `malloc` and `free` by the caller's serial."""

    segments: list[int] = field(default_factory=list)  # bytes of each segment, in order
    _blocks: dict[int, list[_Block]] = field(default_factory=dict)  # segment -> by offset
    _free: dict[bool, list[tuple[int, int, int, int]]] = field(
        default_factory=lambda: {True: [], False: []}
    )  # small? -> sorted (size, segment, offset, id) of free blocks
    _live: dict[int, _Block] = field(default_factory=dict)  # serial -> its block
    _small: dict[int, bool] = field(default_factory=dict)  # segment -> in the small pool

    @property
    def reserved_bytes(self) -> int:
        return sum(self.segments)

    def malloc(self, serial: int, size: int) -> None:
        size = round_bytes(size)
        if size == 0:
            return
        small = size <= SMALL_BYTES
        block = self._best_fit(small, size) or self._new_segment(small, size)
        self._split(block, size, small)
        block.free = False
        self._live[serial] = block

    def free(self, serial: int) -> None:
        block = self._live.pop(serial, None)
        if block is None:
            return  # a 0-byte request, or a storage that was never allocated here
        blocks = self._blocks[block.segment]
        i = blocks.index(block)
        small = self._small[block.segment]
        # Merge with free neighbours in the same segment, as the allocator's free_block does.
        for j in (i + 1, i - 1):
            if 0 <= j < len(blocks) and blocks[j].free:
                other = blocks[j]
                self._unlist(small, other)
                block.offset = min(block.offset, other.offset)
                block.size += other.size
                blocks.remove(other)
        block.free = True
        self._list(small, block)

    def _best_fit(self, small: bool, size: int) -> _Block | None:
        for found_size, segment, offset, _ in self._free[small]:
            if found_size >= size:
                block = next(b for b in self._blocks[segment] if b.offset == offset)
                self._unlist(small, block)
                return block
        return None

    def _new_segment(self, small: bool, size: int) -> _Block:
        segment = len(self.segments)
        self.segments.append(SMALL_SEGMENT_BYTES if small else segment_bytes(size))
        block = _Block(segment, 0, self.segments[-1])
        self._blocks[segment] = [block]
        self._small[segment] = small
        return block

    def _split(self, block: _Block, size: int, small: bool) -> None:
        rest = block.size - size
        if rest >= MIN_BLOCK_BYTES if small else rest > SMALL_BYTES:
            tail = _Block(block.segment, block.offset + size, rest)
            blocks = self._blocks[block.segment]
            blocks.insert(blocks.index(block) + 1, tail)
            block.size = size
            self._list(small, tail)

    def _list(self, small: bool, block: _Block) -> None:
        insort(self._free[small], (block.size, block.segment, block.offset, id(block)))

    def _unlist(self, small: bool, block: _Block) -> None:
        self._free[small].remove((block.size, block.segment, block.offset, id(block)))

    def replay(self, events) -> int:
        """Apply (serial, +bytes / -bytes) events in order; returns the reserved bytes after."""
        for serial, delta in events:
            if delta > 0:
                self.malloc(serial, delta)
            elif delta < 0:
                self.free(serial)
        return self.reserved_bytes


def reserved_bytes(events) -> int:
    """The segments a fresh private pool reserves for one allocation sequence."""
    return CachingAllocator().replay(events)


def shared_reserved_bytes(sequences) -> int:
    """Several graphs recorded one after another into one pool, each sequence's serials its own.

    Storages still live at the end of a sequence (a graph's outputs) stay allocated in the
    pool while the next graph records, as a recorded graph's outputs do.
    """
    pool = CachingAllocator()
    for n, events in enumerate(sequences):
        pool.replay([((n, serial), delta) for serial, delta in events])
    return pool.reserved_bytes
