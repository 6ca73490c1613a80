"""The logits a capture keeps: one buffer every graph writes, against one per graph (issue 16).

The engine's capture path (`capture_output="shared"`, the default) hands every recording a
window of one [max_batch, V] fp32 buffer; `per-graph` lets each recording keep its own. The
real CPU path (the eager recorder) is counted here by storage, and held against the traced
figures `pool-budget` and `capture` price lists with. Expected bytes are hand counts from the
list's shapes, never the engine's own totals.
"""

from __future__ import annotations

import pytest
import torch

from engine.config import EngineConfig, preset
from engine.engine import Engine
from nanobench.harness.step.dynamo_explain import seeded_prompts
from nanobench.memory.decode_workspace import decode_memory, list_memory
from nanobench.memory.live_bytes import LiveBytes

TINY = preset("tiny").config
F32 = 4
MAX_BATCH, MAX_LEN, MULTIPLE = 4, 64, 32  # rows 1, 2, 4 x widths 32, 64: six graphs


def build(capture_output: str) -> Engine:
    config = EngineConfig(
        max_batch_size=MAX_BATCH,
        max_model_len=MAX_LEN,
        attention="reference",
        bucket_decode=True,
        width_multiple=MULTIPLE,
        capture_decode=True,
        capture_output=capture_output,
        linear_layout="dense",
    )
    return Engine.build(TINY, None, config)


def storages(engine: Engine) -> set[int]:
    return {o.untyped_storage().data_ptr() for o in engine.decode_graphs.outputs}


def test_every_graph_writes_a_window_of_one_buffer():
    engine = build("shared")
    engine.capture()
    graphs = engine.decode_graphs.graphs
    assert sorted(graphs) == [(1, 32), (1, 64), (2, 32), (2, 64), (4, 32), (4, 64)]
    assert len(storages(engine)) == 1
    buffer = engine.decode_graphs.output_buffer  # (B, V)
    for (rows, _), graph in graphs.items():
        # rows 0..rows-1 of the buffer itself, not a copy
        assert graph.output.shape == (rows, TINY.vocab_size)
        assert graph.output.data_ptr() == buffer.data_ptr()
    assert engine.decode_graphs.output_bytes == MAX_BATCH * TINY.vocab_size * F32


def test_per_graph_outputs_are_a_buffer_a_graph():
    engine = build("per-graph")
    engine.capture()
    assert len(storages(engine)) == 6
    # rows 1 + 2 + 4, at each of the 2 widths
    assert engine.decode_graphs.output_bytes == 2 * (1 + 2 + 4) * TINY.vocab_size * F32


def test_the_traced_outputs_are_what_the_real_capture_keeps():
    shared, per_graph = build("shared"), build("per-graph")
    shared.capture()
    per_graph.capture()
    traced = list_memory(
        decode_memory(TINY, "reference", "float32", MAX_BATCH, MAX_LEN), shared.buckets.shapes
    )
    assert traced.shared_output_bytes == shared.decode_graphs.output_bytes
    assert traced.outputs_bytes == per_graph.decode_graphs.output_bytes


@pytest.mark.parametrize("capture_output", ["shared", "per-graph"])
def test_a_recording_leaves_allocated_only_the_outputs_it_keeps(capture_output):
    # Real tensors, the real record path: what is still alive when the recording returns.
    from engine.captured import padding_plan

    engine = build(capture_output)
    rows, width = 4, 64
    input_ids, plan = padding_plan(engine.cache, engine.inputs, rows, width)
    tracker = LiveBytes()
    with torch.no_grad(), tracker:
        graph = engine.decode_graphs.record(input_ids, plan, rows=None)
        graph.replay()
    left = sum(delta for _, delta in tracker.events)
    shape = decode_memory(TINY, "reference", "float32", MAX_BATCH, MAX_LEN).at(rows, width)
    assert shape.outputs_bytes == rows * TINY.vocab_size * F32
    assert left == (0 if capture_output == "shared" else shape.outputs_bytes)


def test_graphs_sharing_one_buffer_replay_what_eager_computes():
    # Batches of 3, 1 and 4 rows: three graphs write the same buffer in turn. Same kernels on
    # the same shapes on CPU, so replayed logits are bitwise the eager engine's.
    captured = build("shared")
    captured.capture()
    eager = Engine.build(
        TINY, None, EngineConfig(**{**captured.config.__dict__, "capture_decode": False})
    )
    for seed, rows in enumerate((3, 1, 4)):
        batch = seeded_prompts(rows, 9, TINY.vocab_size, seed=seed)
        tokens = eager.prefill(batch).argmax(-1).tolist()
        captured.prefill(batch)
        for _ in range(6):
            want = eager.decode_step(tokens)  # (B, V)
            got = captured.decode_step(tokens)  # (B, V) a window of the shared buffer
            assert torch.equal(got, want)
            tokens = want.argmax(-1).tolist()
        eager.release_all()
        captured.release_all()
    assert captured.decode_graphs.recorded_mid_run == 0
    assert captured.decode_graphs.replays == 18


def test_an_unknown_capture_output_is_refused():
    from engine.config import ConfigError

    with pytest.raises(ConfigError, match="capture output 'sometimes'"):
        EngineConfig(capture_output="sometimes")
