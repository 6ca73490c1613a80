"""Padding is inert both ways: padded rows write only the sink and change no real row's logits.

Two engines over the same tiny checkpoint, one bucketed (3 rows pad to 4, widths to multiples
of 16) and one not, are driven identically over a ragged batch; then `check_pad_inert`, the
host gate, is shown to catch corrupted plans.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.buckets import DecodeBuckets
from engine.cache import BatchedPagedKVCache
from engine.config import EngineConfig, ModelConfig
from engine.engine import Engine
from engine.padding import PadUnsound, check_pad_inert
from engine.plan import plan_decode
from tests.helpers import assert_close_rounding, forward_terms, rounding_rtol

STEPS = 10
PROMPT_LENS = (5, 11, 14)


def _engine(bucketed: bool) -> Engine:
    options = {"bucket_decode": True, "width_multiple": 16} if bucketed else {}
    return Engine.from_checkpoint("tiny", max_batch_size=8, max_model_len=64, **options)


@pytest.fixture(scope="module")
def driven():
    """Both engines after a prefill and STEPS decode steps fed the same tokens.

    Returns (bucketed, open, per-step max |logit diff| / max |logit|, the pool rows each
    bucketed step changed, the write slots of its real rows per step).
    """
    bucketed, open_ = _engine(True), _engine(False)
    g = torch.Generator().manual_seed(0)
    vocab = open_.model_config.vocab_size
    prompts = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in PROMPT_LENS]
    logits_b, logits_o = bucketed.prefill(prompts), open_.prefill(prompts)  # (3, V)
    diffs, changed, real_writes = [relative_diff(logits_b, logits_o)], [], []
    tokens = logits_o.argmax(-1).tolist()
    for _ in range(STEPS):
        before = [p.clone() for p in bucketed.cache.k_pools + bucketed.cache.v_pools]
        logits_b = bucketed.decode_step(tokens)  # (3, V)
        logits_o = open_.decode_step(tokens)  # (3, V)
        after = bucketed.cache.k_pools + bucketed.cache.v_pools
        # Pool rows this step touched, in any layer, K or V: an exact comparison.
        rows = set()
        for old, new in zip(before, after, strict=True):
            rows |= set((old != new).flatten(1).any(1).nonzero().flatten().tolist())
        changed.append(rows)
        plan = bucketed.last_plan
        check_pad_inert(bucketed.last_plan, bucketed.cache)
        real_writes.append(set(plan.write_slots[: plan.batch_size].tolist()))
        assert plan.pad_rows == 1 and plan.graph_rows == 4
        diffs.append(relative_diff(logits_b, logits_o))
        tokens = logits_o.argmax(-1).tolist()
    return bucketed, open_, diffs, changed, real_writes


def relative_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


def test_real_rows_logits_agree_with_and_without_padding(driven):
    bucketed, _, diffs, _, _ = driven
    assert len(diffs) == STEPS + 1
    # Padding changes the GEMMs' row count (3 -> 4) and the attention width (to a multiple of
    # 16): other kernels, other summation orders, so agreement is to rounding, not bitwise.
    rtol = rounding_rtol(torch.float32, forward_terms(bucketed.model_config, 64))
    assert max(diffs) <= rtol, f"relative logit diffs {max(diffs):.2e} > {rtol:.2e}"


def test_bucketed_steps_presented_padded_shapes(driven):
    bucketed, open_, _, _, _ = driven
    assert bucketed.last_plan.graph_width % 16 == 0
    assert bucketed.last_plan.graph_width > bucketed.last_plan.max_ctx
    assert open_.last_plan.pad_rows == 0
    assert open_.last_plan.graph_width == open_.last_plan.max_ctx


def test_a_padded_step_writes_only_its_real_slots_and_the_sink(driven):
    bucketed, _, _, changed, real_writes = driven
    sink = bucketed.cache.sink_slot
    for rows, writes in zip(changed, real_writes, strict=True):
        assert sink not in writes
        assert rows <= writes | {sink}
    # The padded row feeds token 0 at position 0 every step, so it writes the same K/V each
    # time: the sink changes value once, on the first padded step.
    assert sink in changed[0]


def test_pools_outside_the_sink_match_the_unpadded_engine(driven):
    bucketed, open_, _, _, _ = driven
    sink = bucketed.cache.sink_slot
    assert sink == open_.cache.sink_slot
    for pb, po in zip(
        bucketed.cache.k_pools + bucketed.cache.v_pools,
        open_.cache.k_pools + open_.cache.v_pools,
        strict=True,
    ):
        # The same slots hold K/V in both engines and nothing else was written (exact: a
        # rounding difference never turns a written slot's whole row into zeros).
        assert torch.equal(pb[:sink].flatten(1).any(1), po[:sink].flatten(1).any(1))
        # Values agree to rounding: the GEMMs ran over 4 rows instead of 3 and deeper layers
        # attended over a padded width, so the same sums were added in other orders.
        terms = forward_terms(bucketed.model_config, 64)
        assert_close_rounding(pb[:sink], po[:sink], terms, "pool outside the sink")
    # Layer 0's K/V come straight off the embeddings: one GEMM over the hidden size (plus
    # RoPE) away from identical inputs, so they must agree to that GEMM's rounding alone.
    hidden = bucketed.model_config.hidden_size
    for pools in ("k_pools", "v_pools"):
        pb, po = getattr(bucketed.cache, pools)[0], getattr(open_.cache, pools)[0]
        assert_close_rounding(pb[:sink], po[:sink], hidden, f"layer 0 {pools}")


def test_the_sink_changed_only_in_the_bucketed_engine(driven):
    bucketed, open_, _, _, _ = driven
    sink = bucketed.cache.sink_slot
    assert all(p[sink].abs().sum() > 0 for p in bucketed.cache.k_pools + bucketed.cache.v_pools)
    assert all(p[sink].abs().sum() == 0 for p in open_.cache.k_pools + open_.cache.v_pools)


# --- the gate on the host ---------------------------------------------------------------------


def _cache(max_batch: int = 8, max_model_len: int = 64) -> BatchedPagedKVCache:
    model = ModelConfig(
        vocab_size=1,
        hidden_size=2,
        intermediate_size=1,
        num_layers=1,
        num_heads=1,
        num_kv_heads=1,
        head_dim=2,
    )
    config = EngineConfig(max_batch_size=max_batch, max_model_len=max_model_len)
    return BatchedPagedKVCache(model, config, torch.float32)


@pytest.fixture
def padded():
    cache = _cache()
    for row, n in enumerate((5, 9, 3)):
        cache.add(row, n)
    plan = plan_decode(cache, [0, 1, 2], DecodeBuckets(8, 64, 16))
    assert (plan.batch_size, plan.pad_rows, plan.graph_width) == (3, 1, 16)
    return cache, plan


def test_a_sound_plan_passes(padded):
    cache, plan = padded
    check_pad_inert(plan)
    check_pad_inert(plan, cache)


def test_an_unbucketed_plan_passes():
    cache = _cache()
    cache.add(0, 4)
    plan = plan_decode(cache, [0])
    assert plan.pad_rows == 0
    check_pad_inert(plan, cache)


def test_a_padded_write_into_a_real_slot_is_caught(padded):
    cache, plan = padded
    slots = plan.write_slots.clone()  # (4,)
    slots[3] = cache.tables[0].slot(0)  # row 0's first token
    with pytest.raises(PadUnsound, match="padded row 3 writes slot"):
        check_pad_inert(dataclasses.replace(plan, write_slots=slots))


def test_a_padded_row_that_reads_history_is_caught(padded):
    _, plan = padded
    lens = plan.context_lens.clone()  # (4,)
    lens[3] = 2
    with pytest.raises(PadUnsound, match="padded row 3 has context_lens 2"):
        check_pad_inert(dataclasses.replace(plan, context_lens=lens))


def test_a_real_row_writing_the_sink_is_caught(padded):
    _, plan = padded
    slots = plan.write_slots.clone()  # (4,)
    slots[1] = plan.sink_slot
    with pytest.raises(PadUnsound, match="real row 1 writes the sink"):
        check_pad_inert(dataclasses.replace(plan, write_slots=slots))


def test_a_plan_whose_sink_is_a_real_slot_is_caught_against_the_cache(padded):
    cache, plan = padded
    fake = cache.tables[1].slot(0)
    slots = plan.write_slots.clone()  # (4,)
    slots[3] = fake
    forged = dataclasses.replace(plan, write_slots=slots, sink_slot=fake)
    check_pad_inert(forged)  # self-consistent: only the cache can tell
    with pytest.raises(PadUnsound, match="not the cache's sink slot"):
        check_pad_inert(forged, cache)


def test_an_engine_with_no_plan_yet_is_refused():
    engine = _engine(True)
    with pytest.raises(PadUnsound, match="no planned step"):
        check_pad_inert(engine.last_plan, engine.cache)
