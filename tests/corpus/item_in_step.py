"""Corpus: a `.item()` in the step, attending only over the filled part of the cache.

The idiom: `n = input_pos.max().item() + 1` then `k_cache[:, :, :n]`, a common way to skip the
empty tail of a static cache. Dynamo breaks the graph at `.item()`; the rest of the step runs in
a resume function that takes `n` as an int argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import Transformer, seeded  # noqa: E402


class FilledTransformer(Transformer):
    def forward(self, idx, input_pos):  # idx (B, 1); input_pos (1,)
        q, k, v = self.project(idx)  # (B, H, 1, D) each
        k, v = self.kv_cache.update(input_pos, k, v)  # (B, H, L, D)
        n = input_pos.max().item() + 1  # the host read: dynamo breaks the graph here
        mask = self.causal_mask[None, None, input_pos, :n]  # (1, 1, 1, n)
        return self.attend(q, k[:, :, :n], v[:, :, :n], mask)


class ItemInStep:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device, FilledTransformer)
        self.prompt_len, self.device = prompt_len, device

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        input_pos = torch.tensor([at], device=self.device)  # (1,)
        return (self.ids[:, at : at + 1], input_pos), {}  # idx (B, 1)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> ItemInStep:
    return ItemInStep(rows, prompt_len, steps, device)
