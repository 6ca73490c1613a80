"""Corpus: a cache that grows as a list of tensors, one (B, H, 1, D) entry appended per token.

The idiom: `forward(idx, keys, values)` appends this token's key and value to the lists the
caller holds and attends over `torch.cat(keys)`. Dynamo guards on each list's length and on
every entry, and no compile mode can make a list's length symbolic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import VOCAB, Transformer  # noqa: E402


class ListCacheTransformer(Transformer):
    def forward(self, idx, keys: list, values: list):  # idx (B, 1)
        q, k, v = self.project(idx)  # (B, H, 1, D) each
        keys.append(k)
        values.append(v)
        # Every cached position is visible to the one new token: no mask.
        return self.attend(q, torch.cat(keys, dim=2), torch.cat(values, dim=2), None)


class ListCache:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        torch.manual_seed(0)
        self.forward = ListCacheTransformer(rows, 1).to(device).eval()
        self.ids = torch.randint(0, VOCAB, (rows, prompt_len + steps), device=device)  # (B, P + S)
        self.prompt_len = prompt_len
        with torch.no_grad():
            _, k, v = self.forward.project(self.ids[:, :prompt_len])  # (B, H, P, D) each
        self.keys = list(k.split(1, dim=2))  # P entries of (B, H, 1, D)
        self.values = list(v.split(1, dim=2))

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        # The lists as they stand before step `step`: a function of `step`, in every window.
        del self.keys[at:], self.values[at:]
        return (self.ids[:, at : at + 1], self.keys, self.values), {}  # idx (B, 1)


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> ListCache:
    return ListCache(rows, prompt_len, steps, device)
