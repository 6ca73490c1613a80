"""The Triton paged decode kernel as a torch custom op, `nanobench::paged_decode`.

What it is: an opaque operator that torch._dynamo puts in the graph as one node, so a model that
calls it traces as a single graph with no breaks; its fake allocates the (B, H, D) output the
real launcher allocates (`new_output`) without running anything.
What it is not: differentiable (decode only), or a way for inductor to see into or fuse the
kernel; it runs exactly what `paged_attention_triton` runs.
Invariant: nothing is registered at import time; `paged_decode_op()` registers on first call
and returns the same callable afterwards.
"""

import functools

import torch


@functools.cache
def paged_decode_op():
    """Register `nanobench::paged_decode` once and return it.

    The op takes (q, k_pool, v_pool, slot_table, context_lens, scale=None) with the shapes and
    meaning of `paged_attention_triton`; `scale=None` means head_dim**-0.5.
    """
    from kernels.triton_decode import new_output, paged_attention_triton

    @torch.library.custom_op("nanobench::paged_decode", mutates_args=())
    def paged_decode(
        q: torch.Tensor,
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,
        slot_table: torch.Tensor,
        context_lens: torch.Tensor,
        scale: float | None = None,
    ) -> torch.Tensor:
        return paged_attention_triton(q, k_pool, v_pool, slot_table, context_lens, scale=scale)

    @paged_decode.register_fake
    def _(q, k_pool, v_pool, slot_table, context_lens, scale=None):
        # The real launcher's own allocation, so a fake-tensor memory trace counts its bytes.
        return new_output(q)  # (B, H, D)

    return paged_decode
