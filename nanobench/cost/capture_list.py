"""The capture list chosen for the traffic: the sizes that pad least over a served batch mix.

What it is: the padding arithmetic of a capture list over a mix of batch sizes (`padded_rows`,
`computed_rows`, `pad_share`, `uncovered_steps`, all over a histogram {batch rows: steps}) and
`optimal_sizes`, the list of at most K sizes, its largest covering the mix's largest batch,
that minimises the padded rows, found exactly by a dynamic programme.
What it is not: a server's fixed ladder (`engine.capture_sizes` reproduces vLLM's and
SGLang's) or a memory budget; nothing here reads a file or touches torch.
Invariant: a batch of b rows runs the graph of the smallest listed size >= b and pads
`size - b` rows; a batch above the list runs eagerly, pads nothing and is counted apart
(`uncovered_steps`), never silently priced as covered.

Why the optimum only uses sizes the mix holds: lowering a listed size to the largest batch it
serves keeps every batch it served and pads each of them less, so some optimal list is a
subset of the mix's distinct batch sizes, and the programme searches those m values alone.

Cost of `optimal_sizes`: O(K * m^2) time (K * m^2 / 2 candidate splits, each O(1) from prefix
sums) and O(K * m) memory, for m distinct batch sizes in the mix (m <= its largest batch) and
K graphs. At the size of vLLM's largest default list (m = 512, K = 51) that is about 6.7e6
splits, seconds in Python; a K of 8 over 64 distinct sizes is about 16,000.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping

Histogram = Mapping[int, int]


def batch_histogram(batches: Iterable[int]) -> dict[int, int]:
    """{batch rows: steps served at that size}, ascending; every batch a positive int."""
    counts = Counter()
    for b in batches:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"batch size: expected a positive integer, got {b!r}")
        counts[b] += 1
    if not counts:
        raise ValueError("batch mix: expected at least one decode step, got none")
    return dict(sorted(counts.items()))


def _served(sizes: tuple[int, ...], mix: Histogram):
    """(batch, steps, the listed size it runs at or None above the list) per batch size."""
    for b, steps in mix.items():
        i = bisect_left(sizes, b)
        yield b, steps, sizes[i] if i < len(sizes) else None


def padded_rows(sizes: tuple[int, ...], mix: Histogram) -> int:
    """sum over covered steps of (size(b) - b): the padding rows the list computes."""
    return sum(steps * (s - b) for b, steps, s in _served(sizes, mix) if s is not None)


def computed_rows(sizes: tuple[int, ...], mix: Histogram) -> int:
    """sum over covered steps of size(b): every row the list's graphs compute."""
    return sum(steps * s for _, steps, s in _served(sizes, mix) if s is not None)


def uncovered_steps(sizes: tuple[int, ...], mix: Histogram) -> int:
    """Steps whose batch is above the list's largest size (they run eagerly)."""
    return sum(steps for _, steps, s in _served(sizes, mix) if s is None)


def pad_share(sizes: tuple[int, ...], mix: Histogram) -> float:
    """padded_rows / computed_rows over the covered steps (0 when none is covered)."""
    computed = computed_rows(sizes, mix)
    return padded_rows(sizes, mix) / computed if computed else 0.0


