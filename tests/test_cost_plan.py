"""Addressing arithmetic: Day 50's quadratic rebuild against a persistent table's appends."""

from __future__ import annotations

import pytest

from nanobench.cost.buckets import open_cells, open_shapes
from nanobench.cost.plan import (
    PlanUnsound,
    appended_cells,
    cells_bytes,
    check_rebuild_bounded,
    mapping_bytes,
    mapping_cells,
    rebuild_cells,
    rebuild_ratio,
)

# Day 50: four rows from a 16-token prompt. The log prints ratios rounded to whole numbers
# (20x, 49x, 80x, 272x); the exact ratios are all n + 0.5.
DAY50 = [
    # steps, rebuilt, appended, ratio, host bytes, as printed
    (8, 656, 32, 20.5, 5_248, "5.2 KB"),
    (64, 12_416, 256, 48.5, 99_328, "99.3 KB"),
    (128, 41_216, 512, 80.5, 329_728, "329.7 KB"),
    (512, 558_080, 2_048, 272.5, 4_464_640, "4.5 MB"),
]


@pytest.mark.parametrize(("steps", "rebuilt", "appended", "ratio", "nbytes", "shown"), DAY50)
def test_day50_rebuild_table(steps, rebuilt, appended, ratio, nbytes, shown):
    assert rebuild_cells(4, 16, steps) == rebuilt
    assert appended_cells(4, steps) == appended
    assert rebuild_ratio(rebuilt, appended) == ratio
    assert cells_bytes(rebuilt) == nbytes
    value, unit = shown.split()
    scale = {"KB": 1e3, "MB": 1e6}[unit]
    assert f"{nbytes / scale:.1f}" == value


def test_rebuild_is_the_sum_of_step_rectangles():
    # Same width convention as the bucket arithmetic: step i maps prompt_len + i + 1.
    for steps in (0, 1, 7, 100):
        by_step = sum(mapping_cells(r, w) for r, w in open_shapes(3, 5, steps))
        assert rebuild_cells(3, 5, steps) == by_step == open_cells(open_shapes(3, 5, steps))


def test_one_step_rebuild_is_one_rectangle():
    assert rebuild_cells(4, 16, 1) == mapping_cells(4, 17) == 68
    assert mapping_bytes(4, 17) == 68 * 8
    assert mapping_bytes(4, 17, dtype_bytes=4) == 68 * 4


def test_persistent_table_ratio_is_one():
    # Invariant 4: one write per row per step, at any run length.
    assert rebuild_ratio(appended_cells(4, 512), appended_cells(4, 512)) == 1.0


def test_rebuild_ratio_needs_appends():
    with pytest.raises(ValueError, match="appended"):
        rebuild_ratio(10, 0)


@pytest.mark.parametrize("args", [(-1, 16, 8), (4, -1, 8), (4, 16, -1)])
def test_negative_inputs_raise(args):
    with pytest.raises(ValueError, match="non-negative"):
        rebuild_cells(*args)


def test_check_rebuild_bounded_at_day50s_limit():
    check_rebuild_bounded(rebuild_ratio(656, 32))
    check_rebuild_bounded(32.0)
    with pytest.raises(PlanUnsound, match=r"272\.5x.*bound is 32x"):
        check_rebuild_bounded(rebuild_ratio(558_080, 2_048))
    # "fails by a factor of eight"
    assert 8 < rebuild_ratio(558_080, 2_048) / 32 < 9
    with pytest.raises(PlanUnsound):
        check_rebuild_bounded(20.5, max_ratio=20)
