"""Corpus: state advanced inside `step_inputs`, gpt-fast's own loop (`input_pos += 1`).

The idiom breaks the target contract on purpose: `step_inputs(step)` moves one position tensor
on each call instead of computing it from `step`, so the first pass runs, and the first timed
window (which calls `step_inputs(0)` again) writes past the end of the static cache.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import seeded  # noqa: E402


class Stateful:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device)
        self.input_pos = torch.tensor([prompt_len - 1], device=device)  # (1,)

    def step_inputs(self, step: int):
        self.input_pos += 1  # gpt-fast's decode_n_tokens advances the position in place
        at = int(self.input_pos)
        return (self.ids[:, at : at + 1], self.input_pos), {}  # idx (B, 1), input_pos (1,)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> Stateful:
    return Stateful(rows, prompt_len, steps, device)
