"""Corpus: the position passed as a Python int, `forward(idx, pos)`.

The idiom: the cache row is written at `pos` and the mask row read at `pos`, both Python ints.
Dynamo specialises an int argument when sizes are static (one build per position, so the run
walks past the recompile limit) and makes it a SymInt under `dynamic=True` (one build).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # gptfast.py, the corpus's tiny model, beside us
from gptfast import Transformer, seeded  # noqa: E402


class IntPositionTransformer(Transformer):
    def forward(self, idx, pos: int):  # idx (B, 1)
        q, k, v = self.project(idx)  # (B, H, 1, D) each
        self.kv_cache.k_cache[:, :, pos : pos + 1] = k
        self.kv_cache.v_cache[:, :, pos : pos + 1] = v
        mask = self.causal_mask[None, None, pos : pos + 1]  # (1, 1, 1, L)
        return self.attend(q, self.kv_cache.k_cache, self.kv_cache.v_cache, mask)


class IntPosition:
    def __init__(self, rows: int, prompt_len: int, steps: int, device: str) -> None:
        self.forward, self.ids = seeded(rows, prompt_len, steps, device, IntPositionTransformer)
        self.prompt_len = prompt_len

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        return (self.ids[:, at : at + 1], at), {}  # idx (B, 1), pos int


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> IntPosition:
    return IntPosition(rows, prompt_len, steps, device)
