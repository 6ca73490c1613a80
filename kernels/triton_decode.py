"""A Triton paged decode attention kernel that reads K/V straight through the engine's slot table.

What it is: one program per (row, kv head). It walks `slot_table[row, 0:context_lens[row]]` in
tiles of `BLOCK_N` positions, gathers K/V for those pool rows, scores all `H // Hkv` query heads
of the group at once (GQA-aware, the group padded to 16 rows for `tl.dot`), and keeps an online
softmax in fp32. No `[B, W]` rectangle is ever materialised, so its work scales with the real
context lengths, not with a padded width.
What it is not: a prefill kernel (it takes one query token per row), a split-context (flash-decoding)
kernel (a long context on a small batch leaves SMs idle), or a validator of device values: slot
numbers are trusted, and only `context_lens` is clamped to `[0, L]` inside the kernel.
Invariant: the launcher reads no device value on the host, so it is safe inside a traced or
recorded region; every element of the output is written, and a row with `context_lens <= 0`
reads no K/V and is exactly zero. Importing this module imports no Triton; the kernel is built
on first launch.
Shapes: B rows, H query heads, Hkv kv heads, D head dim, S pool rows, (R, L) the slot table;
inside the kernel G is the padded query-head group and N a tile of BLOCK_N positions.
"""

from __future__ import annotations

import functools
import os

import torch

from kernels.reference import KernelInputError

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INDEX_DTYPES = (torch.int32, torch.int64)
# tl.dot needs every dimension to be at least 16.
_MIN_DOT = 16
_BLOCK_N = 32


