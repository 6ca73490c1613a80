"""What a decode run costs through a bucket set, in cells.

What it is: the run arithmetic of a closed shape set. A run of `steps` decode steps over `rows` sequences
from a `prompt_len`-token prompt presents one open shape per step; rounding each through a
bucket set (`engine.buckets.DecodeBuckets` or anything with `shape_for`) closes the set and
pays for it in padded cells.
What it is not: the bucket policy itself (that is `engine.buckets`) or a timing.
Invariant: step i (0-based) presents width `prompt_len + i + 1`, the history including this
step's token, and padded cells >= open cells for every run, so waste is in [0, 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

Shape = tuple[int, int]


class ShapeRounder(Protocol):
    def shape_for(self, rows: int, width: int) -> Shape: ...


def round_up(n: int, multiple: int) -> int:
    """ceil(n / multiple) * multiple."""
    if multiple < 1:
        raise ValueError(f"multiple: expected a positive integer, got {multiple}")
    if n < 0:
        raise ValueError(f"n: expected a non-negative integer, got {n}")
    return -(-n // multiple) * multiple


def bucket_for(n: int, ladder: Iterable[int]) -> int:
    """min(b for b in ladder if b >= n)."""
    members = sorted(ladder)
    if not members:
        raise ValueError("ladder: expected at least one bucket, got none")
    for b in members:
        if b >= n:
            return b
    raise ValueError(f"{n} is above the largest bucket {members[-1]} in the ladder")


def open_shapes(rows: int, prompt_len: int, steps: int) -> list[Shape]:
    """[(rows, prompt_len + i + 1) for i in range(steps)]: one shape per decode step."""
    if rows < 1:
        raise ValueError(f"rows: expected a positive integer, got {rows}")
    if prompt_len < 1:
        raise ValueError(f"prompt_len: expected a positive integer, got {prompt_len}")
    if steps < 0:
        raise ValueError(f"steps: expected a non-negative integer, got {steps}")
    return [(rows, prompt_len + i + 1) for i in range(steps)]


def open_cells(shapes: Iterable[Shape]) -> int:
    """sum(rows * width) over the shapes as presented."""
    return sum(r * w for r, w in shapes)


def mapping_cells(shapes: Iterable[Shape]) -> int:
    """sum(rows * width): the same sum as open_cells, named for the mapping rectangle."""
    return open_cells(shapes)


def padded_cells(shapes: Iterable[Shape], buckets: ShapeRounder) -> int:
    """sum(row_bucket * width_bucket) over the shapes rounded through `buckets`."""
    total = 0
    for r, w in shapes:
        rb, wb = buckets.shape_for(r, w)
        total += rb * wb
    return total


def bucketed_shapes(shapes: Iterable[Shape], buckets: ShapeRounder) -> list[Shape]:
    """Distinct rounded shapes in first-seen order: the graphs (or captures) a run asks for."""
    seen: dict[Shape, None] = {}
    for r, w in shapes:
        seen.setdefault(tuple(buckets.shape_for(r, w)), None)
    return list(seen)


def waste(open_cells: int, padded_cells: int) -> float:
    """1 - open_cells / padded_cells: the share of computed cells that are padding."""
    if padded_cells < open_cells:
        raise ValueError(
            f"padded_cells ({padded_cells}) is below open_cells ({open_cells}): "
            "padding cannot remove cells"
        )
    if padded_cells == 0:
        return 0.0
    return 1.0 - open_cells / padded_cells


@dataclass(frozen=True)
class BucketRun:
    """One run priced open and bucketed."""

    open: tuple[Shape, ...]
    bucketed: tuple[Shape, ...]
    open_cells: int
    padded_cells: int

    @property
    def open_count(self) -> int:
        """Distinct open shapes (one per step for a decode run)."""
        return len(set(self.open))

    @property
    def bucketed_count(self) -> int:
        return len(self.bucketed)

    @property
    def waste(self) -> float:
        return waste(self.open_cells, self.padded_cells)


def bucket_run(rows: int, prompt_len: int, steps: int, buckets: ShapeRounder) -> BucketRun:
    """open_shapes(rows, prompt_len, steps) priced open and through `buckets`."""
    shapes: Sequence[Shape] = open_shapes(rows, prompt_len, steps)
    return BucketRun(
        open=tuple(shapes),
        bucketed=tuple(bucketed_shapes(shapes, buckets)),
        open_cells=open_cells(shapes),
        padded_cells=padded_cells(shapes, buckets),
    )
