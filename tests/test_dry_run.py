"""explain's `symbolic` remedy is tried before it is printed: dynamic=True in a fresh process.

The dry run's builds are checked against dynamo run here, in this process, on the same steps
(an independent count); the words against what that count says.
"""

from __future__ import annotations

import importlib.util
import json

import torch
from torch._dynamo.utils import counters
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.errors import MeasurementFailed
from nanobench.harness.runs import dry_run as dry
from nanobench.harness.step.remedies import DYNAMIC_ROW, quote_dynamic_row
from tests.test_corpus import CORPUS

runner = CliRunner()
ROWS, PROMPT, STEP = 2, 4, 3  # explain --step 3: steps 0..4 exist, the dry run takes all five


def builds_here(name: str, steps: int) -> int:
    """dynamo's own frame count for dynamic=True over the steps, in this process."""
    spec = importlib.util.spec_from_file_location(name, CORPUS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = module.factory(rows=ROWS, prompt_len=PROMPT, steps=steps, device="cpu",
                            dtype="float32")  # fmt: skip
    torch._dynamo.reset()
    counters.clear()
    forward = torch.compile(target.forward, dynamic=True, backend="eager")
    with torch.no_grad():
        for i in range(steps):
            args, kwargs = target.step_inputs(i)
            forward(*args, **kwargs)
    return int(counters["frames"]["ok"])


def explained(name: str) -> dict:
    result = runner.invoke(app, [
        "explain", "--target", f"{CORPUS / name}.py:factory", "--step", str(STEP),
        "--rows", str(ROWS), "--prompt-len", str(PROMPT), "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"][0]


def test_a_symbolic_remedy_that_does_not_help_says_so_and_where():
    # an integer index specialises pos again under dynamic=True: one build a step, counted by
    # dynamo here, in this process, on the same steps the dry run took in its own
    builds = builds_here("index_position", STEP + 2)
    assert builds == STEP + 2
    (symbolic,) = [r for r in explained("index_position")["remedies"] if r.startswith("symbolic")]
    assert "does not help" in symbolic and f"built {builds}:" in symbolic
    assert "again at " in symbolic and "index_position.py:22" in symbolic
    assert "compile with dynamic=True" not in symbolic


def test_a_symbolic_remedy_that_helps_quotes_the_dry_runs_one_build():
    builds = builds_here("int_position", STEP + 2)
    assert builds == 1
    (symbolic,) = [r for r in explained("int_position")["remedies"] if r.startswith("symbolic")]
    assert f"built {builds}, no fall-back; compile with dynamic=True" in symbolic
    assert f"a dry run of dynamic=True over {STEP + 2} steps" in symbolic
    assert DYNAMIC_ROW not in symbolic


def test_a_failed_dry_run_leaves_the_row_and_says_the_remedy_is_unchecked(monkeypatch):
    def failed(job, timeout=dry.TIMEOUT_S):
        raise MeasurementFailed("the dry run of dynamic=True: error: out of memory")

    monkeypatch.setattr(dry, "dry_run", failed)
    row = explained("int_position")
    (symbolic,) = [r for r in row["remedies"] if r.startswith("symbolic")]
    assert quote_dynamic_row(DYNAMIC_ROW, None, None) in symbolic  # the unchecked words
    assert "dry run" not in symbolic and "built" not in symbolic
    assert row["value_guards"] >= 1 and row["graphs"] == 1  # the explained row stands


def test_a_guard_carried_across_a_break_is_listed_by_the_line_that_produced_it():
    source = (CORPUS / "item_in_step.py").read_text().splitlines()
    line = next(i for i, t in enumerate(source, 1) if t.strip().startswith("n = input_pos.max()"))
    result = runner.invoke(app, [
        "explain", "--target", f"{CORPUS / 'item_in_step'}.py:factory", "--step", str(STEP),
        "--rows", str(ROWS), "--prompt-len", str(PROMPT),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output  # a failed gate exits 1 only under --check
    text = " ".join(result.output.split())
    listed = text.split("guards on Python values")[1].split("remedy")[0]
    assert f"L['___stack0'] == {PROMPT + STEP} (`n = input_pos.max().item() + 1` at " in listed
    assert f"item_in_step.py:{line}, carried across the break)" in listed


def test_compile_predicts_a_fall_back_by_a_dry_run_and_says_so():
    """index_position: dynamic=True specialises pos again at the indexed write, so dynamic
    falls back; the rule over the inputs (an int read from a tensor is symbolic under
    dynamic=True) said it would not. dynamo here counts the builds: the limit's 8, not 10."""
    steps = 10
    assert builds_here("index_position", steps) == 8 < steps
    result = runner.invoke(app, [
        "compile", "--target", f"{CORPUS / 'index_position'}.py:factory", "--modes",
        "off,dynamic", "--backend", "eager", "--steps", str(steps), "--rows", str(ROWS),
        "--prompt-len", str(PROMPT), "--threads", "1", "--processes", "1", "--rounds", "1",
        "--max-rounds", "1", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["mode"]: r for r in json.loads(result.stdout)["rows"]}
    dynamic = rows["dynamic"]
    assert dynamic["fell_back"] and dynamic["predicted_fall_back"]
    assert dynamic["predicted_by"] == (
        f"dry run: dynamo alone (eager backend) over the {steps} steps built 8"
    )
    assert rows["off"]["predicted_by"] is None
