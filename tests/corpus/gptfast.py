"""The corpus's tiny model, written as gpt-fast writes its `Transformer` (not nanobench's engine).

What it is: `Transformer` (one attention block over a static `KVCache` whose rows are written at a
tensor `input_pos`, as gpt-fast's `model.py`), `sample` (gpt-fast's temperature and top-k sampler,
sync-free through `exponential_`) and `seeded` (a seeded model and token stream). Every corpus
idiom builds on these so that only the idiom differs between two files.
What it is not: a corpus entry itself (it has no factory) or a model anyone would serve.
Invariant: tiny sizes, deterministic weights; nothing here reads a tensor into Python.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM, HEADS = 64, 32, 2
HEAD_DIM = DIM // HEADS


class KVCache(nn.Module):
    """gpt-fast's cache: (B, H, max_len, D) buffers written in place at `input_pos`."""

    def __init__(self, rows: int, max_len: int) -> None:
        super().__init__()
        shape = (rows, HEADS, max_len, HEAD_DIM)
        self.register_buffer("k_cache", torch.zeros(shape))
        self.register_buffer("v_cache", torch.zeros(shape))

    def update(self, input_pos, k, v):  # input_pos (S,); k, v (B, H, S, D)
        self.k_cache[:, :, input_pos] = k
        self.v_cache[:, :, input_pos] = v
        return self.k_cache, self.v_cache  # (B, H, max_len, D) each


class Transformer(nn.Module):
    def __init__(self, rows: int, max_len: int) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.wqkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        self.kv_cache = KVCache(rows, max_len)
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))  # (L, L)
        self.register_buffer("causal_mask", causal)

    def project(self, idx):  # idx (B, S)
        b, s = idx.shape
        x = self.tok_embeddings(idx)  # (B, S, DIM)
        q, k, v = self.wqkv(x).split(DIM, dim=-1)  # (B, S, DIM) each
        return [t.view(b, s, HEADS, HEAD_DIM).transpose(1, 2) for t in (q, k, v)]  # (B, H, S, D)

    def attend(self, q, k, v, mask):  # q (B, H, S, D); k, v (B, H, L, D); mask (1, 1, S, L)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, S, D)
        b, _, s, _ = y.shape
        return self.output(self.wo(y.transpose(1, 2).reshape(b, s, DIM)))  # (B, S, VOCAB)

    def forward(self, idx, input_pos):  # idx (B, S); input_pos (S,)
        q, k, v = self.project(idx)
        k, v = self.kv_cache.update(input_pos, k, v)  # (B, H, L, D)
        mask = self.causal_mask[None, None, input_pos]  # (1, 1, S, L)
        return self.attend(q, k, v, mask)


def sample(logits, temperature: float = 1.0, top_k: int | None = None):  # logits (B, S, V)
    """gpt-fast's sampler: the last position, scaled, cut to the top k, drawn without a sync."""
    logits = logits[:, -1] / max(temperature, 1e-5)  # (B, V)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))  # (B, k)
        logits = torch.where(logits < v[:, -1:], -float("Inf"), logits)  # (B, V)
    probs = F.softmax(logits, dim=-1)  # (B, V)
    q = torch.empty_like(probs).exponential_(1)  # (B, V)
    return torch.argmax(probs / q, dim=-1, keepdim=True).to(torch.int)  # (B, 1)


def seeded(rows: int, prompt_len: int, steps: int, device: str, model=Transformer):
    """A seeded model whose cache holds the prefilled prompt, and the token stream (B, P + S)."""
    torch.manual_seed(0)
    made = model(rows, prompt_len + steps).to(device).eval()
    ids = torch.randint(0, VOCAB, (rows, prompt_len + steps), device=device)  # (B, P + S)
    with torch.no_grad():
        # The prefill, outside any traced region, through gpt-fast's own tensor-position forward.
        Transformer.forward(made, ids[:, :prompt_len], torch.arange(prompt_len, device=device))
    return made, ids
