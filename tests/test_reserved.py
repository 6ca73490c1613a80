"""The caching-allocator model (issue 25 item 4) on recorded sequences, against hand counts.

Each expected figure is counted by hand from the rules of c10/cuda/CUDACachingAllocator.cpp
(512 B rounding; requests up to 1 MiB from 2 MiB segments; a larger request under 10 MiB opens
a 20 MiB segment, 10 MiB or more its own rounded to 2 MiB; best fit; split and merge).
"""

from __future__ import annotations

import pytest

from nanobench.memory.reserved import (
    CachingAllocator,
    reserved_bytes,
    round_bytes,
    segment_bytes,
    shared_reserved_bytes,
)
from nanobench.memory.target_memory import size_memory

KiB, MiB = 1 << 10, 1 << 20


def test_rounding_and_segment_sizes():
    assert [round_bytes(n) for n in (0, 1, 512, 513, 1000)] == [0, 512, 512, 1024, 1024]
    assert segment_bytes(512) == segment_bytes(MiB) == 2 * MiB
    assert segment_bytes(MiB + 512) == segment_bytes(10 * MiB - 512) == 20 * MiB
    assert segment_bytes(10 * MiB) == 10 * MiB and segment_bytes(12 * MiB + 512) == 14 * MiB


@pytest.mark.parametrize(
    ("events", "reserved"),
    [
        # One 100-byte tensor: a whole 2 MiB small segment.
        ([(0, 100)], 2 * MiB),
        # 4,096 live 512 B blocks fill one small segment exactly; the 4,097th opens a second.
        ([(i, 512) for i in range(4096)], 2 * MiB),
        ([(i, 512) for i in range(4097)], 4 * MiB),
        # A freed small block is reused: 1 MiB, freed, 1 MiB again, in one segment.
        ([(0, MiB), (0, -MiB), (1, MiB)], 2 * MiB),
        # Two live 1 MiB blocks share a 2 MiB segment; a third opens another.
        ([(0, MiB), (1, MiB), (2, MiB)], 4 * MiB),
        # Just over 1 MiB is large: a 20 MiB segment, which then holds four 5 MiB blocks ...
        ([(0, MiB + 1)], 20 * MiB),
        ([(i, 5 * MiB) for i in range(4)], 20 * MiB),
        # ... and the fifth opens a second one.
        ([(i, 5 * MiB) for i in range(5)], 40 * MiB),
        # A 12 MiB request has a segment of its own; freed, it cannot hold 13 MiB: 12 + 14 MiB.
        ([(0, 12 * MiB), (0, -12 * MiB), (1, 13 * MiB)], 26 * MiB),
        # Freed neighbours merge: two 5 MiB blocks freed leave one 20 MiB block for 15 MiB.
        ([(0, 5 * MiB), (1, 5 * MiB), (0, -5 * MiB), (1, -5 * MiB), (2, 15 * MiB)], 20 * MiB),
        # Unmerged holes stay apart: a 5 MiB hole between live blocks and the 5 MiB tail hold
        # a 5 MiB request, but not a 6 MiB one, which opens a second segment.
        ([(0, 5 * MiB), (1, 5 * MiB), (2, 5 * MiB), (1, -5 * MiB), (3, 5 * MiB)], 20 * MiB),
        ([(0, 5 * MiB), (1, 5 * MiB), (2, 5 * MiB), (1, -5 * MiB), (3, 6 * MiB)], 40 * MiB),
        # Small and large never share a segment: 512 B and 2 MiB take 2 + 20 MiB.
        ([(0, 512), (1, 2 * MiB)], 22 * MiB),
        # A 0-byte storage takes nothing.
        ([(0, 0), (0, 0)], 0),
    ],
)
def test_reserved_bytes_of_recorded_sequences(events, reserved):
    assert reserved_bytes(events) == reserved


def test_best_fit_takes_the_smallest_free_block_that_fits():
    pool = CachingAllocator()
    # Two 12 MiB and 14 MiB segments of their own, both freed: a 12 MiB request takes the 12.
    pool.replay([(0, 12 * MiB), (1, 14 * MiB), (0, -12 * MiB), (1, -14 * MiB), (2, 12 * MiB)])
    # A 14 MiB request then still fits the 14 MiB segment: no third segment.
    assert pool.replay([(3, 14 * MiB)]) == 26 * MiB == pool.reserved_bytes


def test_graphs_sharing_a_pool_keep_their_outputs():
    # Each graph: a 6 MiB transient, freed, and a 6 MiB output kept. Alone: one 20 MiB segment.
    graph = [(0, 6 * MiB), (1, 6 * MiB), (0, -6 * MiB)]
    assert reserved_bytes(graph) == 20 * MiB
    # Three graphs in one pool: outputs 18 MiB live + a 6 MiB transient (24 MiB) need 2 segments.
    assert shared_reserved_bytes([graph, graph, graph]) == 40 * MiB
    # Private pools: a segment each.
    assert sum(reserved_bytes(g) for g in (graph, graph, graph)) == 60 * MiB


def test_a_traced_step_reserves_whole_segments_at_least_its_rounded_peak():
    found, _ = size_memory(
        "tests/corpus/memory_gptfast.py:small", rows=4, prompt_len=16, steps=8, dtype="float32"
    )
    reserved = reserved_bytes(found.events)
    live = peak = 0
    for _, delta in found.events:
        live += round_bytes(delta) if delta > 0 else -round_bytes(-delta)
        peak = max(peak, live)
    assert reserved % (2 * MiB) == 0 and reserved >= peak >= found.peak_bytes
    # Every request here is small (the largest under 64 KiB): one or two 2 MiB segments.
    assert max(d for _, d in found.events) < 64 * KiB and reserved in (2 * MiB, 4 * MiB)
