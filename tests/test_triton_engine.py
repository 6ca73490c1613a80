"""The engine with Triton attention: parity with transformers, one graph, no width axis.

Runs on CPU under the Triton interpreter (conftest sets it on a machine without CUDA; the module
is marked `interpreter` and skipped on one with CUDA), so every decode read goes through
`nanobench::paged_decode` exactly as it does on a GPU.
"""

import pytest

from engine.engine import Engine, resolve_attention
from engine.plan import plan_decode
from engine.sources import materialize_preset
from tests.helpers import prompts
from tests.test_engine_parity import assert_matches_transformers, engine_run

pytestmark = pytest.mark.interpreter

# Not test_engine_parity's 64: the interpreter runs every kernel program in Python, and a step
# costs more as contexts grow, so 64 steps take ~70 s here. 24 steps still take every row across
# a block boundary (16, 32) and rows 0, 2 and 3 across the kernel's 32-position tile boundary.
STEPS = 24
MAX_MODEL_LEN = 128


@pytest.fixture(scope="module")
def engine():
    return Engine.from_checkpoint(
        "tiny", max_batch_size=4, max_model_len=MAX_MODEL_LEN, attention="triton"
    )


def test_triton_engine_matches_transformers(engine):
    assert engine.attention == "triton"
    engine.release_all()
    directory = materialize_preset("tiny")
    batch = prompts(4, [16, 5, 11, 23], engine.model_config.vocab_size, seed=len("tiny"))
    tokens, logits = engine_run(engine, batch, STEPS)
    assert engine.last_plan.graph_width == MAX_MODEL_LEN, "the triton read spans the table"
    worst = assert_matches_transformers(directory, batch, tokens, logits, STEPS)
    print(f"tiny/triton: worst relative logit error {worst:.2e}")


def planned_step(engine, tokens):
    plan = plan_decode(engine.cache, list(engine.active_rows), None, engine.inputs, width_free=True)
    engine.inputs.write_ids(tokens)
    return engine.inputs.input_ids[: plan.graph_rows], plan  # (B, 1)


def started(engine, lengths=(5, 9, 3)) -> list[int]:
    engine.release_all()
    batch = prompts(len(lengths), list(lengths), engine.model_config.vocab_size)
    return engine.prefill(batch).argmax(-1).tolist()


def first_break(out) -> str:
    """The first break's reason and the engine frame it came from, on one line."""
    reason = out.break_reasons[0]
    where = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in reason.user_stack]
    head = reason.reason.strip().splitlines()[0:2]
    return (
        f"{out.graph_count} graphs, {out.graph_break_count} breaks; first: "
        f"{' '.join(line.strip() for line in head)} via {' > '.join(where)}"
    )


def test_explain_triton_decode_is_one_graph(engine):
    import torch._dynamo

    input_ids, plan = planned_step(engine, started(engine))
    torch._dynamo.reset()
    try:
        out = torch._dynamo.explain(engine.planned_forward)(input_ids, plan)
    finally:
        torch._dynamo.reset()
        engine.release_all()
    assert (out.graph_count, out.graph_break_count) == (1, 0), first_break(out)
    targets = {str(node.target) for gm in out.graphs for node in gm.graph.nodes}
    assert "nanobench.paged_decode.default" in targets, "the read is not the custom op"


def test_consecutive_triton_steps_present_one_shape(engine):
    """Only lengths (tensor values) move between steps; the slot_mapping has no width axis."""
    input_ids, first = planned_step(engine, started(engine))
    logits = engine.planned_forward(input_ids, first)  # (B, V)
    input_ids, second = planned_step(engine, logits.argmax(-1).tolist())
    engine.release_all()
    assert first.graph_width == second.graph_width == MAX_MODEL_LEN
    assert first.slot_mapping.shape == second.slot_mapping.shape == (3, MAX_MODEL_LEN)
    assert second.max_ctx == first.max_ctx + 1


def test_auto_attention_resolves_to_reference_on_cpu():
    engine = Engine.from_checkpoint("tiny", max_model_len=64, attention="auto")
    assert engine.attention == "reference"
    assert not engine.width_free
    assert resolve_attention("auto", "cuda") == "triton"
