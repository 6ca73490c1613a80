"""DESIGN.md invariants 1-6, each as a test that fails when the invariant breaks."""

from __future__ import annotations

import pytest
import torch

from engine.blocks import BlockTable
from engine.engine import Engine
from engine.plan import PlanUnsound, check_plan_current, plan_decode
from tests.helpers import prompts


@pytest.fixture(scope="module")
def engine():
    return Engine.from_checkpoint("tiny", max_batch_size=4, max_model_len=600)


def started(engine, lengths=(5, 9, 3)):
    engine.release_all()
    batch = prompts(len(lengths), list(lengths), engine.model_config.vocab_size)
    tokens = engine.prefill(batch).argmax(-1).tolist()
    return tokens


def planned_inputs(engine, tokens):
    plan = plan_decode(engine.cache, list(engine.active_rows), None, engine.inputs)
    engine.inputs.write_ids(tokens)
    return engine.inputs.input_ids[: plan.graph_rows], plan


def test_planned_forward_reads_no_host_value(engine, monkeypatch):
    tokens = started(engine)
    input_ids, plan = planned_inputs(engine, tokens)

    def boom(*_a, **_k):
        raise AssertionError("the traced region read a host value")

    monkeypatch.setattr(BlockTable, "num_tokens", property(boom), raising=False)
    monkeypatch.setattr(torch.Tensor, "tolist", boom)
    monkeypatch.setattr(torch.Tensor, "item", boom)
    monkeypatch.setattr(torch.Tensor, "__int__", boom)
    logits = engine.decode_forward(input_ids, plan)
    assert logits.shape == (3, engine.model_config.vocab_size)


def test_unplanned_forward_is_the_control_and_reads_host_values(engine, monkeypatch):
    from engine.attention import UnplannedDecode

    tokens = started(engine)
    engine._grow(engine.active_rows)
    view = UnplannedDecode(engine.cache, engine.active_rows)
    input_ids = torch.tensor(tokens).view(-1, 1)

    def boom(*_a, **_k):
        raise AssertionError("host read")

    monkeypatch.setattr(torch.Tensor, "__int__", boom)
    with pytest.raises(AssertionError, match="host read"):
        engine.model(input_ids, torch.zeros_like(input_ids), view)


def test_a_replayed_plan_is_a_function_and_a_replanned_step_is_not(engine):
    tokens = started(engine)
    input_ids, plan = planned_inputs(engine, tokens)
    first = engine.decode_forward(input_ids, plan).clone()
    second = engine.decode_forward(input_ids, plan).clone()
    assert torch.equal(first, second)
    # Control: planning the same tokens again grows the tables, so the logits move.
    input_ids, plan = planned_inputs(engine, tokens)
    third = engine.decode_forward(input_ids, plan)
    assert not torch.allclose(first, third)


def test_a_stale_plan_is_rejected(engine):
    started(engine)
    rows = list(engine.active_rows)
    stale = plan_decode(engine.cache, rows)
    plan_decode(engine.cache, rows)
    with pytest.raises(PlanUnsound, match="stale plan"):
        check_plan_current(stale, engine.cache)


def test_an_empty_row_is_refused(engine):
    started(engine, (4,))
    engine.cache.tables[0].num_tokens = 0
    with pytest.raises(PlanUnsound, match="holds no tokens"):
        plan_decode(engine.cache, [0])
    engine.cache.tables[0].num_tokens = 4


def test_rows_must_be_a_prefix(engine):
    started(engine)
    with pytest.raises(PlanUnsound, match="not a prefix"):
        plan_decode(engine.cache, [1, 2])


def test_addressing_is_linear_over_512_steps(engine):
    started(engine, (16, 16))
    slots = engine.cache.slots
    before = slots.decode_cells_written
    ptr = slots.table.data_ptr()
    for _ in range(512):
        plan = plan_decode(engine.cache, [0, 1])
        assert plan.slot_mapping.data_ptr() == ptr, "the read must be a window, not a rebuild"
    written = slots.decode_cells_written - before
    appended = 2 * 512
    assert written == appended, f"rebuild ratio {written / appended}"
    # The window really holds each row's slots, in order.
    table = engine.cache.tables[1]
    assert plan.slot_mapping[1, : table.num_tokens].tolist() == [
        table.slot(p) for p in range(table.num_tokens)
    ]


def test_the_sink_slot_is_never_handed_out(engine):
    engine.release_all()
    cache = engine.cache
    handed = set()
    while cache.allocator.num_free:
        handed.add(cache.allocator.allocate())
    assert max(handed) * cache.block_size + cache.block_size - 1 < cache.sink_slot
    assert cache.k_pools[0].shape[0] == cache.sink_slot + 1
    for b in handed:
        cache.allocator.free(b)


def test_audit_is_clean_after_generate_and_after_release(engine):
    engine.release_all()
    batch = prompts(3, [5, 17, 33], engine.model_config.vocab_size)
    engine.prefill(batch)
    assert engine.cache.audit() == []
    engine.release_all()
    assert engine.cache.audit() == []
    engine.generate(batch, 20)
    assert engine.cache.audit() == []
    # And the audit does find a leak when there is one.
    engine.cache.allocator.allocate()
    assert any("leak" in p for p in engine.cache.audit())


def test_padding_mask_uses_finite_minimum_not_minus_inf():
    from kernels.reference import paged_attention_batched_reference

    q = torch.randn(2, 4, 32)
    pool = torch.randn(10, 2, 32)
    mapping = torch.tensor([[1, 2, 3], [9, 9, 9]])
    out = paged_attention_batched_reference(
        q, pool, pool, mapping, torch.tensor([3, 0]), validated=True
    )
    assert torch.isfinite(out).all(), "a padded row (context 0) must not produce NaN"


def test_explain_planned_decode_is_one_graph(engine):
    import torch._dynamo

    tokens = started(engine)
    input_ids, plan = planned_inputs(engine, tokens)
    torch._dynamo.reset()
    out = torch._dynamo.explain(engine.planned_forward)(input_ids, plan)
    torch._dynamo.reset()
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons
