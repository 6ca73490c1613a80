"""DecodeBuckets ladders and gates, and the run arithmetic that reproduces Day 52's tables."""

from __future__ import annotations

import pytest

from engine.buckets import (
    BucketsUnsound,
    DecodeBuckets,
    check_capture_budget,
    check_run_closed,
    check_shape_in_set,
    check_waste_bounded,
)
from nanobench.cost.buckets import (
    bucket_for,
    bucket_run,
    bucketed_shapes,
    mapping_cells,
    open_cells,
    open_shapes,
    padded_cells,
    round_up,
    waste,
)

# --- the ladders ------------------------------------------------------------------------------


def test_rows_are_powers_of_two_up_to_max_batch():
    assert DecodeBuckets(8, 64, 16).rows == (1, 2, 4, 8)
    assert DecodeBuckets(256, 8192, 128).rows == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert DecodeBuckets(1, 64, 16).rows == (1,)


def test_max_batch_six_has_a_bucket_for_a_full_batch():
    buckets = DecodeBuckets(6, 64, 16)
    assert buckets.rows == (1, 2, 4, 6)
    assert buckets.row_bucket(5) == 6
    assert buckets.row_bucket(6) == 6
    assert buckets.pad_rows(5) == 1


def test_row_bucket_is_smallest_member_at_or_above():
    buckets = DecodeBuckets(8, 64, 16)
    assert [buckets.row_bucket(n) for n in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]
    assert buckets.pad_rows(3) == 1


@pytest.mark.parametrize("n", [0, -1, 9])
def test_row_bucket_outside_the_cache_raises(n):
    with pytest.raises(ValueError, match="max_batch_size"):
        DecodeBuckets(8, 64, 16).row_bucket(n)


def test_widths_are_multiples_with_max_model_len_last():
    assert DecodeBuckets(4, 512, 128).widths == (128, 256, 384, 512)
    # Not a multiple: the slot table's width is still the top bucket.
    assert DecodeBuckets(4, 528, 128).widths == (128, 256, 384, 512, 528)
    # A multiple wider than the table collapses to the table.
    assert DecodeBuckets(4, 24, 128).widths == (24,)


def test_width_bucket_rounds_up_and_clamps_to_max_model_len():
    buckets = DecodeBuckets(4, 8000, 128)
    assert buckets.width_bucket(1) == 128
    assert buckets.width_bucket(128) == 128
    assert buckets.width_bucket(129) == 256
    # round_up(7990, 128) is 8064, past the table: clamp.
    assert buckets.width_bucket(7990) == 8000
    assert buckets.width_bucket(8000) == 8000


@pytest.mark.parametrize("w", [0, -3, 8001])
def test_width_bucket_outside_the_table_raises(w):
    with pytest.raises(ValueError, match="max_model_len"):
        DecodeBuckets(4, 8000, 128).width_bucket(w)


def test_width_free_has_one_width_the_tables():
    buckets = DecodeBuckets(8, 8192, 128, width_free=True)
    assert buckets.widths == (8192,)
    assert buckets.width_bucket(17) == 8192
    assert buckets.count == 4
    assert buckets.shape_for(3, 17) == (4, 8192)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("max_batch_size", dict(max_batch_size=0, max_model_len=64, width_multiple=16)),
        ("max_model_len", dict(max_batch_size=8, max_model_len=-1, width_multiple=16)),
        ("width_multiple", dict(max_batch_size=8, max_model_len=64, width_multiple=0)),
        ("width_multiple", dict(max_batch_size=8, max_model_len=64, width_multiple=-128)),
        ("max_batch_size", dict(max_batch_size=2.5, max_model_len=64, width_multiple=16)),
        ("max_batch_size", dict(max_batch_size=True, max_model_len=64, width_multiple=16)),
    ],
)
def test_invalid_config_raises_naming_the_field(field, kwargs):
    with pytest.raises(ValueError, match=f"{field}: expected a positive integer"):
        DecodeBuckets(**kwargs)


def test_config_is_frozen():
    buckets = DecodeBuckets(8, 64, 16)
    with pytest.raises(AttributeError):
        buckets.max_batch_size = 16  # type: ignore[misc]


def test_shapes_are_the_full_product_largest_first():
    buckets = DecodeBuckets(4, 300, 128)
    shapes = buckets.shapes
    assert len(shapes) == buckets.count == 3 * 3
    assert set(shapes) == {(r, w) for r in (1, 2, 4) for w in (128, 256, 300)}
    assert shapes[0] == (4, 300)
    assert shapes[-1] == (1, 128)
    cells = [r * w for r, w in shapes]
    assert cells == sorted(cells, reverse=True)


def test_shape_for_rounds_both_axes():
    buckets = DecodeBuckets(8, 528, 128)
    assert buckets.shape_for(3, 17) == (4, 128)
    assert buckets.shape_for(8, 513) == (8, 528)
    assert (4, 128) in buckets
    assert (3, 128) not in buckets
    assert (4, 17) not in buckets


# --- Day 52 table 2: closed is a product ------------------------------------------------------


@pytest.mark.parametrize(
    ("multiple", "widths", "count"), [(128, 64, 576), (512, 16, 144), (2048, 4, 36), (8192, 1, 9)]
)
def test_day52_capture_list_size_at_256_rows_8192_tokens(multiple, widths, count):
    buckets = DecodeBuckets(256, 8192, multiple)
    assert len(buckets.rows) == 9
    assert len(buckets.widths) == widths
    assert buckets.count == count
    assert len(buckets.shapes) == count


# --- run arithmetic ---------------------------------------------------------------------------


