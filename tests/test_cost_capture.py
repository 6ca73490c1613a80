"""Capture workspace and pools (Day 54's table), capture cost and reuse, and the device budget."""

from __future__ import annotations

import math

import pytest

from engine.buckets import DecodeBuckets
from nanobench.cost.capture import (
    CUDA_RECORD_S_PER_GRAPH,
    capture_cost_s,
    capture_reuse_share,
    capture_startup_s,
    input_buffer_bytes,
    pool_sharing_ratio,
    private_pool_bytes,
    record_s_per_graph,
    score_cells,
    shared_pool_bytes,
    slot_table_bytes,
    workspace_bytes,
)
from nanobench.cost.pool import (
    PoolUnsound,
    check_pool_budget,
    check_pool_shared,
    free_for_kv_bytes,
    kv_blocks,
    kv_blocks_needed,
    kv_bytes_per_block,
    kv_bytes_per_token,
    kv_shortfall_bytes,
    parse_bytes,
    weights_bytes,
)

HEADS = 32
FP32 = 4

# --- Day 54's pool table ----------------------------------------------------------------------

DAY54 = [
    # width multiple, shapes, shared MB, private MB, ratio
    (128, 576, "268.4", "17,414.2", "64.9"),
    (512, 144, "268.4", "4,554.5", "17.0"),
    (2048, 36, "268.4", "1,339.6", "5.0"),
    (8192, 9, "268.4", "535.8", "2.0"),
]


@pytest.mark.parametrize(("multiple", "n", "shared_mb", "private_mb", "ratio"), DAY54)
def test_day54_pool_table(multiple, n, shared_mb, private_mb, ratio):
    shapes = DecodeBuckets(256, 8192, multiple).shapes
    assert len(shapes) == n
    shared = shared_pool_bytes(shapes, HEADS, FP32)
    private = private_pool_bytes(shapes, HEADS, FP32)
    assert shared == 268_435_456
    assert f"{shared / 1e6:,.1f}" == shared_mb
    assert f"{private / 1e6:,.1f}" == private_mb
    assert f"{pool_sharing_ratio(private, shared):.1f}" == ratio


def test_day54_private_pool_exact_bytes():
    # sum(rows) = 511 over the row ladder; sum(widths) = 128 * (1 + ... + 64) at multiple 128.
    shapes = DecodeBuckets(256, 8192, 128).shapes
    assert private_pool_bytes(shapes, HEADS, FP32) == 511 * 128 * 2080 * HEADS * FP32
    assert private_pool_bytes(shapes, HEADS, FP32) == 17_414_225_920


def test_day54_what_a_step_holds():
    assert score_cells(256, 32, 8192) == 67_108_864
    assert workspace_bytes(256, 32, 8192, 4) == 268_435_456
    assert slot_table_bytes(256, 8192) == 16_777_216
    assert input_buffer_bytes(256) == 8_192
    # "sixteen times the whole slot table and thirty thousand times the input buffers"
    assert workspace_bytes(256, 32, 8192, 4) // slot_table_bytes(256, 8192) == 16
    assert workspace_bytes(256, 32, 8192, 4) // input_buffer_bytes(256) == 32_768


def test_shared_pool_is_a_max_and_private_a_sum():
    shapes = [(1, 128), (2, 128), (4, 256)]
    assert shared_pool_bytes(shapes, 2, 4) == 4 * 2 * 256 * 4
    assert private_pool_bytes(shapes, 2, 4) == (128 + 256 + 1024) * 2 * 4
    assert shared_pool_bytes([(4, 256)], 2, 4) == private_pool_bytes([(4, 256)], 2, 4)
    assert shared_pool_bytes([], 2, 4) == private_pool_bytes([], 2, 4) == 0


def test_width_free_list_shares_nothing_by_width():
    # A kernel with no width axis: one width per row bucket, 9 shapes.
    shapes = DecodeBuckets(256, 8192, 128, width_free=True).shapes
    assert len(shapes) == 9
    assert pool_sharing_ratio(
        private_pool_bytes(shapes, HEADS, FP32), shared_pool_bytes(shapes, HEADS, FP32)
    ) == pytest.approx(511 / 256)


def test_invalid_shapes_raise():
    with pytest.raises(ValueError, match="rows"):
        score_cells(0, 32, 128)
    with pytest.raises(ValueError, match="shared_bytes"):
        pool_sharing_ratio(10, 0)


# --- capture cost -----------------------------------------------------------------------------


def test_capture_cost_is_the_sum_of_recordings():
    assert capture_cost_s([0.5, 0.25, 0.25]) == 1.0
    with pytest.raises(ValueError):
        capture_cost_s([-1.0])


def test_capture_startup_is_graphs_times_seconds_per_graph():
    # vLLM's log (vllm-project/vllm#11349): 35 graphs, "Graph capturing finished in 14 secs".
    assert capture_startup_s(35, CUDA_RECORD_S_PER_GRAPH) == pytest.approx(14.0)
    # Day 54's list at width multiple 128: 9 row buckets x 64 widths = 576 graphs, by hand.
    assert capture_startup_s(576, 0.25) == 144.0
    assert capture_startup_s(0, 0.25) == 0.0
    with pytest.raises(ValueError, match="record_s_per_graph: expected positive seconds"):
        capture_startup_s(9, 0.0)
    with pytest.raises(ValueError, match="shapes: expected a count"):
        capture_startup_s(-1, 0.25)


