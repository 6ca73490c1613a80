"""The reference paged decode read: plain torch, the oracle every other kernel is tested against.

What it is: gather a `[B, W]` rectangle of K/V through the slot mapping, score every column,
mask the columns past each row's `context_lens` with `finfo(dtype).min`, softmax, reduce.
What it is not: fast. It materialises a `[B, H, 1, W]` score rectangle, which is why the
width axis reaches a shape guard and why a capture pool built over it is large.
Invariant: a row with `context_lens == 0` is finite (uniform weights over garbage the caller
drops), never NaN, because the mask value is finite. With `validated=True` it reads no device
value, so it is safe inside a traced or recorded region.
"""

from __future__ import annotations

import torch


class KernelInputError(ValueError):
    """Raised when a kernel is handed inputs that break its contract."""


def paged_attention_batched_reference(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    slot_mapping: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    validated: bool = False,
) -> torch.Tensor:
    """Decode attention of one query token per row over its paged history.

    q: (B, H, D); k_pool, v_pool: (S, Hkv, D); slot_mapping: (B, W) int64 pool rows;
    context_lens: (B,) tokens of history per row (0 for a padded row). Returns (B, H, D).
    """
    B, H, D = q.shape
    Hkv = k_pool.shape[1]
    W = slot_mapping.shape[1]
    if not validated:
        # Host reads: a synchronisation on a device and a graph break under a tracer.
        if int(context_lens.min()) < 1:
            raise KernelInputError("context_lens: every row needs at least one token")
        if int(context_lens.max()) > W:
            raise KernelInputError(f"context_lens: a row is longer than the mapping width {W}")
    scale = D**-0.5 if scale is None else scale
    group = H // Hkv
    k = k_pool[slot_mapping]  # (B, W, Hkv, D)
    v = v_pool[slot_mapping]  # (B, W, Hkv, D)
    k = k.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)  # (B, H, W, D)
    v = v.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)  # (B, H, W, D)
    scores = torch.matmul(q.unsqueeze(2), k.transpose(-1, -2)) * scale  # (B, H, 1, W)
    cols = torch.arange(W, device=q.device)  # (W,)
    masked = cols.unsqueeze(0) >= context_lens.unsqueeze(1)  # (B, W)
    scores = scores.masked_fill(masked[:, None, None, :], torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, 1, W)
    return torch.matmul(probs, v).squeeze(2)  # (B, H, D)