def test_round_up():
    assert round_up(0, 128) == 0
    assert round_up(1, 128) == 128
    assert round_up(128, 128) == 128
    assert round_up(8100, 128) == 8192


@pytest.mark.parametrize("multiple", [0, -8])
def test_round_up_rejects_non_positive_multiple(multiple):
    with pytest.raises(ValueError, match="multiple"):
        round_up(5, multiple)


def test_bucket_for():
    assert bucket_for(3, (1, 2, 4, 8)) == 4
    assert bucket_for(6, (6, 1, 4, 2)) == 6
    with pytest.raises(ValueError, match="largest bucket 4"):
        bucket_for(5, (1, 2, 4))
    with pytest.raises(ValueError, match="at least one"):
        bucket_for(1, ())


def test_open_shapes_width_includes_this_steps_token():
    assert open_shapes(3, 16, 3) == [(3, 17), (3, 18), (3, 19)]
    assert open_shapes(3, 16, 0) == []
    # 492 = 3 * (17 + ... + 24): the day-52 8-step run.
    assert open_cells(open_shapes(3, 16, 8)) == 492 == 3 * sum(range(17, 25))
    assert mapping_cells(open_shapes(3, 16, 8)) == 492


def test_waste():
    assert waste(492, 768) == pytest.approx(0.359375)
    assert waste(0, 0) == 0.0
    assert waste(10, 10) == 0.0
    with pytest.raises(ValueError, match="below open_cells"):
        waste(11, 10)


# Day 52 table 1: 3 rows of an 8-row cache, 16-token prompt, width multiple 128, and the
# cache sized to the run (max_model_len = prompt_len + steps).
DAY52 = [
    # steps, open shapes, bucketed shapes, open cells, bucketed cells, waste
    (8, 8, 1, 492, 768, 0.359),
    (64, 64, 1, 9_312, 20_480, 0.545),
    (128, 128, 2, 30_912, 66_560, 0.536),
    (512, 512, 5, 418_560, 680_960, 0.385),
]


@pytest.mark.parametrize(("steps", "n_open", "n_bucketed", "cells", "padded", "share"), DAY52)
def test_day52_bucketbench_table(steps, n_open, n_bucketed, cells, padded, share):
    buckets = DecodeBuckets(max_batch_size=8, max_model_len=16 + steps, width_multiple=128)
    run = bucket_run(3, 16, steps, buckets)
    assert run.open_count == n_open
    assert run.bucketed_count == n_bucketed
    assert run.open_cells == cells
    assert run.padded_cells == padded
    assert round(run.waste, 3) == share
    # The same numbers from the loose functions.
    shapes = open_shapes(3, 16, steps)
    assert padded_cells(shapes, buckets) == padded
    assert len(bucketed_shapes(shapes, buckets)) == n_bucketed
    check_run_closed(buckets, bucketed_shapes(shapes, buckets))


def test_day52_512_step_run_crosses_five_width_buckets():
    buckets = DecodeBuckets(8, 528, 128)
    assert bucketed_shapes(open_shapes(3, 16, 512), buckets) == [
        (4, 128),
        (4, 256),
        (4, 384),
        (4, 512),
        (4, 528),
    ]


@pytest.mark.parametrize(
    ("multiple", "n_bucketed", "share"), [(8, 17, 0.047), (32, 5, 0.178), (256, 1, 0.721)]
)
def test_day49_bucketing_trade_at_four_rows(multiple, n_bucketed, share):
    # Day 49 priced 128 steps at 4 rows with widths 8..135 (no row padding, no clamp).
    buckets = DecodeBuckets(4, 256, multiple)
    run = bucket_run(4, 7, 128, buckets)
    assert run.open_count == 128
    assert run.bucketed_count == n_bucketed
    assert round(run.waste, 3) == share


@pytest.mark.parametrize(("steps", "captures"), [(8, 1), (32, 1), (64, 1), (128, 2)])
def test_day54_captures_over_a_closed_set(steps, captures):
    # 2 rows from a 16-token prompt: 144 tokens crosses the 128-token width bucket.
    buckets = DecodeBuckets(8, 16 + steps, 128)
    assert len(bucketed_shapes(open_shapes(2, 16, steps), buckets)) == captures


# --- gates ------------------------------------------------------------------------------------


def test_check_shape_in_set():
    buckets = DecodeBuckets(8, 512, 128)
    check_shape_in_set(buckets, (4, 256))
    with pytest.raises(BucketsUnsound, match=r"\(3, 256\) is not in the bucket set"):
        check_shape_in_set(buckets, (3, 256))


def test_check_run_closed_names_the_offenders():
    buckets = DecodeBuckets(8, 512, 128)
    check_run_closed(buckets, [(4, 128), (8, 512)])
    with pytest.raises(BucketsUnsound, match=r"2 of 3 distinct shapes.*\(3, 17\)"):
        check_run_closed(buckets, [(4, 128), (3, 17), (3, 18), (3, 17)])


def test_bucket_errors_are_value_errors():
    assert issubclass(BucketsUnsound, ValueError)


def test_check_capture_budget():
    check_capture_budget(DecodeBuckets(256, 8192, 2048), 36)
    check_capture_budget(9, 36)
    with pytest.raises(BucketsUnsound, match=r"576 shapes \(9 rows x 64 widths .*budget is 36"):
        check_capture_budget(DecodeBuckets(256, 8192, 128), 36)
    with pytest.raises(BucketsUnsound, match="37 shapes"):
        check_capture_budget(37, 36)


def test_check_waste_bounded():
    check_waste_bounded(0.359, 0.4)
    with pytest.raises(BucketsUnsound, match=r"54\.5%.*40\.0%"):
        check_waste_bounded(1 - 9_312 / 20_480, 0.4)
