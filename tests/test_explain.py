"""`nanobench explain` against `torch._dynamo.explain` itself on the same engine, and by hand.

explain_forward's row must carry dynamo's numbers (graphs, breaks, ops, guards, break reasons)
for the forward it names; its frames, value guards and scaling verdict are checked against what
can be worked out from the source: the unplanned path's host reads sit in the reference kernel,
called from the engine's unplanned view, once per layer, and its guards read `num_tokens`.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch
from typer.testing import CliRunner

import kernels.reference
from engine.attention import UnplannedDecode
from engine.config import EngineConfig
from engine.engine import Engine
from nanobench.cli import app
from nanobench.harness.step.dynamo_explain import ExplainRow, explain_forward, scaling
from tests.helpers import TINY_MHA, prompts, write_model

ROWS, PROMPT_LEN = 4, 16


@pytest.fixture(autouse=True)
def fresh_dynamo():
    # Dynamo's caches are per code object per process: each explain starts from nothing.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def one_layer():
    torch._dynamo.reset()
    return explain_forward(TINY_MHA, layers=1, rows=ROWS, prompt_len=PROMPT_LEN, path="unplanned")


def dynamo_explains_unplanned(layers: int):
    """torch._dynamo.explain over an engine built here the way explain documents it."""
    config = EngineConfig(
        max_batch_size=ROWS, max_model_len=PROMPT_LEN + 8, decode_path="unplanned"
    )
    engine = Engine.build(TINY_MHA.with_layers(layers), None, config)
    batch = prompts(ROWS, [PROMPT_LEN] * ROWS, TINY_MHA.vocab_size)
    tokens = engine.prefill(batch).argmax(-1).tolist()
    engine._grow(engine.active_rows)
    view = UnplannedDecode(engine.cache, engine.active_rows)
    input_ids = torch.tensor(tokens).view(-1, 1)  # (B, 1)
    with torch.no_grad():
        return torch._dynamo.explain(engine.unplanned_forward)(input_ids, view)


def source_line(fn, text: str) -> str:
    """file:line of the first line of fn's source containing text."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{first + offset}"


@pytest.mark.slow
def test_the_row_carries_dynamos_numbers(one_layer):
    out = dynamo_explains_unplanned(1)
    assert out.graph_count > 1, "the unplanned path breaks: its kernel reads context_lens"
    assert one_layer.graphs == out.graph_count
    assert one_layer.graph_breaks == out.graph_break_count == out.graph_count - 1
    assert one_layer.ops == out.op_count
    assert one_layer.guards == len(out.out_guards)
    # A break site is a distinct (reason, source line): dynamo's reasons, one per graph that
    # stopped at a break, folded by where they stopped.
    sites = {
        (r.reason.splitlines()[0].strip(), r.user_stack[-1].filename, r.user_stack[-1].lineno)
        for r in out.break_reasons
    }
    assert one_layer.break_sites == len(sites) > 0
    # Every break is raised in the reference kernel; the first one dynamo meets is traced from
    # the engine's unplanned view (later ones are re-met inside resumed frames, whose stacks
    # start at the kernel).
    kernel = inspect.getsourcefile(kernels.reference)
    assert all(r.user_stack[-1].filename == kernel for r in out.break_reasons)
    attention = inspect.getsourcefile(UnplannedDecode)
    assert any(f.filename == attention for f in out.break_reasons[0].user_stack)


@pytest.mark.slow
def test_breaks_name_the_kernels_host_reads(one_layer):
    kernel = kernels.reference.paged_attention_batched_reference
    lower = source_line(kernel, "int(context_lens.min())")
    upper = source_line(kernel, "int(context_lens.max())")
    frames = {b["frame"]: b for b in one_layer.break_reasons}
    assert set(frames) == {lower, upper}
    assert "int(context_lens.min())" in frames[lower]["source"]
    assert all("Tensor.item()" in b["reason"] for b in one_layer.break_reasons)


@pytest.mark.slow
def test_value_guards_read_each_rows_num_tokens(one_layer):
    # 16 prompt tokens plus the step's token: every row's table holds 17 when the step runs.
    want = {f"L['view'].cache.tables[{r}].num_tokens == {PROMPT_LEN + 1}" for r in range(ROWS)}
    assert want <= set(one_layer.value_guard_text)
    assert one_layer.value_guards == len(one_layer.value_guard_text) >= ROWS


@pytest.mark.slow
def test_breaks_grow_with_depth_so_the_verdict_is_structural(one_layer):
    two = explain_forward(TINY_MHA, layers=2, rows=ROWS, prompt_len=PROMPT_LEN, path="unplanned")
    # Both host reads sit in the kernel that every layer calls: each layer adds breaks.
    assert two.graph_breaks > one_layer.graph_breaks
    per_layer = two.graph_breaks - one_layer.graph_breaks
    assert scaling([one_layer, two]) == (
        f"structural: +{per_layer} breaks per layer (inside the block)"
    )


@pytest.mark.slow
def test_the_planned_path_is_one_graph_through_the_command(tmp_path):
    model = write_model(tmp_path / "tiny-mha", TINY_MHA)
    args = ["explain", "--model", str(model), "--layers", "1,2", "--json", "--check"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    got = [(r["layers"], r["graphs"], r["graph_breaks"], r["value_guards"]) for r in doc["rows"]]
    assert got == [(1, 1, 0, 0), (2, 1, 0, 0)]
    assert all(r["break_reasons"] == [] for r in doc["rows"])
    assert [g["passed"] for g in doc["gates"]] == [True, True]


def test_scaling_reads_the_break_counts():
    def rows(*breaks):
        return [
            ExplainRow(2 * (i + 1), "unplanned", "reference", b + 1, b, b, True, 0, 0, 0, [], [])
            for i, b in enumerate(breaks)
        ]

    # Day 49's engine: 12 breaks at 2 layers, 14 at 4 -> one more per layer, inside the block.
    assert scaling(rows(12, 14)) == "structural: +1 breaks per layer (inside the block)"
    assert scaling(rows(5, 5)).startswith("fixed:")
    assert scaling(rows(0, 0)) == "none"
    assert scaling(rows(3)) == "unknown"
