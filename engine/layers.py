"""Llama building blocks: RMSNorm, llama3-scaled RoPE, GQA attention and the SwiGLU MLP.

Qwen2 (q/k/v bias) and Qwen3 (per-head q/k RMSNorm) are the same blocks with those switched on.

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
from engine.packed import linear


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            # No rounding step in fp32: one call, the same products in the same order.
            return nn.functional.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        # transformers' order: normalise in fp32, round to the input dtype, then scale.
        # F.rms_norm is x * rsqrt(mean(x^2) + eps) in one call instead of five.
        normed = nn.functional.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * normed.to(x.dtype)


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
    """cos and the signed sin for every position up to max_len, fp32: (L, D) each.

    The sin table carries rotate_half's sign (-sin on the first half), so a rotation is a roll,
    two products and a sum: rotate_half(x) * sin == roll(x, D/2) * signed_sin, exactly (the
    negation moves from x to the table and is exact either way).
    device None means the ambient default device (`with torch.device(...)`), so an engine
    built under a CUDA device context gets its tables there too.
    """
    device = torch.get_default_device() if device is None else device
    inv_freq = rope_inv_freq(config).to(device)
    t = torch.arange(max_len, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)  # (L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (L, D)
    sin = emb.sin()
    half = sin.shape[-1] // 2
    return emb.cos(), torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x: (B, W, H, D); cos, signed_sin: (B, W, 1, D) fp32 (see rope_tables)."""
    xf = x.float()
    return (xf * cos + xf.roll(x.shape[-1] // 2, -1) * signed_sin).to(x.dtype)


def fuse_after_load(module: FusedRows, incompatible_keys) -> None:
    module.fuse()


class FusedRows(nn.Module):
    """A module whose sibling projections run as one GEMM over one weight buffer.

    `FUSED` maps a buffer name to the nn.Linear children whose weights are its row blocks
    (their biases, when they have them, are fused the same way into `*_bias`). Each child's parameter keeps Hugging Face's name and (out, in) shape but is a view
    of its block, so a checkpoint loads into the buffer as is (load_state_dict copies into the
    views), the weights exist once, and a decode step runs one GEMM where it ran two or three:
    with a handful of rows per step, each GEMM call costs about as much in launch and packing
    as in arithmetic. The views are rebuilt whenever a parameter may have been replaced: after
    `_apply` (`.to()`, `.cuda()`, `.half()`) and after `load_state_dict` (assign=True).
    Invariant: the buffer's row blocks are the children's parameters, element for element.
    """

    FUSED: dict[str, tuple[str, ...]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.register_load_state_dict_post_hook(fuse_after_load)
        # Filled by engine.packed.pack_model: refs (key, out) to the oneDNN-blocked weights.
        self.packed: dict[str, tuple[int, int]] = {}

    def fuse(self) -> None:
        for name, parts in self.FUSED.items():
            linears = [getattr(self, p) for p in parts]
            self._fuse_rows(name, [m.weight for m in linears])
            if linears[0].bias is not None:
                # Biases follow their rows: "qkv_weight" -> "qkv_bias".
                self._fuse_rows(name.replace("weight", "bias"), [m.bias for m in linears])

    def _fuse_rows(self, name: str, params: list[nn.Parameter]) -> None:
        if self._is_fused(name, params):
            return
        fused = torch.cat([p.detach() for p in params])  # (sum of out, ...)
        self.register_buffer(name, fused, persistent=False)
        start = 0
        for p in params:
            rows = p.shape[0]
            p.data = fused[start : start + rows]
            start += rows

    def _is_fused(self, name: str, params: list[nn.Parameter]) -> bool:
        fused = self._buffers.get(name)
        if fused is None:
            return False
        start = 0
        for w in params:
            if (
                w.dtype != fused.dtype
                or w.device != fused.device
                or w.untyped_storage().data_ptr() != fused.untyped_storage().data_ptr()
                or w.storage_offset() != fused.storage_offset() + start * fused.stride(0)
                or w.stride() != fused.stride()
            ):
                return False
            start += w.shape[0]
        return start == fused.shape[0]

    def _apply(self, fn, recurse=True):
        # Converting a module converts its parameters and buffers one by one, into separate
        # tensors: re-fuse from the (converted) parameters, which are the source of truth.
        super()._apply(fn, recurse)
        self.fuse()
        return self


class Attention(FusedRows):
    FUSED = {"qkv_weight": ("q_proj", "k_proj", "v_proj")}

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        bias = config.qkv_bias
        self.q_proj = nn.Linear(config.hidden_size, config.q_size, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, config.kv_size, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, config.kv_size, bias=bias)
        self.o_proj = nn.Linear(config.q_size, config.hidden_size, bias=False)
        self.qk_norm = config.qk_norm
        if config.qk_norm:
            self.q_norm = RMSNorm(config.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(config.head_dim, config.rms_norm_eps)
        self.register_buffer("qkv_bias", None, persistent=False)  # fuse() fills it for Qwen2
        self.fuse()

    def forward(self, x, cos, sin, attn) -> torch.Tensor:
        B, W, _ = x.shape
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        qkv = linear(x, self.qkv_weight, self.packed.get("qkv"))  # (B, W, (H + 2Hkv) * D)
        if self.qkv_bias is not None:
            qkv = qkv + self.qkv_bias  # Qwen2
        qkv = qkv.view(B, W, H + 2 * Hkv, D)
        qk = qkv[:, :, : H + Hkv]  # (B, W, H + Hkv, D)
        if self.qk_norm:  # Qwen3: per-head RMSNorm over D, before RoPE
            qk = torch.cat((self.q_norm(qk[:, :, :H]), self.k_norm(qk[:, :, H:])), dim=2)
        # q and k rotate together: one RoPE over H + Hkv heads instead of two calls.
        qk = apply_rope(qk, cos, sin)  # (B, W, H + Hkv, D)
        # q dense: a kernel may index it by row and head alone (the Triton read requires it).
        q = qk[:, :, :H].contiguous()  # (B, W, H, D)
        k = qk[:, :, H:]  # (B, W, Hkv, D)
        v = qkv[:, :, H + Hkv :]  # (B, W, Hkv, D)
        out = attn.attend(self.layer, q, k, v)  # (B, W, H, D)
        return linear(out.reshape(B, W, H * D), self.o_proj.weight, self.packed.get("o"))


class MLP(FusedRows):
    FUSED = {"gate_up_weight": ("gate_proj", "up_proj")}

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.fuse()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = linear(x, self.gate_up_weight, self.packed.get("gate_up"))
        gate, up = gate_up.split(self.intermediate_size, -1)
        return linear(nn.functional.silu(gate) * up, self.down_proj.weight, self.packed.get("down"))


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
