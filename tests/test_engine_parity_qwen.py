"""Qwen2 and Qwen3 against transformers' own classes, on checkpoints transformers itself saved.

Qwen2 adds a bias to q/k/v; Qwen3 adds a per-head RMSNorm on q and k and an explicit head_dim
that differs from hidden_size / heads. transformers initialises biases to zero and norms to one,
which would hide either feature, so both are perturbed before saving.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from engine.engine import Engine
from engine.weights import read_config
from tests.helpers import prompts
from tests.test_engine_parity import assert_matches_transformers, engine_run

STEPS = 24
COMMON = dict(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rope_theta=10000.0,
    initializer_range=0.2,  # larger than 0.02 so greedy tokens vary
)


def qwen_dir(kind: str, directory):
    torch.manual_seed(0)
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**COMMON, tie_word_embeddings=False))
    else:
        # head_dim 48 != 128 / 4: the engine must read it, not derive it.
        model = Qwen3ForCausalLM(Qwen3Config(**COMMON, head_dim=48, tie_word_embeddings=True))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith(("q_norm.weight", "k_norm.weight")):
                p.copy_(1.0 + 0.5 * torch.randn_like(p))
    model.save_pretrained(str(directory))
    return directory


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_qwen_logits_and_greedy_tokens_match_transformers(kind, tmp_path):
    directory = qwen_dir(kind, tmp_path / kind)
    config = read_config(directory)
    assert config.qkv_bias == (kind == "qwen2") and config.qk_norm == (kind == "qwen3")
    engine = Engine.from_checkpoint(str(directory), max_model_len=128, block_size=8)
    batch = prompts(4, [9, 16, 3, 12], config.vocab_size, seed=7)
    tokens, logits = engine_run(engine, batch, STEPS)
    worst = assert_matches_transformers(directory, batch, tokens, logits, STEPS)
    print(f"{kind}: worst relative logit error {worst:.2e}")


def test_qwen_sliding_window_and_biased_o_proj_are_refused(tmp_path):
    from engine.config import ConfigError, ModelConfig

    base = Qwen2Config(**COMMON).to_dict() | {"architectures": ["Qwen2ForCausalLM"]}
    with pytest.raises(ConfigError, match="use_sliding_window"):
        ModelConfig.from_hf(base | {"use_sliding_window": True, "sliding_window": 64})
    qwen3 = Qwen3Config(**COMMON).to_dict() | {"architectures": ["Qwen3ForCausalLM"]}
    with pytest.raises(ConfigError, match="attention_bias"):
        ModelConfig.from_hf(qwen3 | {"attention_bias": True})
