"""`nanobench explain --vs` / `--vs-path`: two forwards before and after, against dynamo itself.

The corpus pair: `item_in_step.py` (a `.item()` in the forward, a graph break and a value guard
on the read int) and `static_kv.py` (the same gpt-fast step without it). Every expected count
comes from `torch._dynamo.explain` called here on each step, and each break's source line from
the step's file; the value guard `item_in_step` gains is counted by hand (the read position is
PROMPT + STEP). The engine's unplanned path breaks once per host read; the planned one is one
graph (the design's invariant 1): `--vs-path unplanned` goes from dynamo's count to 0.
"""

from __future__ import annotations

import importlib.util
import json
import linecache
import shutil
from pathlib import Path

import pytest
import torch
import torch._dynamo
from typer.testing import CliRunner

from engine.attention import UnplannedDecode
from engine.config import EngineConfig
from engine.engine import Engine
from nanobench.cli import app
from tests.helpers import TINY_MHA, prompts, shown_rows, write_model

runner = CliRunner()
CORPUS = Path(__file__).parent / "corpus"
ROWS, PROMPT, STEP = 2, 4, 3
SIZES = ["--rows", str(ROWS), "--prompt-len", str(PROMPT), "--step", str(STEP)]
ITEM, STATIC = f"{CORPUS / 'item_in_step.py'}:factory", f"{CORPUS / 'static_kv.py'}:factory"
COLUMNS = ("graphs", "breaks", "break sites", "ops", "guards", "value guards")
DYNAMOS = ("graphs", "breaks", "ops", "guards")  # the columns `counts(out)` reads off dynamo


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def dynamo_explain(name: str):
    """torch._dynamo.explain of the corpus step at STEP, steps 0..STEP-1 run eagerly first."""
    loader = importlib.util.spec_from_file_location(f"vs_{name}", CORPUS / f"{name}.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    made = module.factory(rows=ROWS, prompt_len=PROMPT, steps=STEP + 2, device="cpu",
                          dtype="float32")  # fmt: skip
    with torch.no_grad():
        for k in range(STEP):
            args, kwargs = made.step_inputs(k)
            made.forward(*args, **kwargs)
        args, kwargs = made.step_inputs(STEP)
        return torch._dynamo.explain(made.forward)(*args, **kwargs)


def counts(out) -> list[int]:
    return [out.graph_count, out.graph_break_count, out.op_count, len(out.out_guards)]


def breaks_of(out) -> set[tuple[str, str]]:
    """(first line of the reason, the source line) of each break, read off dynamo's stacks."""
    found = set()
    for r in out.break_reasons:
        frame = r.user_stack[-1]
        found.add((r.reason.splitlines()[0].strip(),
                   linecache.getline(frame.filename, frame.lineno).strip()))  # fmt: skip
    return found


def invoke(args: list[str], tmp_path, json_mode: bool):
    result = runner.invoke(app, [*args, "--out", str(tmp_path), *(["--json"] if json_mode else [])])
    assert "Traceback" not in result.output, result.output
    return result


@pytest.fixture(scope="module")
def pair():
    torch._dynamo.reset()
    return dynamo_explain("item_in_step"), dynamo_explain("static_kv")


def test_the_item_break_is_gone_with_its_source_line(pair, tmp_path):
    before, after = pair
    assert after.graph_break_count < before.graph_break_count  # the pair is what it says
    args = ["explain", "--target", STATIC, "--vs", ITEM, *SIZES]
    result = invoke(args, tmp_path, json_mode=True)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    by_side = {r["side"]: r for r in doc["rows"]}
    assert sorted(by_side) == ["after", "before"]
    for side, out in (("before", before), ("after", after)):
        row = by_side[side]
        assert [row["graphs"], row["graph_breaks"], row["ops"], row["guards"]] == counts(out)
    change = {c["column"]: c for c in doc["changes"]}
    assert change["graphs"]["change"] == after.graph_count - before.graph_count < 0
    assert change["breaks"]["change"] == after.graph_break_count - before.graph_break_count
    assert change["graphs"]["verdict"] == change["breaks"]["verdict"] == "fewer"
    gone = {(b["reason"], b["source"]) for b in doc["breaks_gone"]}
    assert gone == breaks_of(before) - breaks_of(after)
    assert any(s.startswith("n = input_pos.max().item() + 1") for _, s in gone)
    assert doc["breaks_new"] == []
    assert [g["guard"] for g in doc["value_guards_gone"]] == [f"L['___stack0'] == {PROMPT + STEP}"]
    assert doc["value_guards_new"] == []
    # explain.csv holds both sides.
    assert doc["outputs"]["csv"] == str(tmp_path / "explain.csv")

    table = invoke(args, tmp_path, json_mode=False)
    assert table.exit_code == 0, table.output
    text = table.stdout
    assert f"before {ITEM} / after {STATIC}" in " ".join(text.split())
    shown = shown_rows(text, "side")
    for side, out in (("before", before), ("after", after)):
        assert [int(shown[side][c]) for c in DYNAMOS] == counts(out)
    graphs = after.graph_count - before.graph_count
    assert shown["change"]["graphs"] == f"{graphs:+d} fewer"
    assert "n = input_pos.max().item() + 1" in text and "breaks new: none" in text
    assert f"L['___stack0'] == {PROMPT + STEP}" in text
    assert f"wrote explain.csv: {tmp_path / 'explain.csv'}" in text


