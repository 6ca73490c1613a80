"""Decode buckets: the closed set of shapes a decode step is allowed to present.

What it is: `DecodeBuckets`, a frozen policy built from the cache's own two limits (rows in the
slot table, tokens per row) plus a width multiple. It rounds a step's `(rows, width)` up to a
member of `rows x widths`, and the gates that say whether a run stayed inside that set and
whether the set is small enough to capture.
What it is not: padding. It only names shapes; the plan pads rows (sink slot, zero lengths)
and the slot table widens its window. It does no I/O and needs no torch.
Invariant: every bucket fits the cache it describes. The largest row bucket is
`max_batch_size` and the largest width is `max_model_len`, so `shape_for` never asks the slot
table for a row or a column it does not have.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass


class BucketsUnsound(ValueError):
    """A shape outside the bucket set, or a set too large or too wasteful to capture."""


def _positive_int(name: str, value: object) -> None:
    # bool is an int subclass; True as a batch size is a typo, not a configuration.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")


@dataclass(frozen=True)
class DecodeBuckets:
    """Row ladder (powers of two plus `max_batch_size`) times width ladder (multiples, clamped)."""

    max_batch_size: int
    max_model_len: int
    width_multiple: int
    # A kernel that walks the block table itself has no width axis: one width, the table's.
    width_free: bool = False
    # A server's capture list (engine.capture_sizes) in place of the power-of-two ladder;
    # its largest size must be max_batch_size.
    row_sizes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _positive_int("max_batch_size", self.max_batch_size)
        _positive_int("max_model_len", self.max_model_len)
        _positive_int("width_multiple", self.width_multiple)
        if not isinstance(self.width_free, bool):
            raise ValueError(f"width_free: expected True or False, got {self.width_free!r}")
        if self.row_sizes is not None:
            from engine.capture_sizes import ladder

            if ladder(self.row_sizes)[-1] != self.max_batch_size:
                raise ValueError(
                    f"row_sizes: the largest size {self.row_sizes[-1]} must be max_batch_size "
                    f"{self.max_batch_size}"
                )

    @property
    def rows(self) -> tuple[int, ...]:
        """Powers of two <= max_batch_size, plus max_batch_size so a full batch has a bucket."""
        if self.row_sizes is not None:
            return tuple(self.row_sizes)
        ladder = {self.max_batch_size}
        p = 1
        while p <= self.max_batch_size:
            ladder.add(p)
            p *= 2
        return tuple(sorted(ladder))

    @property
    def widths(self) -> tuple[int, ...]:
        """Multiples of width_multiple up to max_model_len; the last is always max_model_len."""
        if self.width_free:
            return (self.max_model_len,)
        ladder = list(range(self.width_multiple, self.max_model_len + 1, self.width_multiple))
        # The slot table is the ceiling: its width is a bucket even when it is not a multiple.
        if not ladder or ladder[-1] != self.max_model_len:
            ladder.append(self.max_model_len)
        return tuple(ladder)

    @property
    def shapes(self) -> tuple[tuple[int, int], ...]:
        """Every (rows, width), largest cells first (ties: more rows first).

        Captures go largest first so the first recording sizes a shared pool and every later
        one fits inside it.
        """
        pairs = [(r, w) for r in self.rows for w in self.widths]
        return tuple(sorted(pairs, key=lambda s: (s[0] * s[1], s[0]), reverse=True))

    @property
    def count(self) -> int:
        """Size of the closed set: len(rows) * len(widths). A product, not a sum."""
        return len(self.rows) * len(self.widths)

    def row_bucket(self, n: int) -> int:
        """Smallest row bucket >= n."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > self.max_batch_size:
            raise ValueError(
                f"rows: expected an integer in 1..{self.max_batch_size} (max_batch_size), got {n!r}"
            )
        rows = self.rows
        return rows[bisect_left(rows, n)]

    def pad_rows(self, n: int) -> int:
        """Rows of padding a batch of n carries: row_bucket(n) - n."""
        return self.row_bucket(n) - n

    def width_bucket(self, w: int) -> int:
        """round_up(w, width_multiple), clamped to max_model_len; max_model_len when width_free."""
        if isinstance(w, bool) or not isinstance(w, int) or w < 1 or w > self.max_model_len:
            raise ValueError(
                f"width: expected an integer in 1..{self.max_model_len} (max_model_len), got {w!r}"
            )
        if self.width_free:
            return self.max_model_len
        rounded = -(-w // self.width_multiple) * self.width_multiple
        return min(rounded, self.max_model_len)

    def shape_for(self, rows: int, width: int) -> tuple[int, int]:
        """(row_bucket(rows), width_bucket(width))."""
        return self.row_bucket(rows), self.width_bucket(width)

    def __contains__(self, shape: object) -> bool:
        if not isinstance(shape, tuple) or len(shape) != 2:
            return False
        rows, width = shape
        return rows in self.rows and width in self.widths


def check_shape_in_set(buckets: DecodeBuckets, shape: tuple[int, int]) -> None:
    """The shape a step presents is a member of the bucket set."""
    if tuple(shape) not in buckets:
        raise BucketsUnsound(
            f"shape {tuple(shape)} is not in the bucket set: rows {buckets.rows}, "
            f"widths {_short(buckets.widths)}; round it with shape_for() before the forward"
        )


def check_run_closed(buckets: DecodeBuckets, shapes_seen: Iterable[tuple[int, int]]) -> None:
    """Every shape a run presented is in the bucket set."""
    seen = [tuple(s) for s in shapes_seen]
    outside = sorted({s for s in seen if s not in buckets})
    if outside:
        raise BucketsUnsound(
            f"run is not closed: {len(outside)} of {len(set(seen))} distinct shapes are outside "
            f"the bucket set ({buckets.count} shapes), e.g. {outside[:3]}"
        )


def check_capture_budget(buckets_or_count: DecodeBuckets | int, max_shapes: int) -> None:
    """The closed set is small enough to compile or capture: count <= max_shapes."""
    if isinstance(buckets_or_count, DecodeBuckets):
        count = buckets_or_count.count
        detail = (
            f" ({len(buckets_or_count.rows)} rows x {len(buckets_or_count.widths)} widths "
            f"at width multiple {buckets_or_count.width_multiple})"
        )
    else:
        count, detail = int(buckets_or_count), ""
    if count > max_shapes:
        raise BucketsUnsound(
            f"capture list has {count} shapes{detail}, budget is {max_shapes}: closed is not "
            "capturable; raise --width-multiple or use a kernel with no width axis"
        )


def check_waste_bounded(waste_share: float, max_share: float) -> None:
    """Padding is at most max_share of the cells a bucketed run computes."""
    if waste_share > max_share:
        raise BucketsUnsound(
            f"padding is {waste_share:.1%} of bucketed cells, bound is {max_share:.1%}: "
            "lower --width-multiple or the row ladder's spacing"
        )


def _short(values: tuple[int, ...]) -> str:
    # A 64-entry width ladder in an error line hides the error.
    if len(values) <= 6:
        return str(values)
    return f"({values[0]}, {values[1]}, ..., {values[-1]}; {len(values)} widths)"
