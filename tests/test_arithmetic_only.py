"""Commands that only do arithmetic read config.json and never load, synthesize or write weights."""

from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from engine.config import preset
from nanobench.cli import app
from tests.helpers import HEADS32, write_model


def invoke(args: list[str], env: dict[str, str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "220", **env})


def largest_file_bytes(root) -> int:
    return max((p.stat().st_size for p in root.rglob("*") if p.is_file()), default=0)


def test_pool_budget_on_a_large_preset_writes_no_weights(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # CPU seconds, not wall: the arithmetic runs in this process; a loaded box stretches wall time.
    started = time.process_time()
    result = invoke(
        ["pool-budget", "--model", "llama-3.2-1b", "--json", "--out", str(tmp_path / "out")],
        {"NANOBENCH_CACHE": str(cache)},
    )
    elapsed_s = time.process_time() - started
    assert result.exit_code == 0, result.output
    # 2.5 GB of synthesized bf16 weights is what materialising the preset would write.
    assert largest_file_bytes(cache) < 2**20, sorted(cache.rglob("*"))
    assert elapsed_s < 60, f"pool-budget took {elapsed_s:.1f} s for arithmetic"
    rows = json.loads(result.stdout)["rows"]
    # The weights priced are the preset's own parameter count (an independent count below).
    c = preset("llama-3.2-1b").config
    attn = c.hidden_size * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads)
    mlp = 3 * c.hidden_size * c.intermediate_size
    params = c.vocab_size * c.hidden_size * (1 if c.tie_word_embeddings else 2)
    params += c.num_layers * (attn + mlp + 2 * c.hidden_size) + c.hidden_size
    assert rows[0]["weights_bytes"] == params * 4  # float32, the default --dtype


def test_pool_budget_takes_a_directory_holding_only_config_json(tmp_path):
    full = write_model(tmp_path / "full", HEADS32)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((full / "config.json").read_text())
    args = ["pool-budget", "--json", "--max-batch", "8", "--max-model-len", "256"]
    answers = []
    for directory in (full, bare):
        result = invoke([*args, "--model", str(directory), "--out", str(tmp_path / "o")], {})
        assert result.exit_code == 0, result.output
        answers.append(json.loads(result.stdout)["rows"])
    assert answers[0] == answers[1]


def test_pool_budget_names_a_directory_without_config(tmp_path):
    result = invoke(["pool-budget", "--model", str(tmp_path), "--out", str(tmp_path / "o")], {})
    assert result.exit_code == 2
    assert "config.json" in result.output and "Traceback" not in result.output