@pytest.fixture(scope="module")
def item_copy(tmp_path_factory) -> str:
    """item_in_step.py under another folder: the same breaks at another frame path."""
    where = tmp_path_factory.mktemp("copy")
    for name in ("item_in_step.py", "gptfast.py"):
        shutil.copy(CORPUS / name, where / name)
    return f"{where / 'item_in_step.py'}:factory"


@pytest.mark.parametrize("copy", [False, True], ids=["same-spec", "a-copy"])
def test_a_step_against_itself_changes_nothing(copy, item_copy, tmp_path):
    args = ["explain", "--target", item_copy if copy else ITEM, "--vs", ITEM, *SIZES]
    doc = json.loads(invoke(args, tmp_path, json_mode=True).stdout)
    assert len(doc["changes"]) == len(COLUMNS)
    assert {c["verdict"] for c in doc["changes"]} == {"same"}
    assert all(doc[k] == [] for k in ("breaks_gone", "breaks_new", "value_guards_gone",
                                      "value_guards_new"))  # fmt: skip
    text = invoke(args, tmp_path, json_mode=False).stdout
    assert set(shown_rows(text, "side")["change"].values()) == {"change", "+0 same"}
    for what in ("breaks gone", "breaks new", "value guards gone", "value guards new"):
        assert f"{what}: none" in text


@pytest.mark.parametrize(("after", "before", "code"), [(STATIC, ITEM, 0), (ITEM, STATIC, 1)])
def test_check_no_more_breaks_fails_when_the_after_side_has_more(after, before, code, tmp_path):
    args = ["explain", "--target", after, "--vs", before, *SIZES, "--check", "--no-more", "breaks"]
    result = invoke(args, tmp_path, json_mode=True)
    assert result.exit_code == code, result.output
    gates = {g["name"]: g for g in json.loads(result.stdout)["gates"]}
    assert gates[f"no_more[breaks step {STEP}]"]["passed"] is (code == 0)
    # No --check: the same run, exit 0.
    assert invoke(args[:-3], tmp_path, json_mode=True).exit_code == 0


def dynamo_unplanned(layers: int, rows: int, prompt_len: int):
    """torch._dynamo.explain over the engine's unplanned forward, built here."""
    config = EngineConfig(max_batch_size=rows, max_model_len=prompt_len + 8,
                          decode_path="unplanned")  # fmt: skip
    engine = Engine.build(TINY_MHA.with_layers(layers), None, config)
    tokens = engine.prefill(prompts(rows, [prompt_len] * rows, TINY_MHA.vocab_size))
    engine._grow(engine.active_rows)
    view = UnplannedDecode(engine.cache, engine.active_rows)
    with torch.no_grad():
        ids = torch.tensor(tokens.argmax(-1).tolist()).view(-1, 1)  # (B, 1)
        return torch._dynamo.explain(engine.unplanned_forward)(ids, view)


def test_the_engine_unplanned_before_planned_after_goes_to_no_breaks(tmp_path):
    model = write_model(tmp_path / "model", TINY_MHA)
    out = dynamo_unplanned(2, 4, 16)
    assert out.graph_break_count > 1
    args = ["explain", "--model", str(model), "--layers", "2", "--vs-path", "unplanned"]
    doc = json.loads(invoke(args, tmp_path, json_mode=True).stdout)
    by_side = {r["side"]: r for r in doc["rows"]}
    assert by_side["before"]["path"] == "unplanned" and by_side["after"]["path"] == "planned"
    assert [by_side["before"][k] for k in ("graphs", "graph_breaks", "ops", "guards")] == counts(
        out
    )
    assert (by_side["after"]["graphs"], by_side["after"]["graph_breaks"]) == (1, 0)
    change = {c["column"]: c for c in doc["changes"]}
    assert change["breaks"]["change"] == -out.graph_break_count
    assert {(b["reason"], b["source"]) for b in doc["breaks_gone"]} == breaks_of(out)
    text = invoke(args, tmp_path, json_mode=False).stdout
    shown = shown_rows(text, "side")
    assert (shown["before"]["breaks"], shown["after"]["breaks"]) == (
        str(out.graph_break_count),
        "0",
    )
    assert "before engine --path unplanned / after engine --path planned" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--vs", STATIC], "--vs"),
        (["--target", STATIC, "--vs-path", "unplanned"], "--vs-path"),
        (["--target", STATIC, "--vs", ITEM, "--vs-path", "unplanned"], "--vs and --vs-path"),
        (["--no-more", "breaks"], "--no-more and --no-slower compare two sides: give --vs"),
        (["--vs-path", "unplanned", "--no-more", "builds"], "--no-more builds"),
    ],
)
def test_bad_sides_are_one_line_and_exit_2(args, needle, tmp_path):
    out = tmp_path / "o"
    result = runner.invoke(app, ["explain", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not out.exists(), "nothing is written for bad input"
