"""Corpus: a branch on a tensor's value inside the step.

The idiom: `if (input_pos < window).all():` picks the full-cache path or a sliding-window path;
Python needs the tensor's truth value, so dynamo breaks the graph at the `if`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import Transformer, seeded  # noqa: E402

WINDOW = 4096  # longer than any tiny run: the full-cache branch is taken every step


class BranchingTransformer(Transformer):
    def forward(self, idx, input_pos):  # idx (B, 1); input_pos (1,)
        q, k, v = self.project(idx)  # (B, H, 1, D) each
        k, v = self.kv_cache.update(input_pos, k, v)  # (B, H, L, D)
        mask = self.causal_mask[None, None, input_pos]  # (1, 1, 1, L)
        if (input_pos < WINDOW).all():  # a tensor's truth value: dynamo breaks the graph here
            return self.attend(q, k, v, mask)
        keep = torch.arange(k.size(2), device=k.device) > input_pos - WINDOW  # (L,)
        return self.attend(q, k, v, mask & keep)


class TensorBranch:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device, BranchingTransformer)
        self.prompt_len, self.device = prompt_len, device

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        input_pos = torch.tensor([at], device=self.device)  # (1,)
        return (self.ids[:, at : at + 1], input_pos), {}  # idx (B, 1)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> TensorBranch:
    return TensorBranch(rows, prompt_len, steps, device)
