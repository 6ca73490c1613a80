"""oneDNN-packed GEMM weights: the same products as F.linear, one copy of each matrix, and
packing only where the engine config allows it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.config import ConfigError, EngineConfig
from engine.engine import Engine
from engine.packed import (
    PACK_MIN_BYTES,
    linear,
    pack_model,
    packing_unavailable,
    register_packed,
    release_packed,
    resolve_layout,
)
from tests.helpers import (
    TINY_GQA,
    TINY_MHA,
    assert_close_rounding,
    forward_terms,
    rounding_rtol,
)

WHY = packing_unavailable("cpu", "float32")
needs_onednn = pytest.mark.skipif(WHY is not None, reason=WHY or "")


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 256), (4, 1, 256), (3, 7, 256), (16, 256)])
@pytest.mark.parametrize("out_features", [96, 1000])
def test_packed_linear_matches_f_linear(shape, out_features):
    g = torch.Generator().manual_seed(sum(shape) + out_features)
    weight = torch.randn(out_features, shape[-1], generator=g)  # (N, K)
    x = torch.randn(*shape, generator=g)  # (..., K)
    want = torch.nn.functional.linear(x, weight)
    ref = register_packed(weight)
    got = linear(x, weight.new_empty((0, shape[-1])), ref)
    release_packed([ref[0]])
    assert got.shape == want.shape
    err = (got - want).abs()
    scale = want.abs().max()
    print(f"{shape} x {out_features}: max {err.max():.2e} mean {err.mean():.2e} (|y| {scale:.1f})")
    # oneDNN's blocked GEMM against MKL's row-major one: K products summed in other orders.
    assert float(err.max() / scale) <= rounding_rtol(torch.float32, shape[-1])


def dense_bytes(model) -> int:
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += t.untyped_storage().nbytes()
    return total


@needs_onednn
@pytest.mark.parametrize("config", [TINY_MHA, TINY_GQA], ids=["untied", "tied"])
def test_packing_replaces_the_dense_copies(config):
    engine = Engine.build(config, None, EngineConfig(max_model_len=64, linear_layout="dense"))
    model = engine.model
    before = dense_bytes(model)
    assert pack_model(model, min_bytes=0) == 4 * config.num_layers + 1
    for layer in model.model.layers:
        for lin in (layer.self_attn.q_proj, layer.self_attn.o_proj, layer.mlp.down_proj):
            assert lin.weight.numel() == 0, "a packed matrix must not also stay dense"
        assert set(layer.self_attn.packed) == {"qkv", "o"}
        assert set(layer.mlp.packed) == {"gate_up", "down"}
    embed = model.model.embed_tokens.weight
    assert embed.numel() == config.vocab_size * config.hidden_size, "the lookup needs the table"
    assert (model.lm_head.weight.numel() == 0) == (not config.tie_word_embeddings)
    projections = (
        config.num_layers
        * config.hidden_size
        * (config.q_size + 2 * config.kv_size + config.q_size + 3 * config.intermediate_size)
    )
    head = 0 if config.tie_word_embeddings else config.vocab_size * config.hidden_size
    assert before - dense_bytes(model) == (projections + head) * 4


@needs_onednn
def test_auto_packs_only_matrices_at_or_above_the_bar():
    engine = Engine.build(TINY_GQA, None, EngineConfig(max_model_len=64, linear_layout="dense"))
    attn, mlp = engine.model.model.layers[0].self_attn, engine.model.model.layers[0].mlp
    bar = mlp.down_proj.weight.numel() * 4  # down (192 x 320) is bigger than o (192 x 192)
    pack_model(engine.model, min_bytes=bar)
    assert set(mlp.packed) == {"gate_up", "down"}
    assert set(attn.packed) == {"qkv"} and attn.o_proj.weight.numel() == 192 * 192


@needs_onednn
def test_the_engine_packs_what_its_layout_asks_for():
    auto = EngineConfig(max_model_len=64)
    small = Engine.build(TINY_MHA, None, auto)  # every matrix under PACK_MIN_BYTES
    assert small.linear_layout == "dense" and not small.model.packed
    assert all(not layer.self_attn.packed for layer in small.model.model.layers)
    # An untied 16384 x 128 fp32 head is exactly 8 MiB: auto packs it and nothing else.
    wide = dataclasses.replace(TINY_MHA, vocab_size=16384)
    assert wide.vocab_size * wide.hidden_size * 4 == PACK_MIN_BYTES
    engine = Engine.build(wide, None, auto)
    assert engine.linear_layout == "packed" and set(engine.model.packed) == {"head"}
    assert engine.model.lm_head.weight.numel() == 0
    assert all(not layer.mlp.packed for layer in engine.model.model.layers)
    every = Engine.build(TINY_MHA, None, EngineConfig(max_model_len=64, linear_layout="packed"))
    assert every.linear_layout == "packed"
    assert all(set(layer.mlp.packed) == {"gate_up", "down"} for layer in every.model.model.layers)


def test_layout_rules_of_the_config():
    with pytest.raises(ConfigError, match="linear layout 'sideways'"):
        EngineConfig(linear_layout="sideways")
    assert resolve_layout(EngineConfig(linear_layout="dense")) == "dense"
    assert resolve_layout(EngineConfig(device="cuda", linear_layout="auto")) == "dense"
    with pytest.raises(ConfigError, match="CPU layout"):
        resolve_layout(EngineConfig(device="cuda", linear_layout="packed"))
    with pytest.raises(ConfigError, match="float32 only"):
        resolve_layout(EngineConfig(dtype="bfloat16", linear_layout="packed"))
    if WHY is None:
        assert resolve_layout(EngineConfig()) == "packed"
        assert resolve_layout(EngineConfig(compile_decode="dynamic")) == "packed"


@needs_onednn
def test_a_compiled_packed_engine_is_one_graph_and_matches_the_dense_engine():
    """dynamo holds a key, not oneDNN's tensor: the packed GEMMs are custom-op nodes."""
    import torch._dynamo

    from engine.packed import _WEIGHTS

    dense = Engine.build(TINY_GQA, None, EngineConfig(max_model_len=64, linear_layout="dense"))
    config = EngineConfig(max_model_len=64, linear_layout="packed", compile_decode="dynamic")
    packed = Engine.build(TINY_GQA, None, config)
    assert packed.linear_layout == "packed" and packed.model.packed
    batch = [[5, 9, 2, 7], [3, 1, 4]]
    logits = [e.prefill(batch) for e in (dense, packed)]
    tokens = logits[0].argmax(-1).tolist()
    ids, plan = packed.plan_step(tokens)
    explained = torch._dynamo.explain(packed.planned_forward)(ids, plan)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    ops = [str(n.target) for g in explained.graphs for n in g.graph.nodes]
    assert sum("nanobench.packed_linear" in op for op in ops) == 4 * TINY_GQA.num_layers + 1
    packed.release_all()
    packed.prefill(batch)
    for _ in range(4):
        want = dense.decode_step(tokens)
        got = packed.decode_step(tokens)
        # Inductor's kernels and oneDNN's GEMMs against eager dense ones: the whole forward's
        # sums in other orders.
        assert_close_rounding(got, want, forward_terms(TINY_GQA, 64), "compiled packed")
        tokens = want.argmax(-1).tolist()
    assert packed.compiled.builds >= 1
    keys = [ref[0] for ref in packed.model.packed.values()]
    assert all(k in _WEIGHTS for k in keys)
    del packed, explained
    import gc

    gc.collect()
    assert not any(k in _WEIGHTS for k in keys), "a dropped model's packed weights must go too"
