"""Captured decode: record once per shape, replay after, and every gate that keeps it honest.

CPU tests use `eager_recorder` (a capture's semantics without a device); tests marked `gpu`
record real CUDA graphs into one shared pool.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import engine.engine as engine_module
from engine.buckets import BucketsUnsound
from engine.captured import (
    CapturedDecode,
    CaptureUnsound,
    check_addresses_stable,
    check_all_shapes_captured,
    check_capture_preconditions,
    check_forward_is_one_graph,
    check_output_not_held,
    check_replay_rows,
    check_replays_dominate,
    padding_plan,
)
from engine.config import ConfigError, EngineConfig
from engine.engine import Engine, EngineLimitError
from engine.inputs import InputsUnsound
from engine.padding import PadUnsound, check_pad_inert
from engine.plan import plan_decode
from engine.recorders import EagerPool, default_recorder, eager_recorder
from engine.slots import SlotsUnsound
from nanobench.cost.pool import PoolUnsound, check_pool_shared
from tests.helpers import TINY_MHA, prompts

MAX_LEN = 64
WIDTH = 16


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Two cores shared with other jobs: intra-op threads only add contention at these sizes.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def checkpoint():
    from engine.weights import synthesize_weights

    return TINY_MHA, synthesize_weights(TINY_MHA, 1, torch.float32)


def build(checkpoint, *, capture=True, rows=2, device="cpu", **options) -> Engine:
    model, tensors = checkpoint
    seams = {k: options.pop(k) for k in ("recorder",) if k in options}
    config = EngineConfig(
        max_batch_size=rows,
        max_model_len=MAX_LEN,
        device=device,
        bucket_decode=True,
        width_multiple=WIDTH,
        capture_decode=capture,
        **options,
    )
    tensors = {k: v.to(device) for k, v in tensors.items()}
    return Engine.build(model, tensors, config, **seams)


def run(engine: Engine, batch, steps: int, forced=None):
    """Prefill and decode `steps` steps; returns (tokens fed, logits copied out per step)."""
    tokens = engine.prefill(batch).argmax(-1).tolist()
    fed, logits = [], []
    for i in range(steps):
        if forced is not None:
            tokens = forced[i]
        fed.append(tokens)
        out = engine.decode_step(tokens)
        logits.append(out.clone())
        tokens = out.argmax(-1).tolist()
    engine.release_all()
    return fed, logits


def batch_of(n: int, length: int = 10, seed: int = 0):
    return prompts(n, [length] * n, TINY_MHA.vocab_size, seed=seed)


def started(engine: Engine, n: int = 2, length: int = 10):
    """An engine holding a prefilled batch and one planned step: (input_ids, plan)."""
    engine.release_all()
    tokens = engine.prefill(batch_of(n, length)).argmax(-1).tolist()
    plan = plan_decode(engine.cache, list(engine.active_rows), engine.buckets, engine.inputs)
    engine.inputs.write_ids(tokens + [0] * plan.pad_rows)
    return engine.inputs.input_ids[: plan.graph_rows], plan


# -- configuration and wiring ----------------------------------------------------------------


def test_capture_needs_buckets_by_name():
    with pytest.raises(ConfigError, match="capture_decode needs bucket_decode"):
        EngineConfig(capture_decode=True, bucket_decode=False)


def test_capture_needs_persistent_inputs_by_name():
    with pytest.raises(ConfigError, match="capture_decode needs persist_inputs"):
        EngineConfig(capture_decode=True, bucket_decode=True, persist_inputs=False)


def test_engine_builds_captured_decode_in_front_of_compiled(checkpoint):
    engine = build(checkpoint)
    assert isinstance(engine.decode_graphs, CapturedDecode)
    assert engine.decode_graphs.fn is engine.compiled
    assert build(checkpoint, capture=False).decode_graphs is None


def test_from_checkpoint_takes_the_recorder_seam():
    calls = []

    def counting(fn, args, pool=None, output=None):
        calls.append(args[1].graph_rows)
        return eager_recorder(fn, args, pool, output)

    engine = Engine.from_checkpoint(
        "tiny",
        max_batch_size=2,
        max_model_len=32,
        bucket_decode=True,
        width_multiple=32,
        capture_decode=True,
        recorder=counting,
    )
    engine.generate(batch_of(2, 8), 4)
    assert calls == [2]


# -- record once, replay after -----------------------------------------------------------------


def test_first_sighting_records_later_sightings_replay(checkpoint):
    engine = build(checkpoint)
    run(engine, batch_of(2), 12)  # widths 11..22 -> buckets 16 and 32
    graphs = engine.decode_graphs
    assert graphs.replays == 12, "every step replays, the recording step included"
    assert graphs.recordings == 2 == graphs.distinct
    assert graphs.recorded_in_call.count(True) == 2
    assert sorted(graphs.graphs) == [(2, 16), (2, 32)]
    assert all(g.rows == (0, 1) for g in graphs.graphs.values())
    assert sum(g.replays for g in graphs.graphs.values()) == 12


def test_replayed_logits_equal_eager_step_by_step(checkpoint):
    eager, captured = build(checkpoint, capture=False), build(checkpoint)
    batch = batch_of(2, 7)
    fed, want = run(eager, batch, 40)
    _, got = run(captured, batch, 40, forced=fed)
    for step, (a, b) in enumerate(zip(want, got, strict=True)):
        assert torch.equal(a, b), f"step {step}: replay differs from eager"
    # Greedy from its own logits: the captured engine's tokens are eager's tokens.
    assert [lg.argmax(-1).tolist() for lg in got[:-1]] == fed[1:]


def test_a_step_returns_a_replay_not_the_recording_call():
    fn_calls = []

    def fn(ids, plan):
        fn_calls.append(1)
        return ids.float() * 2  # (B, 1)

    ids = torch.arange(3).view(3, 1)
    recording = eager_recorder(fn, (ids, None))
    assert torch.isnan(recording.output).all(), "recording produced no result"
    recording.replay()
    assert torch.equal(recording.output, ids.float() * 2)
    ids.add_(1)  # the held argument is the caller's storage: a replay sees the new values
    recording.replay()
    assert torch.equal(recording.output, ids.float() * 2)
    assert len(fn_calls) == 3


def test_default_recorder_picks_eager_off_cpu_tensors():
    recording = default_recorder(lambda ids: ids.float(), (torch.ones(2, 1),))
    assert isinstance(recording.pool, EagerPool)


def test_a_view_without_a_plan_falls_through_and_is_counted(checkpoint):
    from engine.attention import UnplannedDecode

    engine = build(checkpoint)
    engine.release_all()
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    engine._grow(engine.active_rows)
    view = UnplannedDecode(engine.cache, engine.active_rows)
    logits = engine.decode_forward(torch.tensor(tokens).view(-1, 1), view)
    assert logits.shape == (2, TINY_MHA.vocab_size)
    assert engine.decode_graphs.fell_through == 1
    assert engine.decode_graphs.recordings == 0 and engine.decode_graphs.replays == 0
    engine.release_all()


def test_a_replay_reads_addresses_and_a_tuple_only(checkpoint, monkeypatch):
    engine = build(checkpoint)
    input_ids, plan = started(engine)
    engine.decode_forward(input_ids, plan)  # records

    def boom(*_a, **_k):
        raise AssertionError("a replay read a tensor value on the host")

    for name in ("item", "tolist", "__int__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, name, boom)
    engine.decode_forward(input_ids, plan)
    engine.decode_forward(input_ids, plan)
    monkeypatch.undo()
    assert engine.decode_graphs.replays == 3 and engine.decode_graphs.recordings == 1
    engine.release_all()


# -- the per-replay gates ---------------------------------------------------------------------


def test_a_moved_input_is_refused(checkpoint):
    engine = build(checkpoint)
    input_ids, plan = started(engine)
    engine.decode_forward(input_ids, plan)
    with pytest.raises(CaptureUnsound, match="input_ids moved"):
        engine.decode_forward(input_ids.clone(), plan)
    moved = dataclasses.replace(plan, context_lens=plan.context_lens.clone())
    with pytest.raises(CaptureUnsound, match="context_lens moved"):
        check_addresses_stable(engine.decode_graphs.graphs[(2, 16)], input_ids, moved)
    engine.release_all()


def test_a_lazy_graph_refuses_other_rows(checkpoint):
    engine = build(checkpoint, rows=4)
    engine.generate(batch_of(3), 3)  # records (4, 16) for rows (0, 1, 2)
    assert engine.decode_graphs.graphs[(4, 16)].rows == (0, 1, 2)
    with pytest.raises(CaptureUnsound, match=r"recorded for rows \(0, 1, 2\)"):
        engine.generate(batch_of(4), 3)
    engine.release_all()


def test_an_up_front_graph_takes_any_prefix_of_its_rows(checkpoint):
    eager, captured = build(checkpoint, capture=False, rows=4), build(checkpoint, rows=4)
    captured.capture()
    for n in (3, 4, 1):
        batch = batch_of(n, seed=n)
        assert captured.generate(batch, 6) == eager.generate(batch, 6)
    assert captured.decode_graphs.recorded_mid_run == 0
    graph = captured.decode_graphs.graphs[(4, 16)]
    _, plan = started(captured, 3)
    check_replay_rows(graph, plan)
    not_prefix = dataclasses.replace(plan, rows=(1, 2))
    with pytest.raises(CaptureUnsound, match="not a prefix"):
        check_replay_rows(graph, not_prefix)
    captured.release_all()


# -- the preconditions, in order --------------------------------------------------------------


def test_single_graph_trap_refuses_a_host_read():
    def reads(ids, plan):
        if ids.sum() > 0:  # a data-dependent branch: a break, and a sync inside a capture
            return ids.float()
        return ids.float()

    with pytest.raises(CaptureUnsound, match=r"Tensor.__bool__"):
        check_forward_is_one_graph(reads, (torch.ones(2, 1), None))
    # The trap restores every method afterwards.
    assert bool(torch.tensor(1)) and torch.tensor(3).item() == 3


def test_the_planned_forward_passes_the_trap(checkpoint):
    engine = build(checkpoint)
    input_ids, plan = started(engine)
    check_forward_is_one_graph(engine.compiled, (input_ids, plan))
    engine.release_all()


@pytest.mark.slow
def test_single_graph_by_dynamo_explain(checkpoint):
    import torch._dynamo

    engine = build(checkpoint)
    input_ids, plan = started(engine)
    torch._dynamo.reset()
    try:
        check_forward_is_one_graph(engine.compiled, (input_ids, plan), mode="explain")
        with pytest.raises(CaptureUnsound, match="graphs with"):
            check_forward_is_one_graph(
                lambda ids, p: ids.float() + float(ids.sum()), (input_ids, plan), "explain"
            )
    finally:
        torch._dynamo.reset()
    engine.release_all()


def preconditions(engine, input_ids, plan):
    check_capture_preconditions(
        engine.compiled,
        input_ids,
        plan,
        cache=engine.cache,
        buckets=engine.buckets,
        inputs=engine.inputs,
    )


def test_preconditions_pass_on_a_planned_bucketed_step(checkpoint):
    engine = build(checkpoint)
    preconditions(engine, *started(engine))
    engine.release_all()


def test_a_copied_mapping_fails_the_window_gate_first(checkpoint):
    engine = build(checkpoint)
    input_ids, plan = started(engine)
    # Also outside the set and not persistent: the window gate runs first and names slots.py.
    bad = dataclasses.replace(
        plan,
        slot_mapping=plan.slot_mapping[:, :15].clone(),
        context_lens=plan.context_lens.clone(),
    )
    with pytest.raises(SlotsUnsound, match="not a window"):
        preconditions(engine, input_ids, bad)
    engine.release_all()


def test_an_unbucketed_shape_fails_the_set_gate(checkpoint):
    engine = build(checkpoint)
    engine.release_all()
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    plan = plan_decode(engine.cache, [0, 1], None, engine.inputs)  # width 11, no bucket
    engine.inputs.write_ids(tokens)
    with pytest.raises(BucketsUnsound, match=r"shape \(2, 11\) is not in the bucket set"):
        preconditions(engine, engine.inputs.input_ids[:2], plan)
    engine.release_all()


def test_a_live_padded_row_fails_the_pad_gate(checkpoint):
    engine = build(checkpoint, rows=4)
    input_ids, plan = started(engine, 3)
    check_pad_inert(plan, engine.cache)
    engine.inputs.context_lens[3] = 5  # the padded row would read five tokens
    with pytest.raises(PadUnsound, match="padded row 3 has context_lens 5"):
        preconditions(engine, input_ids, plan)
    engine.inputs.context_lens[3] = 0
    engine.inputs.write_slots[3] = 0  # and write into block 0, someone's history
    with pytest.raises(PadUnsound, match="expected the sink slot"):
        check_pad_inert(plan, engine.cache)
    engine.release_all()


def test_fresh_step_tensors_fail_the_inputs_gate(checkpoint):
    engine = build(checkpoint)
    engine.release_all()
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    plan = plan_decode(engine.cache, [0, 1], engine.buckets, None)  # fresh tensors
    with pytest.raises(InputsUnsound, match="fresh tensor"):
        preconditions(engine, torch.tensor(tokens).view(-1, 1), plan)
    engine.release_all()


def test_recording_runs_the_preconditions(checkpoint):
    engine = build(checkpoint)
    engine.release_all()
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    plan = plan_decode(engine.cache, [0, 1], None, engine.inputs)
    engine.inputs.write_ids(tokens)
    with pytest.raises(BucketsUnsound):
        engine.decode_graphs(engine.inputs.input_ids[:2], plan)
    assert engine.decode_graphs.recordings == 0, "no graph exists when a precondition fails"
    engine.release_all()


# -- capture up front -------------------------------------------------------------------------


def test_padding_plan_is_windows_writing_only_the_sink(checkpoint):
    engine = build(checkpoint, rows=4)
    engine.release_all()
    input_ids, plan = padding_plan(engine.cache, engine.inputs, 4, 32)
    assert plan.rows == () and plan.graph_rows == 4 and plan.graph_width == 32
    assert input_ids.data_ptr() == engine.inputs.input_ids.data_ptr()
    assert plan.slot_mapping.data_ptr() == engine.cache.slots.table.data_ptr()
    assert plan.write_slots.tolist() == [engine.cache.sink_slot] * 4
    assert plan.context_lens.tolist() == [0] * 4 and plan.positions.view(-1).tolist() == [0] * 4
    preconditions(engine, input_ids, plan)


def test_capture_walks_the_whole_list_largest_first_into_one_pool(checkpoint):
    engine = build(checkpoint, rows=4)
    sink = engine.cache.sink_slot
    before = [k[:sink].clone() for k in engine.cache.k_pools]
    stats = engine.capture()
    assert stats.count == engine.buckets.count == 3 * 4
    cells = [r * w for r, w in (s.shape for s in stats.shapes)]
    assert cells == sorted(cells, reverse=True), "largest first"
    assert [s.shape for s in stats.shapes] == list(engine.buckets.shapes)
    check_all_shapes_captured(engine.buckets.shapes, engine.decode_graphs.graphs)
    check_pool_shared(engine.decode_graphs.pools)
    assert all(g.rows is None for g in engine.decode_graphs.graphs.values())
    for layer, k in enumerate(engine.cache.k_pools):
        assert torch.equal(k[:sink], before[layer]), "a synthetic batch wrote outside the sink"
    assert stats.pool_growth_bytes is None and stats.total_s > 0
    # Walking the list again records nothing new.
    assert engine.capture().count == 0


def test_the_first_real_decode_after_capture_is_a_replay(checkpoint):
    eager, captured = build(checkpoint, capture=False), build(checkpoint)
    captured.capture()
    recorded = captured.decode_graphs.recordings
    batch = batch_of(2, 13)
    fed, want = run(eager, batch, 20)
    _, got = run(captured, batch, 20, forced=fed)
    graphs = captured.decode_graphs
    assert graphs.recorded_in_call[0] is False, "the first real decode recorded"
    assert graphs.recorded_mid_run == 0 and graphs.recordings == recorded
    assert graphs.replays == 20
    assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))


def test_capture_refuses_a_busy_or_uncapturing_engine(checkpoint):
    engine = build(checkpoint)
    engine.prefill(batch_of(2))
    with pytest.raises(EngineLimitError, match="holds rows"):
        engine.capture()
    engine.release_all()
    with pytest.raises(EngineLimitError, match="capture_decode=True"):
        build(checkpoint, capture=False).capture()


def test_all_shapes_captured_names_what_is_missing(checkpoint):
    engine = build(checkpoint)
    engine.generate(batch_of(2), 3)
    with pytest.raises(CaptureUnsound, match="have no graph"):
        check_all_shapes_captured(engine.buckets.shapes, engine.decode_graphs.graphs)


def test_private_pools_fail_the_shared_pool_gate(checkpoint):
    def private(fn, args, pool=None, output=None):
        return eager_recorder(fn, args, None, output)  # ignores the shared pool it is handed

    engine = build(checkpoint, recorder=private)
    engine.capture()
    with pytest.raises(PoolUnsound, match="distinct pools"):
        check_pool_shared(engine.decode_graphs.pools)


def test_replays_dominate():
    check_replays_dominate(1, 8)
    check_replays_dominate(2, 128)
    with pytest.raises(CaptureUnsound, match="only 0.0% reused"):
        check_replays_dominate(8, 8)
    with pytest.raises(CaptureUnsound, match="no replays"):
        check_replays_dominate(0, 0)


# -- the output is a buffer with a one-step lifetime -------------------------------------------


def test_a_held_output_changes_under_the_next_replay(checkpoint):
    engine = build(checkpoint)
    engine.release_all()
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    held = engine.decode_step(tokens)  # a view on the graph's output buffer
    first = held.clone()
    second = engine.decode_step(held.argmax(-1).tolist())
    assert held.data_ptr() == second.data_ptr()
    assert not torch.equal(held, first), "the next replay wrote through the held view"
    assert torch.equal(held, second)
    with pytest.raises(CaptureUnsound, match="view on a replay's output"):
        check_output_not_held([held], engine.decode_graphs.outputs)
    check_output_not_held([first, tokens], engine.decode_graphs.outputs)
    engine.release_all()


def held_tensors(root: object, skip: tuple[object, ...], depth: int = 4) -> list[torch.Tensor]:
    """Tensors reachable from `root` through attributes, lists, tuples and dicts, outside `skip`."""
    found, seen = [], {id(s) for s in skip}
    todo = [(root, 0)]
    while todo:
        obj, level = todo.pop()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append(obj)
        elif isinstance(obj, (list, tuple)):
            todo += [(item, level + 1) for item in obj]
        elif isinstance(obj, dict):
            todo += [(item, level + 1) for item in obj.values()]
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            todo += [(item, level + 1) for item in vars(obj).values()]
    return found


def test_the_engine_never_holds_an_output(checkpoint, monkeypatch):
    """Between steps, neither the sampler's result nor anything the engine keeps (its plan,
    buffers, model) is a view on a replay's output; only the recorded graphs own those."""
    eager, captured = build(checkpoint, capture=False), build(checkpoint)
    batch = batch_of(2, 9)
    want = eager.generate(batch, 24)
    checked = []
    real_sample = engine_module.sample

    def spy(logits, params, generator=None):
        out = real_sample(logits, params, generator)
        graphs = captured.decode_graphs
        if graphs.outputs:  # after a decode step (the prefill's logits are not a replay's)
            kept = held_tensors(captured, skip=(graphs,))
            check_output_not_held([out, *kept], graphs.outputs)
            checked.append(len(kept))
        return out

    monkeypatch.setattr(engine_module, "sample", spy)
    assert captured.generate(batch, 24) == want
    assert len(checked) == 23 and min(checked) > 0, "every decode step was checked"
    # The walk does reach an output when something holds one: the check can fail here.
    stale = captured.decode_graphs.outputs[0][:1]  # (1, V)
    with pytest.raises(CaptureUnsound, match="view on a replay's output"):
        check_output_not_held(
            held_tensors({"kept": [stale]}, skip=()), captured.decode_graphs.outputs
        )


