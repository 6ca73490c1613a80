"""Kernel timing rows and the GPU check script: their contract on CPU, the real thing on CUDA.

Runs on CPU under the Triton interpreter (set here, before any kernel is built); the `gpu` tests
turn it off and run on the device.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from nanobench.gpu_check import (  # noqa: E402
    GRAPH_ATOL,
    NO_CUDA,
    check_decode_graph,
    parse_junit,
)
from nanobench.kernel_bench import bench_kernels  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_bench_kernels_rows_on_cpu():
    rows = bench_kernels(
        [(2, 40)],
        device="cpu",
        dtype=torch.float32,
        heads=4,
        kv_heads=2,
        head_dim=32,
        repeat=2,
    )
    assert [r["kernel"] for r in rows] == ["reference", "triton"]
    for r in rows:
        assert (r["rows"], r["context"], r["dtype"]) == (2, 40, "float32")
        assert r["ms"] > 0
        assert r["kv_bytes"] == 2 * 2 * 40 * 2 * 32 * 4
        assert r["gbps"] == pytest.approx(r["kv_bytes"] / (r["ms"] * 1e-3) / 1e9)
        assert r["max_err"] < 1e-4, r


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(points=[(0, 8)]), "rows: expected a positive integer"),
        (dict(points=[(1, 8)], heads=6, kv_heads=4), "kv_heads: 4 does not divide heads 6"),
        (dict(points=[(1, 8)], repeat=0), "repeat: expected a positive integer"),
    ],
)
def test_bench_kernels_rejects_bad_shapes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench_kernels(device="cpu", dtype=torch.float32, **kwargs)


def test_junit_counts_and_failures():
    xml = (
        '<testsuites><testsuite tests="5" failures="1" errors="1" skipped="1">'
        '<testcase classname="tests.a" name="t_ok"/>'
        '<testcase classname="tests.a" name="t_ok2"/>'
        '<testcase classname="tests.a" name="t_bad"><failure message="assert 1 == 2&#10;more"/>'
        "</testcase>"
        '<testcase classname="tests.b" name="t_err"><error message="boom"/></testcase>'
        '<testcase classname="tests.b" name="t_skip"><skipped message="no cuda"/></testcase>'
        "</testsuite></testsuites>"
    )
    counts, failures = parse_junit(xml)
    assert counts == {"passed": 2, "failed": 1, "skipped": 1, "errors": 1}
    assert failures == ["tests.a::t_bad: assert 1 == 2", "tests.b::t_err: boom"]


def test_gpu_check_without_cuda_exits_2_with_one_line(tmp_path):
    # Hide any GPU so this runs the no-CUDA path on every machine, never the full check.
    env = os.environ | {"CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-m", "nanobench.gpu_check", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == NO_CUDA
    assert done.stdout == ""
    assert not (tmp_path / "gpu-check.csv").exists()


@pytest.mark.gpu
@pytest.mark.parametrize("attention", ["triton", "reference"])
def test_cuda_graph_of_decode_step_replays_equal_to_eager(attention, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    row = check_decode_graph(attention, steps=4, iters=3)
    assert row["max_abs_diff"] <= GRAPH_ATOL, row
    assert row["ok"], row
    assert row["rows"] == 4, "three prompts decode in the row bucket of four"
    if attention == "triton":
        assert row["context"] == 256, "the triton plan spans the whole slot table"


@pytest.mark.gpu
def test_bench_kernels_on_cuda(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    rows = bench_kernels([(3, 300)], device="cuda", dtype=torch.bfloat16, repeat=3)
    assert [r["kernel"] for r in rows] == ["reference", "triton"]
    assert all(r["ms"] > 0 for r in rows)
    assert rows[1]["max_err"] < 2e-2, rows[1]