def test_the_record_time_is_measured_when_given_else_the_devices_model_named():
    assert record_s_per_graph(0.125, "cpu") == (0.125, "measured: --record-s-per-graph")
    seconds, source = record_s_per_graph(None, "cuda")
    assert seconds == 14.0 / 35 and source.startswith("model: 0.4 s per graph, vLLM")
    assert "vllm-project/vllm#11349" in source
    seconds, source = record_s_per_graph(None, "cpu")
    assert seconds == 0.005 and "eager_recorder" in source
    with pytest.raises(ValueError, match="expected positive seconds"):
        record_s_per_graph(-1.0, "cuda")


@pytest.mark.parametrize(
    ("captures", "steps", "shown"), [(1, 8, "88%"), (1, 32, "97%"), (1, 64, "98%"), (2, 128, "98%")]
)
def test_day54_capture_reuse(captures, steps, shown):
    assert f"{capture_reuse_share(captures, steps):.0%}" == shown


# --- device budget ----------------------------------------------------------------------------


def test_kv_bytes_for_llama_3_2_1b():
    # 16 layers, 8 KV heads, head_dim 64, bf16: 32 KiB per token, K and V.
    assert kv_bytes_per_token(16, 8, 64, 2) == 32_768
    assert kv_bytes_per_block(16, 8, 64, 2, 16) == 524_288
    assert weights_bytes(1_235_814_400, 2) == 2_471_628_800


def test_free_for_kv_and_blocks():
    device = parse_bytes("80GiB")
    free = free_for_kv_bytes(device, 0.9, 2_471_628_800, 268_435_456, 1_000_000_000)
    assert free == math.floor(85_899_345_920 * 0.9) - 2_471_628_800 - 268_435_456 - 1_000_000_000
    assert kv_blocks(free, 524_288) == free // 524_288
    assert kv_blocks(-5, 524_288) == 0
    assert kv_blocks_needed(256, 8192, 16) == 256 * 512
    assert kv_blocks_needed(2, 17, 16) == 4


def test_check_pool_budget_passes_and_returns_blocks():
    blocks = check_pool_budget(
        parse_bytes("80GiB"), 0.9, 2_471_628_800, 268_435_456, 0, 524_288, min_blocks=1024
    )
    assert blocks == kv_blocks(
        free_for_kv_bytes(parse_bytes("80GiB"), 0.9, 2_471_628_800, 268_435_456), 524_288
    )


def test_check_pool_budget_fails_with_the_numbers():
    # A 576-shape private capture list does not fit a 16 GB card beside 1B weights. By hand:
    # free = 14,400,000,000 - 2,471,628,800 - 17,414,225,920 = -5,485,854,720 B (-5.1 GiB);
    # one 512 KiB block short of that is 5,486,379,008 B (5.1 GiB); the pool is 16.2 GiB.
    expected = (
        r"14\.9 GiB x 0\.9 leaves -5\.1 GiB .*capture pool 16\.2 GiB.*"
        r"0 blocks of 512\.0 KiB, need 1 \(short by 5\.1 GiB\)"
    )
    with pytest.raises(PoolUnsound, match=expected):
        check_pool_budget(parse_bytes("16GB"), 0.9, 2_471_628_800, 17_414_225_920, 0, 524_288)


def test_the_shortfall_is_what_makes_the_budget_fit():
    assert kv_shortfall_bytes(-5_485_854_720, 524_288, 1) == 5_486_379_008
    assert kv_shortfall_bytes(10 * 512 - 1, 512, 10) == 1
    assert kv_shortfall_bytes(10 * 512, 512, 10) == 0
    assert kv_shortfall_bytes(10**9, 512, 10) == 0
    # Freeing exactly the shortfall makes the gate pass; one byte less does not.
    free = -1_000_003
    short = kv_shortfall_bytes(free, 4096, 7)
    assert kv_blocks(free + short, 4096) == 7 and kv_blocks(free + short - 1, 4096) == 6


def test_check_pool_shared():
    check_pool_shared([7, 7, 7])
    check_pool_shared([])
    with pytest.raises(PoolUnsound, match="3 captured graphs hold 2 distinct pools"):
        check_pool_shared([7, 7, 8])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GiB", 80 * 2**30),
        ("80 GiB", 80 * 2**30),
        ("1.5KiB", 1536),
        ("16GB", 16 * 10**9),
        ("268.4MB", 268_400_000),
        ("512MiB", 512 * 2**20),
        ("4KB", 4000),
        ("4096B", 4096),
        ("4096", 4096),
        ("80gib", 80 * 2**30),
        (4096, 4096),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "80 GiBs", "-1GB", "1e9", "0.5B", "eighty", "8 0GB"])
def test_parse_bytes_rejects_with_a_clear_message(text):
    with pytest.raises(ValueError, match="byte size"):
        parse_bytes(text)
