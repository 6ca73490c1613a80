"""Corpus: gpt-fast's decode step, a static KV cache written at a tensor position.

The idiom: `forward(idx, input_pos)` with `input_pos` a (1,) tensor; the cache never changes
shape, so one graph serves every step in every compile mode.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import seeded  # noqa: E402


class StaticKV:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device)
        self.prompt_len, self.device = prompt_len, device

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        input_pos = torch.tensor([at], device=self.device)  # (1,)
        return (self.ids[:, at : at + 1], input_pos), {}  # idx (B, 1)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> StaticKV:
    return StaticKV(rows, prompt_len, steps, device)
