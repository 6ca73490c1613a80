"""A gpt-fast-style decode step at any size, for pricing capture memory (issue 25).

What it is: gpt-fast's `Transformer` as its `model.py` writes it (ModelArgs, a static `KVCache`
per layer written at a tensor `input_pos`, fused `wqkv`, GQA by `repeat_interleave`, RoPE from a
`freqs_cis` buffer, a boolean causal mask buffer, SwiGLU, RMSNorm), built as its `generate.py`
does (`Transformer(args)` then `.to(device=, dtype=)`, then `setup_caches` inside `with
torch.device(device)`), plus the factories of nanobench's target protocol: `tiny`, `small` and
`llama3_70b` (Llama-3-70B's shape, static caches for 8192 tokens), each prefilling the prompt
in the factory, and `llama3_70b_dims` for hand counts.
What it is not: gpt-fast itself (no quantisation, no tensor parallelism, no sampling) or a
model anyone would serve: weights are whatever `nn.Linear` initialises.
Invariant: the step reads no tensor value into Python, so it runs on the meta device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ModelArgs:
    block_size: int
    vocab_size: int
    n_layer: int
    n_head: int
    dim: int
    intermediate_size: int
    n_local_heads: int
    rope_base: float = 500000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head


class KVCache(nn.Module):
    def __init__(self, max_batch_size, max_seq_length, n_heads, head_dim, dtype):
        super().__init__()
        shape = (max_batch_size, n_heads, max_seq_length, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos, k_val, v_val):  # input_pos (S,); k_val, v_val (B, H, S, D)
        k_out, v_out = self.k_cache, self.v_cache
        k_out[:, :, input_pos] = k_val
        v_out[:, :, input_pos] = v_val
        return k_out, v_out  # (B, H, max_seq, D) each


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):  # x (..., dim)
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight  # (..., dim)


def apply_rotary_emb(x, freqs_cis):  # x (B, S, H, D); freqs_cis (S, D/2, 2)
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)  # (B, S, H, D/2, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out = torch.stack(
        [
            xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
            xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
        ],
        -1,
    )  # (B, S, H, D/2, 2)
    return x_out.flatten(3).type_as(x)  # (B, S, H, D)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        total_head_dim = (args.n_head + 2 * args.n_local_heads) * args.head_dim
        self.wqkv = nn.Linear(args.dim, total_head_dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.kv_cache = None
        self.n_head, self.n_local_heads = args.n_head, args.n_local_heads
        self.head_dim, self.dim = args.head_dim, args.dim

    def forward(self, x, freqs_cis, mask, input_pos):  # x (B, S, dim)
        bsz, seqlen, _ = x.shape
        kv_size = self.n_local_heads * self.head_dim
        q, k, v = self.wqkv(x).split([self.dim, kv_size, kv_size], dim=-1)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)  # (B, S, H, D)
        k = k.view(bsz, seqlen, self.n_local_heads, self.head_dim)  # (B, S, Hkv, D)
        v = v.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H*, S, D)
        k, v = self.kv_cache.update(input_pos, k, v)  # (B, Hkv, max_seq, D)
        k = k.repeat_interleave(self.n_head // self.n_local_heads, dim=1)  # (B, H, max_seq, D)
        v = v.repeat_interleave(self.n_head // self.n_local_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)  # (B,H,S,D)
        return self.wo(y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim))  # (B,S,dim)


class FeedForward(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.w3 = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.w2 = nn.Linear(args.intermediate_size, args.dim, bias=False)

    def forward(self, x):  # x (B, S, dim)
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (B, S, dim)


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x, input_pos, freqs_cis, mask):  # x (B, S, dim)
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))  # (B, S, dim)


def precompute_freqs_cis(seq_len: int, n_elem: int, base: float, dtype) -> torch.Tensor:
    freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2)[: (n_elem // 2)].float() / n_elem))
    t = torch.arange(seq_len, device=freqs.device)  # (L,)
    freqs = torch.outer(t, freqs)  # (L, D/2)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # (L, D/2) complex
    cache = torch.stack([freqs_cis.real, freqs_cis.imag], dim=-1)  # (L, D/2, 2)
    return cache.to(dtype=dtype)


class Transformer(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layer))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.freqs_cis = None
        self.causal_mask = None

    def setup_caches(self, max_batch_size: int, max_seq_length: int) -> None:
        args, dtype = self.config, self.output.weight.dtype
        for b in self.layers:
            b.attention.kv_cache = KVCache(
                max_batch_size, max_seq_length, args.n_local_heads, args.head_dim, dtype
            )
        # Positions past block_size would index freqs_cis out of range (meta never checks).
        rope_len = max(args.block_size, max_seq_length)
        self.freqs_cis = precompute_freqs_cis(rope_len, args.head_dim, args.rope_base, dtype)
        self.causal_mask = torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool))

    def forward(self, idx, input_pos):  # idx (B, S); input_pos (S,)
        mask = self.causal_mask[None, None, input_pos]  # (1, 1, S, max_seq)
        freqs_cis = self.freqs_cis[input_pos]  # (S, D/2, 2)
        x = self.tok_embeddings(idx)  # (B, S, dim)
        for layer in self.layers:
            x = layer(x, input_pos, freqs_cis, mask)
        return self.output(self.norm(x))  # (B, S, vocab)


class Decode:
    """gpt-fast's decode step as a target: the prompt prefilled here, one token a step."""

    def __init__(self, args: ModelArgs, *, rows, prompt_len, steps, device, dtype, cache_len):
        model = Transformer(args).to(device=device, dtype=DTYPES[dtype]).eval()
        with torch.device(device):
            model.setup_caches(max_batch_size=rows, max_seq_length=cache_len)
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, args.vocab_size, (rows, prompt_len + steps), generator=g)
        self.ids = ids.to(device)  # (B, P + S)
        self.prompt_len, self.device, self.forward = prompt_len, device, model
        with torch.no_grad():
            # The prefill belongs to the factory: its transients die here, its K/V are state.
            model(self.ids[:, :prompt_len], torch.arange(prompt_len, device=device))

    def step_inputs(self, step: int):
        at = self.prompt_len + step
        return (self.ids[:, at : at + 1], torch.tensor([at], device=self.device)), {}


TINY = ModelArgs(block_size=64, vocab_size=96, n_layer=2, n_head=4, dim=32,
                 intermediate_size=64, n_local_heads=2)  # fmt: skip
SMALL = ModelArgs(block_size=128, vocab_size=256, n_layer=2, n_head=8, dim=64,
                  intermediate_size=160, n_local_heads=2)  # fmt: skip
LLAMA3_70B = ModelArgs(block_size=8192, vocab_size=128256, n_layer=80, n_head=64, dim=8192,
                       intermediate_size=28672, n_local_heads=8)  # fmt: skip


def tiny(*, rows, prompt_len, steps, device, dtype):
    return Decode(TINY, rows=rows, prompt_len=prompt_len, steps=steps, device=device,
                  dtype=dtype, cache_len=prompt_len + steps)  # fmt: skip


def small(*, rows, prompt_len, steps, device, dtype):
    return Decode(SMALL, rows=rows, prompt_len=prompt_len, steps=steps, device=device,
                  dtype=dtype, cache_len=prompt_len + steps)  # fmt: skip


def llama3_70b(*, rows, prompt_len, steps, device, dtype):
    """Llama-3-70B's shape with static caches for 8192 tokens, whatever the run's length."""
    return Decode(LLAMA3_70B, rows=rows, prompt_len=prompt_len, steps=steps, device=device,
                  dtype=dtype, cache_len=LLAMA3_70B.block_size)  # fmt: skip
