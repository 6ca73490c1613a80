"""Corpus: a two-layer attention step over a static KV cache, its position read with `.item()`.

The idiom: `pos = input_pos.item()` (a 0-d tensor) then, in each layer, the cache row written at
`pos` and attention over `cache[:, :, : pos + 1]`, the filled part. Dynamo breaks the graph at
`.item()`; the layers run in a resume function that takes `pos` as an int. Static compiles
rebuild that function every step (a new int each step). `dynamic=True` makes it a SymInt, but
the slice's strides are guarded on: where `pos + 1` reaches the cache's end the slice is the
whole cache, contiguous, and dynamo rebuilds once there. `factory` sizes the cache exactly to
the run (prompt_len + steps: the last step reaches the end); `headroom` leaves 32 slots spare.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM, HEADS, LAYERS = 64, 32, 2, 2
HEAD_DIM = DIM // HEADS
SPARE = 32  # the headroom factory's spare cache slots


class Layer(nn.Module):
    """One attention layer with its own (B, H, max_len, D) cache, written in place at `pos`."""

    def __init__(self, rows: int, max_len: int) -> None:
        super().__init__()
        self.wqkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        shape = (rows, HEADS, max_len, HEAD_DIM)
        self.register_buffer("k_cache", torch.zeros(shape))
        self.register_buffer("v_cache", torch.zeros(shape))

    def forward(self, x, pos: int):  # x (B, 1, DIM); pos the int read off input_pos
        b = x.shape[0]
        q, k, v = [
            t.view(b, 1, HEADS, HEAD_DIM).transpose(1, 2)  # (B, H, 1, D)
            for t in self.wqkv(x).split(DIM, dim=-1)
        ]
        self.k_cache[:, :, pos : pos + 1] = k
        self.v_cache[:, :, pos : pos + 1] = v
        keys = self.k_cache[:, :, : pos + 1]  # (B, H, pos + 1, D): the filled part
        values = self.v_cache[:, :, : pos + 1]
        scores = q @ keys.transpose(-2, -1) / HEAD_DIM**0.5  # (B, H, 1, pos + 1)
        y = F.softmax(scores, dim=-1) @ values  # (B, H, 1, D)
        return x + self.wo(y.transpose(1, 2).reshape(b, 1, DIM))  # (B, 1, DIM)


class Step(nn.Module):
    def __init__(self, rows: int, max_len: int) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Layer(rows, max_len) for _ in range(LAYERS))
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx, input_pos):  # idx (B, 1); input_pos a 0-d tensor
        pos = input_pos.item()  # the host read: dynamo breaks the graph here
        x = self.tok_embeddings(idx)  # (B, 1, DIM)
        for layer in self.layers:
            x = layer(x, pos)
        return self.output(x)  # (B, 1, VOCAB)


class CacheSlice:
    def __init__(self, rows: int, prompt_len: int, steps: int, spare: int) -> None:
        torch.manual_seed(0)
        self.forward = Step(rows, prompt_len + steps + spare).eval()
        self.ids = torch.randint(0, VOCAB, (rows, prompt_len + steps))  # (B, P + S)
        self.prompt_len = prompt_len

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        return (self.ids[:, at : at + 1], torch.tensor(at)), {}  # idx (B, 1); input_pos 0-d


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> CacheSlice:
    """The cache sized exactly to the run: the last step's slice covers all of it."""
    return CacheSlice(rows, prompt_len, steps, 0)


def headroom(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> CacheSlice:
    """SPARE slots past the run: no step's slice reaches the cache's end."""
    return CacheSlice(rows, prompt_len, steps, SPARE)
