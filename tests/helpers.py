"""Shared builders for tests: small checkpoints written as real HF directories."""

from __future__ import annotations

import math
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


def rounding_rtol(dtype: torch.dtype, terms: int) -> float:
    """Relative tolerance (to the result's scale) for one quantity computed two ways: another
    kernel, row count, thread count or CPU ISA, i.e. the same sums added in another order.

    Each addition rounds by at most eps/2; over `terms` additions the errors of two orders add
    like a random walk, about sqrt(terms) * eps of the scale (the worst case, terms * eps, is
    never approached by sums of mixed signs). A margin of 8 covers the bias of same-sign terms
    without letting a real bug through: a wrong mask, position or row moves logits by tenths.
    """
    return 8 * math.sqrt(terms) * torch.finfo(dtype).eps


def forward_terms(config: ModelConfig, width: int) -> int:
    """Additions a logit depends on, for rounding_rtol: per layer the longest reductions (the
    hidden and intermediate GEMMs and the attention over `width` tokens), over every layer."""
    return config.num_layers * (config.hidden_size + config.intermediate_size + width)


def assert_close_rounding(
    got: torch.Tensor, want: torch.Tensor, terms: int, what: str = ""
) -> None:
    """got == want up to the rounding of `terms` additions in another order (rounding_rtol)."""
    scale = float(want.abs().max())
    tol = rounding_rtol(want.dtype, terms) * scale
    err = (got.float() - want.float()).abs()
    assert float(err.max()) <= tol, (
        f"{what}: max |diff| {float(err.max()):.3e} (mean {float(err.mean()):.3e}) over the "
        f"rounding tolerance {tol:.3e} ({terms} terms, {want.dtype}, scale {scale:.3g})"
    )
