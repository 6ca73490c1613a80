"""Token sampling: greedy, or temperature / top-k / top-p from a seeded generator.

What it is: `SamplingParams` and `sample(logits, params, generator)`.
What it is not: part of any recorded or compiled region. It runs after the forward returns,
on logits the engine has already copied out, so a replay's output buffer is never held.
Invariant: the same seed and logits give the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k: expected >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: expected in (0, 1], got {self.top_p}")


def greedy(logits: torch.Tensor) -> list[int]:
    return logits.argmax(dim=-1).tolist()


def sample(logits: torch.Tensor, params: SamplingParams | None, generator=None) -> list[int]:
    """logits: (B, V) fp32. Greedy when params is None or temperature is 0."""
    if params is None or params.temperature == 0:
        return greedy(logits)
    scores = logits / params.temperature  # (B, V)
    if params.top_k:
        kth = torch.topk(scores, min(params.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1:
        sorted_scores, order = torch.sort(scores, descending=True, dim=-1)  # (B, V)
        cum = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)  # (B, V)
        drop = cum - torch.softmax(sorted_scores, dim=-1) > params.top_p
        scores = scores.scatter(-1, order, sorted_scores.masked_fill(drop, float("-inf")))
    probs = torch.softmax(scores, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1).tolist()
