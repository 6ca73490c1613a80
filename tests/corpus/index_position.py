"""Corpus: the position passed as a Python int that indexes the cache, `forward(idx, pos)`.

The idiom (the toy of issue #44): the cache row is written at `k_cache[:, :, pos]`, an integer
index, not a slice. `dynamic=True` makes `pos` a SymInt, but indexing a tensor with it
specialises it again: one build per position under either mode (6 in 6 steps on torch 2.13,
where the slice `pos : pos + 1` of `int_position` builds once), so the `symbolic` remedy is one
a dry run must not print as a fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import Transformer, seeded  # noqa: E402


class IndexPositionTransformer(Transformer):
    def forward(self, idx, pos: int):  # idx (B, 1)
        q, k, v = self.project(idx)  # (B, H, 1, D) each
        self.kv_cache.k_cache[:, :, pos] = k[:, :, 0]  # (B, H, D)
        self.kv_cache.v_cache[:, :, pos] = v[:, :, 0]  # (B, H, D)
        mask = self.causal_mask[None, None, pos : pos + 1]  # (1, 1, 1, L)
        return self.attend(q, self.kv_cache.k_cache, self.kv_cache.v_cache, mask)


class IndexPosition:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device, IndexPositionTransformer)
        self.prompt_len = prompt_len

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        return (self.ids[:, at : at + 1], at), {}  # idx (B, 1), pos int


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> IndexPosition:
    return IndexPosition(rows, prompt_len, steps, device)