def optimal_sizes(mix: Histogram, max_graphs: int) -> tuple[int, ...]:
    """The at most `max_graphs` sizes, the largest = the mix's largest batch, padding least.

    g[k][j]: least padding over batches v[0..j] with at most k sizes, v[j] the largest;
    g[k][j] = min(g[k-1][j], min_{i<j} g[k-1][i] + cost(i+1, j)), where cost(i, j) is the
    padding of batches v[i..j] all run at v[j]. Ties keep the shorter list, then the first
    split found, so the answer is deterministic.
    """
    if max_graphs < 1:
        raise ValueError(f"max_graphs: expected a positive integer, got {max_graphs}")
    values = sorted(mix)
    if not values or any(mix[v] < 1 or v < 1 for v in values):
        raise ValueError(f"batch mix: expected positive batch sizes and step counts, got {mix}")
    steps_before, rows_before = [0], [0]  # prefix sums of steps and of steps * rows
    for v in values:
        steps_before.append(steps_before[-1] + mix[v])
        rows_before.append(rows_before[-1] + mix[v] * v)

    def cost(i: int, j: int) -> int:
        # Batches v[i..j], all run at v[j].
        steps = steps_before[j + 1] - steps_before[i]
        return values[j] * steps - (rows_before[j + 1] - rows_before[i])

    m = len(values)
    best = [cost(0, j) for j in range(m)]  # k = 1: one size serves everything up to v[j]
    split: list[list[int | None]] = [[None] * m]  # split[k-1][j]: the size below v[j], or None
    for _ in range(2, min(max_graphs, m) + 1):
        nxt, came = list(best), [None] * m
        for j in range(1, m):
            for i in range(j):
                total = best[i] + cost(i + 1, j)
                if total < nxt[j]:
                    nxt[j], came[j] = total, i
        best = nxt
        split.append(came)
    return _walk_back(values, split)


def _walk_back(values: list[int], split: list[list[int | None]]) -> tuple[int, ...]:
    """The sizes the programme chose, from the largest batch down through the split table.

    The top level is min(K, m): at most as many sizes as batch values. With every count
    positive, a list with fewer sizes than the values it serves pads strictly more than one
    that adds a padded value, so each optimum on the walk uses every size its level allows:
    each entry is a split (never a value carried over from the level below), and the split
    leaves at least as many values below as levels.
    """
    chosen, j = [values[-1]], len(values) - 1
    for level in range(len(split) - 1, 0, -1):
        j = split[level][j]
        chosen.append(values[j])
    return tuple(sorted(chosen))


def optimal_sizes_within(
    mix: Histogram, max_graphs: int, max_total_rows: int
) -> tuple[int, ...] | None:
    """optimal_sizes with sum(sizes) <= max_total_rows, or None when no list fits.

    The memory budget of graphs that each keep outputs linear in their rows: with b bytes of
    outputs per row and B bytes left beside the state and the shared pool, max_total_rows is
    B // b. g[k][j][t] adds the rows t the list holds to the programme's state; cost
    O(K * m^2 * T) time and O(K * m * T) memory for T = max_total_rows (capped at the sum of
    the mix's sizes).
    """
    if max_graphs < 1 or max_total_rows < 0:
        raise ValueError(
            f"max_graphs, max_total_rows: expected >= 1 and >= 0, got {max_graphs}, "
            f"{max_total_rows}"
        )
    values = sorted(mix)
    top = min(max_total_rows, sum(values))
    if values[-1] > top:
        return None
    steps_before, rows_before = [0], [0]
    for v in values:
        steps_before.append(steps_before[-1] + mix[v])
        rows_before.append(rows_before[-1] + mix[v] * v)

    def cost(i: int, j: int) -> int:
        steps = steps_before[j + 1] - steps_before[i]
        return values[j] * steps - (rows_before[j + 1] - rows_before[i])

    # best[j]: {rows held: (padding, the list)} for lists whose largest size is v[j].
    best = [{v: (cost(0, j), (v,))} if v <= top else {} for j, v in enumerate(values)]
    answer = best[-1]
    for _ in range(2, min(max_graphs, len(values)) + 1):
        nxt = [dict(b) for b in best]
        for j in range(1, len(values)):
            for i in range(j):
                for held, (pad, sizes) in best[i].items():
                    total = held + values[j]
                    if total > top:
                        continue
                    cand = (pad + cost(i + 1, j), (*sizes, values[j]))
                    if total not in nxt[j] or cand < nxt[j][total]:
                        nxt[j][total] = cand
        best = nxt
        answer = best[-1]
    return min(answer.values())[1]
