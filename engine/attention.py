"""Attention contexts: what a layer's attention writes to the K/V pools and reads back.

What it is: three contexts with one method, `attend(layer, q, k, v)`.
`PlannedDecode` reads only the tensors of a `DecodePlan` (the path every decode step takes);
`UnplannedDecode` computes the addressing inside the forward from the host block tables (the
pre-plan path, kept so `explain --path unplanned` and the compile tests can show what the plan
removed); `Prefill` writes a ragged batch's prompts and attends causally within them.
What it is not: a kernel. The read itself is `reference_read` (the math of
`kernels.paged_attention_batched_reference`, laid out for batched GEMMs) or the Triton kernel
behind a custom op.
Invariant: `PlannedDecode.attend` observes no Python value that changes between steps.
"""

from __future__ import annotations

import torch

from kernels.reference import paged_attention_batched_reference


def reference_index(plan, num_kv_heads: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """What the reference read derives from the plan alone: the same in every layer of a step.

    Returns the pool rows to gather, `slot * Hkv + h` in `[B, Hkv, W]` order, and the mask of
    columns past each row's length.
    """
    W = plan.slot_mapping.shape[1]
    heads = torch.arange(num_kv_heads, device=device)  # (Hkv,)
    rows = (plan.slot_mapping.unsqueeze(1) * num_kv_heads + heads.view(1, -1, 1)).view(-1)
    cols = torch.arange(W, device=device)  # (W,)
    masked = cols.unsqueeze(0) >= plan.context_lens.unsqueeze(1)  # (B, W)
    return rows, masked.unsqueeze(1)  # (B*Hkv*W,), (B, 1, W)


def reference_read(q, k_pool, v_pool, plan, step: dict | None = None) -> torch.Tensor:
    """The reference kernel's math, laid out so that each product is one batched GEMM.

    Same gather through the slot mapping, same `[B, H, W]` score rectangle, same
    `finfo(dtype).min` mask past each row's length (a padded row masks every column: uniform
    weights, never NaN) and same fp32 softmax as `paged_attention_batched_reference`, which stays
    the oracle this is tested against. Two layout choices make it 2-3x cheaper on CPU, eager
    and under Inductor: K/V are gathered by one `index_select` straight into `[B, Hkv, W, D]`
    order (pool row `slot * Hkv + h` of the pool seen as `[S * Hkv, D]`), so there is no
    permute copy and no `repeat_interleave`; and the G query heads sharing a KV head ride in
    the GEMM's M dimension (`[B*Hkv, G, D] @ [B*Hkv, D, W]`). Reads no device value.
    `step` is the forward's per-step scratch (`PlannedDecode.step`): the first layer stores
    `reference_index(plan, ...)` there and the others reuse it.
    q: (B, H, D); k_pool, v_pool: (S, Hkv, D), contiguous. Returns (B, H, D).
    """
    B, H, D = q.shape
    Hkv = k_pool.shape[1]
    W = plan.slot_mapping.shape[1]
    G = H // Hkv
    step = {} if step is None else step
    if "reference_index" not in step:
        step["reference_index"] = reference_index(plan, Hkv, q.device)
    rows, masked = step["reference_index"]
    k = k_pool.view(-1, D).index_select(0, rows).view(B * Hkv, W, D)
    v = v_pool.view(-1, D).index_select(0, rows).view(B * Hkv, W, D)
    scores = torch.bmm(q.reshape(B * Hkv, G, D), k.transpose(1, 2)).view(B, H, W) * D**-0.5
    scores = scores.masked_fill(masked, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, W)
    return torch.bmm(probs.view(B * Hkv, G, W), v).view(B, H, D)


def triton_read():
    """The Triton read, with the custom op looked up here, outside the traced region.

    Looking it up inside the forward would make dynamo re-run the registration and break.
    """
    from kernels.ops import paged_decode_op

    op = paged_decode_op()

    def read(q, k_pool, v_pool, plan, step: dict | None = None) -> torch.Tensor:
        # slot_mapping spans the whole table width here: the kernel walks lengths itself.
        return op(q, k_pool, v_pool, plan.slot_mapping, plan.context_lens)

    return read


def make_read(kind: str):
    return triton_read() if kind == "triton" else reference_read


class PlannedDecode:
    def __init__(self, plan, k_pools, v_pools, read=reference_read) -> None:
        self.plan = plan
        self.k_pools = k_pools
        self.v_pools = v_pools
        self.read = read
        # Per-step scratch a read may keep across layers (what depends on the plan alone).
        self.step: dict = {}

    def attend(self, layer: int, q, k, v) -> torch.Tensor:
        k_pool, v_pool = self.k_pools[layer], self.v_pools[layer]
        # One index_put for the whole batch; padded rows land on the sink slot.
        k_pool.index_put_((self.plan.write_slots,), k[:, 0])  # (B, Hkv, D)
        v_pool.index_put_((self.plan.write_slots,), v[:, 0])  # (B, Hkv, D)
        out = self.read(q[:, 0], k_pool, v_pool, self.plan, self.step)  # (B, H, D)
        return out.unsqueeze(1)  # (B, 1, H, D)


class UnplannedDecode:
    """Addressing read off host objects inside the forward: a guard on a value per step."""

    def __init__(self, cache, rows: tuple[int, ...]) -> None:
        self.cache = cache
        self.rows = rows

    @property
    def graph_shape(self) -> tuple[int, int]:
        """(rows, width) the forward will run at, read off the host tables (outside the region)."""
        return (len(self.rows), max(self.cache.tables[r].num_tokens for r in self.rows))

    def attend(self, layer: int, q, k, v) -> torch.Tensor:
        tables = [self.cache.tables[r] for r in self.rows]
        width = max(t.num_tokens for t in tables)
        sink = self.cache.sink_slot
        slots = [t.slot(t.num_tokens - 1) for t in tables]
        mapping = [
            [t.slot(p) for p in range(t.num_tokens)] + [sink] * (width - t.num_tokens)
            for t in tables
        ]
        device = q.device
        write_slots = torch.tensor(slots, dtype=torch.int64, device=device)  # (B,)
        slot_mapping = torch.tensor(mapping, dtype=torch.int64, device=device)  # (B, W)
        context_lens = torch.tensor([t.num_tokens for t in tables], device=device)  # (B,)
        k_pool, v_pool = self.cache.k_pools[layer], self.cache.v_pools[layer]
        k_pool.index_put_((write_slots,), k[:, 0])  # (B, Hkv, D)
        v_pool.index_put_((write_slots,), v[:, 0])  # (B, Hkv, D)
        out = paged_attention_batched_reference(q[:, 0], k_pool, v_pool, slot_mapping, context_lens)
        return out.unsqueeze(1)  # (B, 1, H, D)


class Prefill:
    """A right-padded batch of prompts: write real tokens' K/V, attend causally within each."""

    def __init__(self, k_pools, v_pools, write_slots, token_mask, group: int) -> None:
        self.k_pools = k_pools
        self.v_pools = v_pools
        self.write_slots = write_slots  # (N,) slots of the real tokens, row-major
        self.token_mask = token_mask  # (B, W) True on real tokens
        self.group = group

    def attend(self, layer: int, q, k, v) -> torch.Tensor:
        self.k_pools[layer].index_put_((self.write_slots,), k[self.token_mask])  # (N, Hkv, D)
        self.v_pools[layer].index_put_((self.write_slots,), v[self.token_mask])  # (N, Hkv, D)
        W, D = q.shape[1], q.shape[3]
        qh = q.transpose(1, 2)  # (B, H, W, D)
        kh = k.transpose(1, 2).repeat_interleave(self.group, dim=1)  # (B, H, W, D)
        vh = v.transpose(1, 2).repeat_interleave(self.group, dim=1)  # (B, H, W, D)
        scores = torch.matmul(qh, kh.transpose(-1, -2)) * D**-0.5  # (B, H, W, W)
        causal = torch.ones(W, W, dtype=torch.bool, device=q.device).tril()  # (W, W)
        allowed = causal[None, None] & self.token_mask[:, None, None, :]  # (B, 1, W, W)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, W, W)
        return torch.matmul(probs, vh).transpose(1, 2)  # (B, W, H, D)
