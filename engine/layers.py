"""Llama building blocks: RMSNorm, llama3-scaled RoPE, GQA attention and the SwiGLU MLP.

What it is: the per-layer math, written to match `transformers`' LlamaForCausalLM.
What it is not: the K/V addressing. Attention hands its K/V to an attention context
(`attention.py`), which decides where they are written and what is read back.
Invariant: parameter names equal Hugging Face's, so a checkpoint's state dict loads as is.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from engine.config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    """Inverse frequencies, with Llama 3 scaling when configured (as transformers computes them)."""
    dim = config.head_dim
    inv_freq = 1.0 / (
        config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
    )
    s = config.rope_scaling
    if s is None:
        return inv_freq
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rope_tables(
    config: ModelConfig, max_len: int, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for every position up to max_len, fp32: (L, D).

    device None means the ambient default device (`with torch.device(...)`), so an engine
    built under a CUDA device context gets its tables there too.
    """
    device = torch.get_default_device() if device is None else device
    inv_freq = rope_inv_freq(config).to(device)
    t = torch.arange(max_len, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)  # (L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (L, D)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, W, H, D); cos, sin: (B, W, D) fp32."""
    c = cos.unsqueeze(2)  # (B, W, 1, D)
    s = sin.unsqueeze(2)  # (B, W, 1, D)
    return (x.float() * c + rotate_half(x.float()) * s).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, config.q_size, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.kv_size, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.kv_size, bias=False)
        self.o_proj = nn.Linear(config.q_size, config.hidden_size, bias=False)

    def forward(self, x, cos, sin, attn) -> torch.Tensor:
        B, W, _ = x.shape
        q = self.q_proj(x).view(B, W, self.num_heads, self.head_dim)  # (B, W, H, D)
        k = self.k_proj(x).view(B, W, self.num_kv_heads, self.head_dim)  # (B, W, Hkv, D)
        v = self.v_proj(x).view(B, W, self.num_kv_heads, self.head_dim)  # (B, W, Hkv, D)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        out = attn.attend(self.layer, q, k, v)  # (B, W, H, D)
        return self.o_proj(out.reshape(B, W, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, attn) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attn)
        return x + self.mlp(self.post_attention_layernorm(x))
