"""The built-in targets: transformers' own decode step on `tiny`, static and dynamic cache."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.step.signatures import shape_signature
from nanobench.harness.step.targets import inputs_at, make_target

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
        shapes[name] = signature["kwargs['past_key_values'].layers[0].keys"]
        assert signature["kwargs['input_ids']"] == (2, 1)
    # (B, Hkv, W, D) for tiny: 4 kv heads of 32.
    assert shapes == {"hf-static": (2, 4, 8, 32), "hf-dynamic": (2, 4, 5, 32)}


def forward_of_transformers_5_17(real):
    """`LlamaForCausalLM.forward` as transformers 5.17.0 declares it: `past_key_values` is its
    one cache parameter; any other keyword (`cache`) lands in `**kwargs`, which no layer reads,
    so the forward runs with no history. Delegates to the installed forward otherwise."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values=None, inputs_embeds=None, labels=None, use_cache=None,
                cache_position=None, logits_to_keep=0, **kwargs):  # fmt: skip
        kwargs.pop("cache", None)  # swallowed: 5.17 has no parameter of that name
        return real(
            self, input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values, inputs_embeds=inputs_embeds, labels=labels,
            use_cache=use_cache, cache_position=cache_position, logits_to_keep=logits_to_keep,
        )  # fmt: skip

    return forward


@pytest.mark.parametrize("forward", ["installed", "transformers-5.17"])
def test_the_static_cache_holds_the_prompt_after_prefill_and_one_more_token_per_step(
    forward, monkeypatch
):
    from transformers import LlamaForCausalLM, StaticCache

    from engine.sources import materialize_preset

    if forward != "installed":
        monkeypatch.setattr(
            LlamaForCausalLM, "forward", forward_of_transformers_5_17(LlamaForCausalLM.forward)
        )
    target = make_target(
        "hf-static", model=str(materialize_preset("tiny")), rows=2, prompt_len=5, steps=3,
        device="cpu", dtype="float32",
    )  # fmt: skip
    args, kwargs = inputs_at(target, 0)
    # The cache the step hands over, under whichever keyword it is passed.
    (cache,) = [v for v in kwargs.values() if isinstance(v, StaticCache)]
    assert int(cache.get_seq_length()) == 5  # the prompt, prefilled
    target.forward(*args, **kwargs)
    assert int(cache.get_seq_length()) == 6  # step 0 read the prompt and wrote its token
