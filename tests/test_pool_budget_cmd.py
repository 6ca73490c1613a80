"""`nanobench pool-budget` end to end: the budget arithmetic, the fit search, outputs, bad input.

Registered on a local Typer app with a second command (cli.py is not this module's to edit).
Model dims come from a small 32-head checkpoint's config; no weights are loaded.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
import typer
from typer.testing import CliRunner

from engine.buckets import DecodeBuckets
from nanobench.cli import app as cli_app
from nanobench.cost.capture import shared_pool_bytes
from nanobench.cost.pool import parse_bytes
from nanobench.memory.decode_workspace import decode_memory
from nanobench.pool_budget.budget import (
    budget_row,
    candidate_multiples,
    decode_activation_bytes,
    graph_outputs_bytes,
    smallest_fitting,
)
from reports.style import binary_bytes
from tests.helpers import HEADS32, write_llama70b_config, write_model

BUDGET = {"max_batch": 256, "max_model_len": 8192, "block_size": 16, "dtype": "float32"}


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("heads32"), HEADS32)


def invoke(app, args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "220"})


# HEADS32 (1 layer, hidden 256, intermediate 128, vocab 256, 32 heads, 8 kv heads of 8) priced
# by hand at BUDGET (256 rows, 8192 tokens, blocks of 16, fp32):
# weights: embed 256*256 + q 256*256 + k, v 256*64 each + o 256*256 + MLP 3*256*128
#          + norms 3*256 = 328,448 params (tied head), 4 bytes each.
WEIGHTS_BYTES = 328_448 * 4
# activations: 256 rows * (2*256*4 residual+normed + 2*128*4 gate+up + 256*4 fp32 logits).
ACTIVATION_BYTES = 256 * (2 * 256 * 4 + 2 * 128 * 4 + 256 * 4)
# slot table 256 x 8192 int64, plus four int64 step buffers of 256.
PERSISTENT_BYTES = 256 * 8192 * 8 + 4 * 256 * 8
# K and V, 1 layer, 8 kv heads of 8, fp32, 16 tokens a block.
KV_BYTES_PER_BLOCK = 2 * 8 * 8 * 4 * 16
# the largest score rectangle [256, 32, 1, 8192] fp32: the seed formula's shared workspace at
# any multiple, shown beside the traced figure.
WORKSPACE_BYTES = 256 * 32 * 8192 * 4


# the engine's one shared logits buffer: 256 rows x vocab 256, fp32
SHARED_OUTPUT_BYTES = 256 * 256 * 4


def traced(field: str) -> int:
    """A figure of the widest, fullest shape's forward, traced (the tracker is checked against
    hand counts and the profiler in test_capture_memory.py): workspace_bytes is the shared pool
    with the logits kept apart, peak_bytes the pool when the logits are copied out."""
    shape = decode_memory(HEADS32, "reference", "float32", 256, 8192).at(256, 8192)
    return getattr(shape, field)


def need_bytes(multiple: int, capture_output: str = "per-graph") -> int:
    """Bytes a reference list needs to fit at utilisation 1: all of it plus one 8192 sequence.

    per-graph: rows 1, 2, 4, ..., 256 sum to 511; each of the 8192 / multiple widths keeps one
    fp32 logits buffer of 256 per row. shared: the largest peak and one buffer, any multiple.
    """
    if capture_output == "shared":
        capture = traced("peak_bytes") + SHARED_OUTPUT_BYTES
    else:
        capture = traced("workspace_bytes") + 511 * (8192 // multiple) * 256 * 4
    held = WEIGHTS_BYTES + capture + ACTIVATION_BYTES + PERSISTENT_BYTES
    return held + (8192 // 16) * KV_BYTES_PER_BLOCK


# -- the arithmetic --------------------------------------------------------------------------


def test_budget_row_adds_up():
    device = parse_bytes("80GiB")
    row = budget_row(
        HEADS32,
        kernel="reference",
        width_multiple=2048,
        device_bytes=device,
        utilization=0.9,
        **BUDGET,
    )
    shapes = DecodeBuckets(256, 8192, 2048).shapes
    assert row.shapes == 36
    assert row.capture_workspace_bytes == shared_pool_bytes(shapes, 32, 4) == WORKSPACE_BYTES
    # The forward holds the rectangle and more (its softmax, the gathered K/V, the MLP's rows).
    workspace = traced("workspace_bytes")
    assert row.traced_workspace_bytes == workspace > WORKSPACE_BYTES
    outputs = 511 * 4 * 256 * 4  # sum(rows) x 4 widths x vocab x fp32
    assert row.graph_outputs_bytes == outputs
    assert row.capture_pool_per_graph_bytes == workspace + outputs
    # The engine's capture (the default): the largest peak, logits a transient, + one buffer.
    assert row.capture_output == "shared" and row.shared_output_bytes == SHARED_OUTPUT_BYTES
    assert row.traced_peak_bytes == traced("peak_bytes") >= workspace
    capture = traced("peak_bytes") + SHARED_OUTPUT_BYTES
    assert row.capture_pool_bytes == capture
    assert row.weights_bytes == WEIGHTS_BYTES
    assert row.activation_bytes == ACTIVATION_BYTES
    assert row.persistent_bytes == PERSISTENT_BYTES == 16_777_216 + 8_192
    assert row.kv_bytes_per_block == KV_BYTES_PER_BLOCK == 16 * row.kv_bytes_per_token
    free = math.floor(device * 0.9) - WEIGHTS_BYTES - capture
    free -= ACTIVATION_BYTES + PERSISTENT_BYTES
    assert row.free_for_kv_bytes == free
    assert row.kv_blocks == free // KV_BYTES_PER_BLOCK
    assert row.kv_tokens == row.kv_blocks * 16
    assert row.fits and row.min_blocks == 512
    per_graph = budget_row(
        HEADS32,
        kernel="reference",
        width_multiple=2048,
        device_bytes=device,
        utilization=0.9,
        capture_output="per-graph",
        **BUDGET,
    )
    assert per_graph.capture_pool_bytes == workspace + outputs
    assert per_graph.free_for_kv_bytes == free + capture - (workspace + outputs)


def test_triton_lists_rows_only_and_holds_no_rectangle():
    row = budget_row(
        HEADS32,
        kernel="triton",
        width_multiple=128,
        device_bytes=parse_bytes("80GiB"),
        utilization=0.9,
        **BUDGET,
    )
    assert row.shapes == 9 and row.width_multiple is None
    assert row.capture_workspace_bytes == 0
    assert row.graph_outputs_bytes == graph_outputs_bytes(
        DecodeBuckets(256, 8192, 8192, True).shapes, 256
    )


def test_activation_estimate_is_the_stated_formula():
    assert decode_activation_bytes(2, 10, 20, 30, 2) == 2 * (2 * 10 * 2 + 2 * 20 * 2 + 30 * 4)


def test_candidates_and_the_fit_search():
    assert candidate_multiples(16, 100) == [16, 32, 64, 100]
    # Each graph keeping its logits: enough for width multiple 2048's list but not for 1024's,
    # so the search stops at 2048.
    device = need_bytes(2048)
    assert need_bytes(1024) > device
    per_graph = dict(utilization=1.0, capture_output="per-graph", **BUDGET)
    best = smallest_fitting(HEADS32, "reference", device_bytes=device, **per_graph)
    assert best.width_multiple == 2048 and best.shapes == 36
    worse = smallest_fitting(HEADS32, "reference", device_bytes=device - 1, **per_graph)
    assert worse.width_multiple == 4096
    # One shared logits buffer: the pool is the largest shape's, whatever the list, so the
    # finest list fits exactly when the coarsest does.
    shared = need_bytes(16, "shared")
    assert shared < need_bytes(8192)
    best = smallest_fitting(HEADS32, "reference", device_bytes=shared, utilization=1.0, **BUDGET)
    assert best.width_multiple == 16 and best.shapes == 9 * 512
    assert (
        smallest_fitting(HEADS32, "reference", device_bytes=shared - 1, utilization=1.0, **BUDGET)
        is None
    )


# -- the command -----------------------------------------------------------------------------


def test_json_rows_carry_the_answers(app, model_dir, tmp_path):
    args = ["pool-budget", "--model", str(model_dir), "--width-multiples", "128,2048"]
    args += ["--out", str(tmp_path), "--json", "--check"]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    keys = {"kernel", "width_multiple", "shapes", "weights_bytes", "capture_pool_bytes"}
    keys |= {"free_for_kv_bytes", "kv_blocks", "kv_tokens", "fits"}
    assert [(r["kernel"], r["width_multiple"], r["shapes"]) for r in doc["rows"]] == [
        ("reference", 128, 576),
        ("reference", 2048, 36),
        ("triton", None, 9),
    ]
    for r in doc["rows"]:
        assert keys <= set(r)
        assert r["fits"] is True and r["kv_tokens"] == r["kv_blocks"] * 16
        assert r["device_bytes"] == 80 * 2**30
    assert [g["name"] for g in doc["gates"]] == [
        "check_pool_budget[reference,128]",
        "check_pool_budget[reference,2048]",
        "check_pool_budget[triton]",
    ]
    frame = pd.read_csv(tmp_path / "pool-budget.csv")
    assert list(frame["shapes"]) == [576, 36, 9]
    assert (tmp_path / "pool-budget.png").read_bytes()[:4] == b"\x89PNG"


def test_each_list_prices_its_startup_seconds_measured_or_modelled(app, model_dir, tmp_path):
    args = ["pool-budget", "--model", str(model_dir), "--width-multiples", "128,2048"]
    args += ["--out", str(tmp_path)]
    modelled = json.loads(invoke(app, [*args, "--json"]).stdout)["rows"]
    # --device cpu: the eager recorder's model, 0.005 s a graph (docs/capture-lists.md);
    # 576, 36 and 9 graphs by hand (9 row buckets x 64, x 4 widths; Triton: rows only).
    assert [r["startup_s"] for r in modelled] == pytest.approx([2.88, 0.18, 0.045])
    assert {r["record_s_source"].split(",")[0] for r in modelled} == {"model: 0.005 s per graph"}
    assert all("eager_recorder" in r["record_s_source"] for r in modelled)
    result = invoke(app, [*args, "--record-s-per-graph", "0.4"])
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.stdout.splitlines() if "startup s (record the list)" in ln]
    # 576 x 0.4 = 230.4, 36 x 0.4 = 14.4, 9 x 0.4 = 3.6, three significant figures.
    assert [c.strip() for c in line.split("│")[2:5]] == ["230", "14.4", "3.6"], line
    assert "startup s: shapes x one graph's record seconds (measured: --record-s-per-graph)" in (
        result.stdout
    )
    frame = pd.read_csv(tmp_path / "pool-budget.csv")
    assert frame["startup_s"].tolist() == pytest.approx([230.4, 14.4, 3.6])
    assert set(frame["record_s_source"]) == {"measured: --record-s-per-graph"}


def test_the_table_is_a_stacked_breakdown(app, model_dir, tmp_path):
    args = ["pool-budget", "--model", str(model_dir), "--kernels", "reference"]
    result = invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for text in ("weights", "capture pool (shared, traced)", "256.0 MiB", "KV pool"):
        assert text in result.stdout, text
    for text in ("capture outputs (logits kept)", "each graph its own logits", "shared"):
        assert text in result.stdout, text
    assert "smallest fitting width multiple" in result.stdout
    assert "pass check_pool_budget[reference,2048]" in result.stdout


def test_a_list_that_does_not_fit_fails_its_gate_and_names_one_that_does(app, model_dir, tmp_path):
    device = need_bytes(2048)
    args = ["pool-budget", "--model", str(model_dir), "--kernels", "reference"]
    args += ["--capture-output", "per-graph"]
    args += ["--width-multiples", "128,2048", "--device-memory", str(device)]
    args += ["--gpu-memory-utilization", "1.0", "--out", str(tmp_path), "--json", "--check"]
    result = invoke(app, args)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    fits = {r["width_multiple"]: r["fits"] for r in doc["rows"]}
    assert fits == {128: False, 2048: True}
    assert {r["smallest_fitting_width_multiple"] for r in doc["rows"]} == {2048}
    failed = [g for g in doc["gates"] if not g["passed"]]
    assert [g["name"] for g in failed] == ["check_pool_budget[reference,128]"]
    assert "shrink the capture list" in failed[0]["detail"]
    # Without --check the same answer exits 0: a gate is a verdict, not an error.
    assert invoke(app, [a for a in args if a != "--check"]).exit_code == 0
    # The engine's own capture (one shared logits buffer) fits both lists on the same device.
    shared = invoke(app, [a for a in args if a not in ("--capture-output", "per-graph")])
    assert shared.exit_code == 0, shared.output
    doc = json.loads(shared.stdout)
    assert {r["width_multiple"]: r["fits"] for r in doc["rows"]} == {128: True, 2048: True}
    assert len({r["capture_pool_bytes"] for r in doc["rows"]}) == 1


# Llama-3-70B by hand: embed and head 128256 x 8192 each, per layer q and o 8192^2, k and v
# 8192 x 1024, the MLP 3 x 8192 x 28672 and two norms, plus the final norm; bf16.
L70_WEIGHTS_BYTES = 2 * (
    2 * 128256 * 8192 + 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 8192
)
# 256 rows x (2 x 8192 bf16 streams + 2 x 28672 bf16 projections + 128256 fp32 logits).
L70_ACTIVATION_BYTES = 256 * (2 * 8192 * 2 + 2 * 28672 * 2 + 128256 * 4)
L70_BLOCK_BYTES = 2 * 80 * 8 * 128 * 2 * 16  # K and V, 80 layers, 8 kv heads of 128, bf16, 16


def test_a_70b_that_does_not_fit_141gib_is_a_result_not_bad_input(app, tmp_path):
    args = [
        "pool-budget",
        "--model",
        str(write_llama70b_config(tmp_path / "l70")),
        "--dtype",
        "bfloat16",
    ]
    args += ["--device-memory", "141GiB", "--out", str(tmp_path / "o")]
    result = invoke(app, [*args, "--json", "--check"])
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    usable = math.floor(141 * 2**30 * 0.9)
    assert L70_WEIGHTS_BYTES > usable  # the weights alone overrun the cap
    assert [r["kernel"] for r in doc["rows"]] == ["reference", "triton"]
    for r in doc["rows"]:
        assert r["weights_bytes"] == L70_WEIGHTS_BYTES and r["fits"] is False
        assert r["kv_bytes_per_block"] == L70_BLOCK_BYTES and r["kv_blocks"] == 0
        held = L70_WEIGHTS_BYTES + r["capture_pool_bytes"] + L70_ACTIVATION_BYTES
        held += PERSISTENT_BYTES
        # Short by one 8192-token sequence's blocks plus everything held past the cap.
        assert r["shortfall_bytes"] == 512 * L70_BLOCK_BYTES + held - usable
        assert r["smallest_fitting_width_multiple"] is None
    for g in doc["gates"]:
        assert not g["passed"]
        assert "141.0 GiB x 0.9 leaves -" in g["detail"] and " MB" not in g["detail"]
        assert "weights 131.4 GiB" in g["detail"] and "weights alone exceed" in g["detail"]
    # Without --check the same answer exits 0, in the table, with the shortfall in GiB.
    table = invoke(app, [*args, "--kernels", "triton"])
    assert table.exit_code == 0, table.output
    short = binary_bytes(doc["rows"][1]["shortfall_bytes"])
    assert short.endswith(" GiB") and f"short by {short}" in table.stdout
    assert "no capture list fits 141GiB x 0.9, not even the coarsest" in table.stdout
    assert "FAIL check_pool_budget[triton]" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device-memory", "80 gigs"], "--device-memory: byte size: expected a number"),
        (["--kernels", "flash"], "'--kernels': 'flash': expected some of reference, triton"),
        (["--gpu-memory-utilization", "1.5"], "'--gpu-memory-utilization': Input should be less"),
        (["--gpu-memory-utilization", "0"], "--gpu-memory-utilization 0.0: expected a share"),
        (["--width-multiples", "0"], "'--width-multiples': '0': expected comma-separated positive"),
        (["--max-batch", "0"], "'--max-batch': Input should be greater than or equal to 1"),
        (["--record-s-per-graph", "0"], "--record-s-per-graph 0: expected positive seconds"),
        (["--record-s-per-graph", "-1"], "--record-s-per-graph -1: expected positive seconds"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(app, model_dir, tmp_path, args, message):
    result = invoke(app, ["pool-budget", "--model", str(model_dir), *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nanobench: error: "), result.stderr
    assert message in lines[0]


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_probe_without_cuda_is_bad_input(app, model_dir, tmp_path):
    args = ["pool-budget", "--model", str(model_dir), "--device-memory", "probe"]
    result = invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--device-memory probe: reads free memory on a CUDA device" in result.stderr
    result = invoke(app, [*args, "--device", "cuda", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "no CUDA device here" in result.stderr


@pytest.mark.gpu
def test_probe_reads_free_memory_on_cuda(app, model_dir, tmp_path):
    args = ["pool-budget", "--model", str(model_dir), "--device-memory", "probe"]
    result = invoke(app, [*args, "--device", "cuda", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    (first, *_) = json.loads(result.stdout)["rows"]
    assert 0 < first["device_bytes"] <= torch.cuda.mem_get_info()[1]
