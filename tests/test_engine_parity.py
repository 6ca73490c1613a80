"""The engine against its peer: transformers' own model class (LlamaForCausalLM, ...) on one directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.engine import Engine
from engine.sources import materialize_preset
from engine.weights import read_config
from tests.helpers import (
    TINY_GQA,
    TINY_MHA,
    forward_terms,
    prompts,
    rounding_rtol,
    write_model,
)

STEPS = 64


def hf_run(directory, prompt: list[int], steps: int):
    hf = AutoModelForCausalLM.from_pretrained(
        str(directory), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = torch.tensor([prompt])
    out = hf.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=steps,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    return out.sequences[0, len(prompt) :].tolist(), [lg[0] for lg in out.logits]


def engine_run(engine: Engine, batch: list[list[int]], steps: int):
    logits = [engine.prefill(batch)]
    tokens = logits[0].argmax(-1).tolist()
    out = [[t] for t in tokens]
    for _ in range(steps - 1):
        logits.append(engine.decode_step(tokens).clone())
        tokens = logits[-1].argmax(-1).tolist()
        for row, t in enumerate(tokens):
            out[row].append(t)
    engine.release_all()
    return out, logits


def assert_matches_transformers(directory, batch, tokens, logits, steps: int) -> float:
    """Greedy tokens identical and every step's logits within rounding; returns the worst error.

    transformers runs sdpa over a dense cache and its own GEMM shapes, the engine a paged read:
    the same sums in other orders, so the tolerance is the forward's rounding (rounding_rtol).
    """
    config = read_config(Path(directory))
    width = max(len(p) for p in batch) + steps
    rtol = rounding_rtol(torch.float32, forward_terms(config, width))
    worst = 0.0
    for row, prompt in enumerate(batch):
        hf_tokens, hf_logits = hf_run(directory, prompt, steps)
        assert tokens[row] == hf_tokens, f"row {row}: greedy tokens diverge from transformers"
        for step, ref in enumerate(hf_logits):
            err = rel_err(logits[step][row], ref)
            worst = max(worst, err)
            assert err <= rtol, f"row {row} step {step}: relative error {err:.2e} > {rtol:.2e}"
    assert len(set(tokens[0])) > 4, "degenerate synthetic model: the comparison would be weak"
    return worst


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def model_dir(name: str, tmp_path_factory):
    if name == "tiny":
        return materialize_preset("tiny")
    config = {"mha-untied": TINY_MHA, "gqa-ragged-blocks": TINY_GQA}[name]
    return write_model(tmp_path_factory.mktemp(name), config)


def needs_packing(layout: str):
    from engine.packed import packing_unavailable

    why = packing_unavailable("cpu", "float32") if layout == "packed" else None
    return pytest.mark.skipif(why is not None, reason=why or "")


@pytest.mark.parametrize(
    "name,block_size,lengths,layout",
    [
        ("tiny", 16, [16, 5, 11, 23], "auto"),
        ("mha-untied", 16, [9, 16, 3, 12], "auto"),
        ("gqa-ragged-blocks", 7, [10, 15, 4, 22], "auto"),
        # Every matrix in oneDNN's layout (the auto engine packs only big ones): untied, tied.
        pytest.param("mha-untied", 16, [9, 16, 3, 12], "packed", marks=needs_packing("packed")),
        pytest.param(
            "gqa-ragged-blocks", 7, [7, 2, 19, 8], "packed", marks=needs_packing("packed")
        ),
    ],
)
@pytest.mark.parametrize("attention", ["reference"])
def test_logits_and_greedy_tokens_match_transformers(
    name, block_size, lengths, layout, attention, tmp_path_factory
):
    directory = model_dir(name, tmp_path_factory)
    engine = Engine.from_checkpoint(
        str(directory),
        max_model_len=128,
        block_size=block_size,
        attention=attention,
        linear_layout=layout,
    )
    if layout == "packed":
        assert engine.linear_layout == "packed" and engine.model.packed, "nothing was packed"
    batch = prompts(4, lengths, engine.model_config.vocab_size, seed=len(name))
    tokens, logits = engine_run(engine, batch, STEPS)
    worst = assert_matches_transformers(directory, batch, tokens, logits, STEPS)
    print(f"{name}: worst relative logit error {worst:.2e}")  # about 1-2e-6 on AVX-512


def test_generate_returns_exactly_max_new_tokens_and_frees_blocks():
    engine = Engine.from_checkpoint("tiny", max_model_len=64)
    batch = prompts(3, [4, 9, 2], 4096)
    out = engine.generate(batch, 12)
    assert [len(o) for o in out] == [12, 12, 12]
    assert engine.cache.audit() == []
    assert engine.cache.allocator.num_free == engine.cache.allocator.num_blocks
    again = engine.generate(batch, 12)
    assert again == out, "greedy generation must be deterministic across calls"


def test_stop_token_ends_a_row_early():
    engine = Engine.from_checkpoint("tiny", max_model_len=64)
    batch = prompts(2, [4, 6], 4096)
    full = engine.generate(batch, 10)
    stop = full[0][3]
    out = engine.generate(batch, 10, stop_token_ids=[stop])
    assert out[0] == full[0][: full[0].index(stop) + 1]
    if stop in full[1]:
        assert out[1] == full[1][: full[1].index(stop) + 1]
    else:
        assert out[1] == full[1]


def test_seeded_sampling_is_reproducible_and_differs_from_greedy():
    from engine.sampler import SamplingParams

    engine = Engine.from_checkpoint("tiny", max_model_len=64)
    batch = prompts(2, [5, 7], 4096)
    params = SamplingParams(temperature=1.5, top_k=50, top_p=0.9, seed=3)
    a = engine.generate(batch, 16, sampling=params)
    b = engine.generate(batch, 16, sampling=params)
    assert a == b
    assert a != engine.generate(batch, 16)
