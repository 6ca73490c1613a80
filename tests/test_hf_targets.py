"""The built-in targets: transformers' own decode step on `tiny`, static and dynamic cache."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.targets import inputs_at, make_target, shape_signature

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.mark.parametrize("name", ["hf-static", "hf-dynamic"])
def test_explain_a_transformers_decode_step(name):
    result = runner.invoke(app, ["explain", "--target", name, "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    # transformers' Llama decode step traces whole with either cache.
    assert (row["graphs"], row["graph_breaks"], row["break_reasons"]) == (1, 0, [])
    # Its guards on Python values (the model class, config flags) do not change per step.
    assert row["value_guard_text"] == [] and row["remedies"] == []
    assert row["target"] == name and row["ops"] > 0


def test_a_dynamic_cache_grows_by_one_token_per_step_and_a_static_one_does_not():
    from engine.sources import materialize_preset

    model = str(materialize_preset("tiny"))
    shapes = {}
    for name in ("hf-static", "hf-dynamic"):
        target = make_target(
            name, model=model, rows=2, prompt_len=5, steps=3, device="cpu", dtype="float32"
        )
        # step_inputs(0) sees the cache after the prefill: 5 tokens held, or 5 + 3 slots.
        signature = dict(shape_signature(*inputs_at(target, 0)))
        shapes[name] = signature["kwargs['cache'].layers[0].keys"]
        assert signature["kwargs['input_ids']"] == (2, 1)
    # (B, Hkv, W, D) for tiny: 4 kv heads of 32.
    assert shapes == {"hf-static": (2, 4, 8, 32), "hf-dynamic": (2, 4, 5, 32)}