# -- real CUDA graphs -------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_replay_equals_eager_with_stable_addresses_and_one_pool(checkpoint):
    eager = build(checkpoint, capture=False, device="cuda")
    captured = build(checkpoint, device="cuda")
    batch = batch_of(2, 7)
    fed, want = run(eager, batch, 30)
    _, got = run(captured, batch, 30, forced=fed)
    for a, b in zip(want, got, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    graphs = captured.decode_graphs
    assert graphs.recordings == 3 and graphs.replays == 30  # widths 8..37: buckets 16, 32, 48
    check_pool_shared(graphs.pools)
    assert not isinstance(graphs.pools[0], EagerPool)
    for (rows, width), graph in graphs.graphs.items():
        # What the recording must have held at once, counted by hand for TINY_MHA (4 heads,
        # vocab 512, fp32): the [rows, 4, width] score rectangle nanobench prices the pool by,
        # and the (rows, 512) logits the graph keeps as its output.
        assert graph.peak_bytes >= rows * 4 * width * 4, (rows, width, graph.peak_bytes)
        assert graph.peak_bytes >= rows * 512 * 4, (rows, width, graph.peak_bytes)


@pytest.mark.gpu
def test_cuda_up_front_capture_then_replay(checkpoint):
    eager = build(checkpoint, capture=False, device="cuda", rows=4)
    captured = build(checkpoint, device="cuda", rows=4)
    stats = captured.capture()
    assert stats.count == captured.buckets.count == 12  # rows 1, 2, 4 x widths 16, 32, 48, 64
    check_pool_shared(captured.decode_graphs.pools)
    # Against nanobench's prediction, by hand: the shared pool holds the largest score
    # rectangle (4 rows x 4 heads x 64 x fp32), and every graph's (rows, 512) fp32 logits stay
    # live in it: 4 widths x (1 + 2 + 4) rows x 512 x 4 bytes.
    assert stats.pool_growth_bytes >= 4 * 4 * 64 * 4
    assert stats.pool_growth_bytes >= 4 * (1 + 2 + 4) * 512 * 4
    outputs = {s: g.output.data_ptr() for s, g in captured.decode_graphs.graphs.items()}
    batch = batch_of(3, 11)
    assert captured.generate(batch, 16) == eager.generate(batch, 16)
    assert captured.decode_graphs.recorded_mid_run == 0
    # Replays write where they recorded: the output buffers never move.
    assert outputs == {s: g.output.data_ptr() for s, g in captured.decode_graphs.graphs.items()}


@pytest.mark.gpu
def test_cuda_held_output_is_overwritten(checkpoint):
    engine = build(checkpoint, device="cuda")
    tokens = engine.prefill(batch_of(2)).argmax(-1).tolist()
    held = engine.decode_step(tokens)
    first = held.clone()
    engine.decode_step(held.argmax(-1).tolist())
    torch.cuda.synchronize()
    assert not torch.equal(held, first)
    with pytest.raises(CaptureUnsound):
        check_output_not_held([held], engine.decode_graphs.outputs)
    engine.release_all()
