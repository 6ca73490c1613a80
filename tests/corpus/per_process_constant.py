"""Corpus: a decode step that bakes a per-process constant into the traced code.

The idiom: a scale read once per process (here from the process id, as a seed, a timestamp or a
host name would be) and used as a Python float in the forward. Dynamo specializes on it, so the
graph Inductor sees holds the number: a warm start in another process computes another FX graph
cache key and misses, though nothing a user changed. `nanobench startup` must say so, naming the
component of the key that changed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import seeded  # noqa: E402

SCALE = 1.0 + (os.getpid() % 997) / 1e6  # differs from process to process


class PerProcessConstant:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.model, self.ids = seeded(rows, prompt_len, steps, device)
        self.prompt_len, self.device = prompt_len, device

    def forward(self, idx, input_pos):  # idx (B, 1); input_pos (1,)
        return self.model(idx, input_pos) * SCALE  # (B, 1, V)

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        input_pos = torch.tensor([at], device=self.device)  # (1,)
        return (self.ids[:, at : at + 1], input_pos), {}  # idx (B, 1)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str):
    return PerProcessConstant(rows, prompt_len, steps, device)