def _interpreting() -> bool:
    """Triton's own reading of TRITON_INTERPRET, without importing Triton."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on")


@functools.cache
def _build_kernel(interpret: bool):
    """Define the kernel on first use; keyed by the interpreter flag because `triton.jit`
    reads TRITON_INTERPRET when it decorates, not when it launches."""
    del interpret
    import triton
    import triton.language as tl

    @triton.jit
    def paged_decode_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        table_ptr,
        lens_ptr,
        out_ptr,
        scale_log2e,
        table_width,
        stride_qb,
        stride_qh,
        stride_kb,
        stride_kh,
        stride_vb,
        stride_vh,
        stride_tb,
        stride_tp,
        stride_lb,
        stride_ob,
        stride_oh,
        GROUP: tl.constexpr,
        GROUP_PAD: tl.constexpr,
        D: tl.constexpr,
        BLOCK_N: tl.constexpr,
        DOT_PRECISION: tl.constexpr,
        UPCAST_DOT: tl.constexpr,
    ):
        row = tl.program_id(0)
        kvh = tl.program_id(1)
        g = tl.arange(0, GROUP_PAD)
        d = tl.arange(0, D)
        n = tl.arange(0, BLOCK_N)
        heads = kvh * GROUP + g
        head_ok = g < GROUP

        # Padded group rows load zeros: finite scores, never stored.
        q = tl.load(
            q_ptr + row * stride_qb + heads[:, None] * stride_qh + d[None, :],
            mask=head_ok[:, None],
            other=0.0,
        )  # (G, D)
        if UPCAST_DOT:
            q = q.to(tl.float32)
        # Clamped so a bad length can never walk off the end of the table row.
        ctx = tl.load(lens_ptr + row * stride_lb).to(tl.int32)
        ctx = tl.minimum(tl.maximum(ctx, 0), table_width)

        m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D], tl.float32)
        table_row = table_ptr + row.to(tl.int64) * stride_tb
        for start in range(0, ctx, BLOCK_N):
            pos = start + n
            valid = pos < ctx
            # int64 before the multiply: slot * stride overflows int32 on a large pool.
            slots = tl.load(table_row + pos * stride_tp, mask=valid, other=0).to(tl.int64)
            k_t = tl.load(
                k_ptr + slots[None, :] * stride_kb + kvh * stride_kh + d[:, None],
                mask=valid[None, :],
                other=0.0,
            )  # (D, N)
            v = tl.load(
                v_ptr + slots[:, None] * stride_vb + kvh * stride_vh + d[None, :],
                mask=valid[:, None],
                other=0.0,
            )  # (N, D)
            if UPCAST_DOT:
                k_t = k_t.to(tl.float32)
            s = tl.dot(q, k_t, input_precision=DOT_PRECISION) * scale_log2e  # (G, N)
            s = tl.where(valid[None, :], s, float("-inf"))
            # Every tile holds at least one valid column, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])  # (G, N)
            l_i = l_i * alpha + tl.sum(p, 1)
            # p is rounded to the K/V dtype as on the tensor-core path; the upcast after it keeps
            # that rounding, so the interpreter sees the numbers a GPU would.
            p = p.to(v.dtype)
            if UPCAST_DOT:
                p = p.to(tl.float32)
                v = v.to(tl.float32)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=DOT_PRECISION)  # (G, D)
            m_i = m_new

        # A row that read nothing has l_i == 0 and acc == 0: divide by 1 to write exact zeros.
        l_safe = tl.where(l_i > 0.0, l_i, 1.0)
        out = acc / l_safe[:, None]  # (G, D)
        tl.store(
            out_ptr + row * stride_ob + heads[:, None] * stride_oh + d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=head_ok[:, None],
        )

    return paged_decode_kernel


def _check_inputs(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    slot_table: torch.Tensor,
    context_lens: torch.Tensor,
    out: torch.Tensor | None,
) -> None:
    """Shape, dtype, stride and device checks only: metadata, never a device value."""
    named = {
        "q": q,
        "k_pool": k_pool,
        "v_pool": v_pool,
        "slot_table": slot_table,
        "context_lens": context_lens,
    }
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise KernelInputError(f"{name}: expected a tensor, got {type(t).__name__}")
    _check_shapes(q, k_pool, v_pool, slot_table, context_lens)
    _check_dtypes(q, k_pool, v_pool, slot_table, context_lens)
    _check_layout(named, out)


def _check_shapes(q, k_pool, v_pool, slot_table, context_lens) -> None:
    """(B, H, D) against (S, Hkv, D) pools, a (R, L) slot table and (B,) lengths."""
    if q.dim() != 3:
        raise KernelInputError(f"q: expected (B, H, D), got shape {tuple(q.shape)}")
    for name, t in (("k_pool", k_pool), ("v_pool", v_pool)):
        if t.dim() != 3:
            raise KernelInputError(f"{name}: expected (S, Hkv, D), got shape {tuple(t.shape)}")
    if k_pool.shape != v_pool.shape:
        raise KernelInputError(
            f"v_pool: shape {tuple(v_pool.shape)} differs from k_pool {tuple(k_pool.shape)}"
        )
    if slot_table.dim() != 2:
        raise KernelInputError(f"slot_table: expected (R, L), got shape {tuple(slot_table.shape)}")
    B, H, D = q.shape
    Hkv = k_pool.shape[1]
    if context_lens.shape != (B,):
        raise KernelInputError(
            f"context_lens: expected shape ({B},) to match q, got {tuple(context_lens.shape)}"
        )
    if slot_table.shape[0] < B:
        raise KernelInputError(
            f"slot_table: {slot_table.shape[0]} rows cannot serve a batch of {B} (q)"
        )
    if k_pool.shape[2] != D:
        raise KernelInputError(f"k_pool: head_dim {k_pool.shape[2]} differs from q's {D}")
    if D < 32 or D > 256 or D & (D - 1):
        raise KernelInputError(f"q: head_dim {D} is not a power of two in 32..256")
    if Hkv < 1 or H % Hkv:
        raise KernelInputError(f"k_pool: {Hkv} kv heads do not divide q's {H} heads")


def _check_dtypes(q, k_pool, v_pool, slot_table, context_lens) -> None:
    """One float dtype for q and the pools; integer indices."""
    if q.dtype not in _DTYPES:
        raise KernelInputError(f"q: dtype {q.dtype} is not one of fp32, bf16, fp16")
    for name, t in (("k_pool", k_pool), ("v_pool", v_pool)):
        if t.dtype != q.dtype:
            raise KernelInputError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}")
    if slot_table.dtype not in _INDEX_DTYPES:
        raise KernelInputError(f"slot_table: dtype {slot_table.dtype} is not int32 or int64")
    if context_lens.dtype not in _INDEX_DTYPES:
        raise KernelInputError(f"context_lens: dtype {context_lens.dtype} is not int32 or int64")


def _check_layout(named: dict, out) -> None:
    """Strides, one device for every input, and the output buffer if one is given."""
    q, k_pool, v_pool = named["q"], named["k_pool"], named["v_pool"]
    # q and out are small, so they must be dense; the pools may be views into a larger cache
    # (a per-layer slice), so only their innermost dimension must be unit-stride.
    if not q.is_contiguous():
        raise KernelInputError(f"q: must be contiguous, got strides {q.stride()}")
    for name, t in (("k_pool", k_pool), ("v_pool", v_pool)):
        if t.stride(2) != 1:
            raise KernelInputError(
                f"{name}: head_dim must be unit-stride, got strides {t.stride()}"
            )

    for name, t in named.items():
        if t.device != q.device:
            raise KernelInputError(f"{name}: on {t.device}, but q is on {q.device}")
    if q.device.type != "cuda" and not _interpreting():
        raise KernelInputError(
            f"q: on {q.device}; the Triton kernel runs on CUDA, or on CPU under TRITON_INTERPRET=1"
        )

    if out is not None:
        if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
            raise KernelInputError(
                f"out: expected {tuple(q.shape)} {q.dtype} on {q.device}, "
                f"got {tuple(out.shape)} {out.dtype} on {out.device}"
            )
        if not out.is_contiguous():
            raise KernelInputError(f"out: must be contiguous, got strides {out.stride()}")


def new_output(q: torch.Tensor) -> torch.Tensor:
    """The (B, H, D) buffer the kernel writes: q's shape and dtype, dense. The op's fake
    implementation allocates through this too, so a fake-tensor trace counts the same bytes."""
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)  # (B, H, D)


def paged_attention_triton(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    slot_table: torch.Tensor,
    context_lens: torch.Tensor,
    *,
    scale: float | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode attention of one query token per row, read through the persistent slot table.

    q: (B, H, D); k_pool, v_pool: (S, Hkv, D); slot_table: (R, L) int32/int64 pool rows, of
    which the first B rows are used; context_lens: (B,) tokens of history per row (0 for a
    padded row, which comes back as zeros). out: optional (B, H, D) buffer to write into.
    Returns (B, H, D). Reads no device value on the host.
    """
    _check_inputs(q, k_pool, v_pool, slot_table, context_lens, out)
    B, H, D = q.shape
    Hkv = k_pool.shape[1]
    group = H // Hkv
    if out is None:
        out = new_output(q)  # (B, H, D)
    if B == 0:
        return out
    scale = D**-0.5 if scale is None else float(scale)
    kernel = _build_kernel(_interpreting())
    # The interpreter multiplies bf16 bit patterns as integers in tl.dot (it stores bf16 as
    # uint16), so there the bf16 operands are widened to fp32 first; a GPU keeps them native.
    upcast = _interpreting() and q.dtype == torch.bfloat16
    # On a GPU an fp32 tl.dot defaults to tf32 (~1e-3 error); ask for full precision there.
    precision = "ieee" if q.dtype == torch.float32 or upcast else "tf32"
    kernel[(B, Hkv)](
        q,
        k_pool,
        v_pool,
        slot_table,
        context_lens,
        out,
        scale * 1.4426950408889634,  # log2(e): the kernel uses exp2
        slot_table.shape[1],
        q.stride(0),
        q.stride(1),
        k_pool.stride(0),
        k_pool.stride(1),
        v_pool.stride(0),
        v_pool.stride(1),
        slot_table.stride(0),
        slot_table.stride(1),
        context_lens.stride(0),
        out.stride(0),
        out.stride(1),
        GROUP=group,
        GROUP_PAD=max(_MIN_DOT, _next_power_of_2(group)),
        D=D,
        BLOCK_N=_BLOCK_N,
        DOT_PRECISION=precision,
        UPCAST_DOT=upcast,
    )
    return out


def _next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (kept here so the launcher needs no Triton import)."""
    return 1 << max(0, (n - 1).bit_length())
