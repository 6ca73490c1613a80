"""Corpus: sampling inside the step, gpt-fast's `decode_one_token` (forward, then top-k sample).

The idiom: the compiled callable is a function of the model, the token and the position that
samples with a temperature and a top-k passed as Python numbers; they are the same every step,
so their guards never fail and one graph serves every step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import sample, seeded  # noqa: E402


class Sampling:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.model, self.ids = seeded(rows, prompt_len, steps, device)
        self.prompt_len, self.device = prompt_len, device

        def decode_one_token(x, input_pos, temperature: float, top_k: int):  # x (B, 1)
            logits = self.model(x, input_pos)  # (B, 1, V)
            return sample(logits, temperature=temperature, top_k=top_k)  # (B, 1)

        self.forward = decode_one_token

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        input_pos = torch.tensor([at], device=self.device)  # (1,)
        return (self.ids[:, at : at + 1], input_pos), {"temperature": 0.8, "top_k": 5}


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> Sampling:
    return Sampling(rows, prompt_len, steps, device)
