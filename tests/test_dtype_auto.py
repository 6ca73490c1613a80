"""--dtype auto: the checkpoint's stored dtype on CUDA, float32 on CPU; explicit dtypes kept."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from engine.config import PRESETS
from nanobench.cli import app
from nanobench.harness.cli.validate import dtype_option
from nanobench.harness.errors import BadInput


def hf_dir(tmp_path, **fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return str(tmp_path)


def test_auto_is_float32_on_cpu_and_the_stored_dtype_on_cuda(tmp_path):
    assert dtype_option("auto", "llama-3.2-1b", "cpu") == "float32"
    assert dtype_option("auto", "llama-3.2-1b", "cuda") == "bfloat16"  # its disk dtype
    assert dtype_option("auto", "tiny", "cuda") == "float32"
    assert dtype_option("auto", hf_dir(tmp_path, torch_dtype="float16"), "cuda") == "float16"
    # transformers >= 4.56 writes `dtype`; an unknown or missing one falls back to float32
    assert dtype_option("auto", hf_dir(tmp_path, dtype="bfloat16"), "cuda") == "bfloat16"
    assert dtype_option("auto", hf_dir(tmp_path, torch_dtype="float8"), "cuda") == "float32"
    assert dtype_option("bfloat16", "tiny", "cpu") == "bfloat16"
    with pytest.raises(BadInput, match="--dtype 'fp8'"):
        dtype_option("fp8", "tiny", "cpu")


def test_pool_budget_defaults_to_auto(tmp_path):
    base = ["pool-budget", "--model", "llama-3.2-1b", "--kernels", "triton", "--json"]
    base += ["--device-memory", "80GiB", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["rows"]
    assert row["dtype"] == "float32"  # auto on the CPU
    assert row["weights_bytes"] == PRESETS["llama-3.2-1b"].config.num_params * 4
    bad = CliRunner().invoke(app, [*base, "--dtype", "fp8"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
