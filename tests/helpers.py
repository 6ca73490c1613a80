"""Shared builders for tests: small checkpoints written as real HF directories."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.config import ModelConfig, RopeScaling
from engine.weights import synthesize_weights, write_checkpoint

TINY_MHA = ModelConfig(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=4,
    head_dim=32,
    rope_theta=10000.0,
    rope_scaling=None,
    tie_word_embeddings=False,
)
TINY_GQA = ModelConfig(
    vocab_size=640,
    hidden_size=192,
    intermediate_size=320,
    num_layers=3,
    num_heads=6,
    num_kv_heads=2,
    head_dim=32,
    rope_theta=500000.0,
    rope_scaling=RopeScaling(factor=8.0, original_max_position_embeddings=64),
    tie_word_embeddings=True,
)
# 32 query heads in one small layer: the head count the capture and pool tables are quoted at.
HEADS32 = ModelConfig(
    vocab_size=256,
    hidden_size=256,
    intermediate_size=128,
    num_layers=1,
    num_heads=32,
    num_kv_heads=8,
    head_dim=8,
    rope_theta=10000.0,
    rope_scaling=None,
    tie_word_embeddings=True,
)


def write_model(directory: Path, config: ModelConfig, seed: int = 1) -> Path:
    write_checkpoint(directory, config, synthesize_weights(config, seed, torch.float32))
    return directory


def prompts(n: int, lengths: list[int], vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (lengths[i],), generator=g).tolist() for i in range(n)]
