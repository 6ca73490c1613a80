"""Prepacked GEMM weights: oneDNN's blocked layout for the projections of a CPU engine.

What it is: `pack_model(model)`, which reorders the large projection weights and the head into
oneDNN's blocked layout once, after loading, and `linear(x, dense, ref)`, the one GEMM call the
layers make. A decode step multiplies a handful of rows by every weight matrix: the step is a
stream of weight reads, and a read in the blocked layout streams faster than `F.linear` on the
row-major matrix (fp32, one core, measured). Dynamo cannot hold oneDNN's opaque tensors, so a
module keeps a `ref` = (key, out_features) into this module's registry, and a traced forward
calls the custom op `nanobench::packed_linear`, which looks the weight up by key at run time.
What it is not: a GPU path (CUDA GEMMs read row-major weights at full bandwidth already).
Invariant: packing changes the layout, never the math (error at fp32 rounding, checked against
`F.linear` and transformers), and a packed weight replaces its dense copy: memory stays one
copy of each matrix, except a tied head, whose embedding rows stay dense for the lookup.
Nothing is registered at import time.
"""

from __future__ import annotations

import functools
import itertools
import weakref

import torch
from torch import nn

# key -> a oneDNN-blocked weight. Entries live as long as the model that packed them.
_WEIGHTS: dict[int, torch.Tensor] = {}
_KEYS = itertools.count()

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
    """auto packs exactly when it can: an engine on a CPU with oneDNN, in float32."""
    if config.linear_layout == "dense":
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


def register_packed(weight: torch.Tensor) -> tuple[int, int]:
    """Pack `weight` into the registry; returns its ref (key, out_features)."""
    key = next(_KEYS)
    _WEIGHTS[key] = pack_weight(weight)
    return key, weight.shape[0]


def release_packed(keys: list[int]) -> None:
    for key in keys:
        _WEIGHTS.pop(key, None)


def packed_matmul(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """(..., in) x a packed (out, in) weight -> (..., out)."""
    rows = x.reshape(-1, x.shape[-1])  # (B*W, in)
    out = torch.ops.mkldnn._linear_pointwise(rows, packed, None, "none", [None], "")
    return out.view(*x.shape[:-1], out.shape[-1])  # (..., out)


@functools.cache
def packed_linear_op():
    """Register `nanobench::packed_linear(x, key, out_features)` once and return it."""

    @torch.library.custom_op("nanobench::packed_linear", mutates_args=())
    def packed_linear(x: torch.Tensor, key: int, out_features: int) -> torch.Tensor:
        return packed_matmul(x, _WEIGHTS[key])

    @packed_linear.register_fake
    def _(x, key, out_features):
        return x.new_empty((*x.shape[:-1], out_features))

    return packed_linear


def linear(x: torch.Tensor, dense: torch.Tensor, ref: tuple[int, int] | None) -> torch.Tensor:
    """x @ W^T: through the packed weight when the module holds a ref, else the dense one."""
    if ref is None:
        return nn.functional.linear(x, dense)
    key, out_features = ref
    if torch.compiler.is_compiling():
        # In a graph: one opaque node that finds the weight by key (an int baked into the graph).
        return torch.ops.nanobench.packed_linear(x, key, out_features)
    return packed_matmul(x, _WEIGHTS[key])


def free(tensor: torch.Tensor) -> None:
    """Drop a matrix's storage, keeping an (0, in) placeholder (and a parameter's name)."""
    tensor.data = tensor.data.new_empty((0, tensor.shape[1]))


def pack_model(model: nn.Module, min_bytes: int = PACK_MIN_BYTES) -> int:
    """Pack each projection and the head of at least `min_bytes`, freeing the dense copies.

    Returns how many matrices were packed.
    """
    packed_linear_op()  # registered before any forward can be traced
    keys: list[int] = []

    def pack_into(module: nn.Module, name: str, dense: torch.Tensor, *dense_copies) -> None:
        if dense.numel() * dense.element_size() < min_bytes:
            return
        module.packed[name] = register_packed(dense)
        keys.append(module.packed[name][0])
        for t in dense_copies:
            free(t)

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
    weakref.finalize(model, release_packed, keys)
    return len(keys)
