"""Prepacked GEMM weights: oneDNN's blocked layout for the projections of an eager CPU engine.

What it is: `pack_model(model)`, which reorders every projection weight and the head into
oneDNN's blocked layout once, after loading, and `linear(x, dense, packed)`, the one GEMM call
the layers make. A decode step multiplies a handful of rows by every weight matrix: the step is
a stream of weight reads, and a weight read in the blocked layout streams about 15-25% faster
than `F.linear` on the row-major matrix (fp32, one core; measured with `nanobench decode`).
What it is not: a compiled path. Dynamo cannot trace oneDNN's opaque tensors, so an engine with
`compile_decode` on keeps dense weights (Inductor does its own packing when asked to freeze).
Invariant: packing changes the layout, never the math (error at fp32 rounding, checked against
`F.linear` and transformers), and a packed weight replaces its dense copy: memory stays one
copy of each matrix, except a tied head, whose embedding rows stay dense for the lookup.
"""

from __future__ import annotations

import torch
from torch import nn

# Below this oneDNN's per-call cost outweighs the faster read. Measured on one core, (4, K) x
# (K, N) fp32 alone: packed/dense 1.6x at 0.8 MB, 0.6x from 3 MB to 67 MB; but inside the tiny
# model a packed 4 MB head made the step slower (3.35 vs 3.27 ms), so the bar sits above it.
PACK_MIN_BYTES = 8 << 20


def packing_unavailable(device: str, dtype: str) -> str | None:
    """Why weights cannot be packed here, or None."""
    if device != "cpu":
        return f"packed weights are a CPU layout, the device is {device}"
    if dtype != "float32":
        return f"packed weights are measured for float32 only, the dtype is {dtype}"
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn)"
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "this torch build has no mkldnn::_linear_pointwise"
    return None


def resolve_layout(config) -> str:
    """auto packs exactly when it can: an eager engine on a CPU with oneDNN, in float32.

    EngineConfig has already refused `packed` with a compiler; what is left is the backend.
    """
    if config.linear_layout == "dense" or config.compile_decode != "off":
        return "dense"
    why = packing_unavailable(config.device, config.dtype)
    if why is None:
        return "packed"
    if config.linear_layout == "auto":
        return "dense"
    from engine.config import ConfigError

    raise ConfigError(f"linear_layout packed: {why}")


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) row-major -> oneDNN's blocked layout for any number of rows."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), None)


def linear(x: torch.Tensor, dense: torch.Tensor, packed: torch.Tensor | None) -> torch.Tensor:
    """x @ W^T through the packed weight when there is one: (..., in) -> (..., out)."""
    if packed is None:
        return nn.functional.linear(x, dense)
    rows = x.reshape(-1, x.shape[-1])  # (B*W, in)
    out = torch.ops.mkldnn._linear_pointwise(rows, packed, None, "none", [None], "")
    return out.view(*x.shape[:-1], out.shape[-1])  # (..., out)


def free(tensor: torch.Tensor) -> None:
    """Drop a matrix's storage, keeping an (0, in) placeholder (and a parameter's name)."""
    tensor.data = tensor.data.new_empty((0, tensor.shape[1]))


def pack_model(model: nn.Module, min_bytes: int = PACK_MIN_BYTES) -> int:
    """Pack each projection and the head of at least `min_bytes`, freeing the dense copies.

    Returns how many matrices were packed.
    """
    packed = 0

    def pack_into(module: nn.Module, key: str, dense: torch.Tensor, *dense_copies) -> None:
        nonlocal packed
        if dense.numel() * dense.element_size() < min_bytes:
            return
        module.packed[key] = pack_weight(dense)
        for t in dense_copies:
            free(t)
        packed += 1

    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        qkv = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)
        pack_into(attn, "qkv", attn.qkv_weight, attn.qkv_weight, *qkv)
        pack_into(attn, "o", attn.o_proj.weight, attn.o_proj.weight)
        gate_up = (mlp.gate_proj.weight, mlp.up_proj.weight)
        pack_into(mlp, "gate_up", mlp.gate_up_weight, mlp.gate_up_weight, *gate_up)
        pack_into(mlp, "down", mlp.down_proj.weight, mlp.down_proj.weight)
    head = model.lm_head.weight
    tied = head is model.model.embed_tokens.weight
    # A tied head's matrix is also the embedding table, which the lookup reads densely.
    pack_into(model, "head", head, *(() if tied else (head,)))
    return packed
