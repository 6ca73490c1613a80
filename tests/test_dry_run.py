"""explain's `symbolic` remedy is tried before it is printed: dynamic=True in a fresh process.

The dry run's builds are checked against dynamo run here, in this process, on the same steps
(an independent count: `counters["frames"]` after each step); the words against what that
count says: which steps rebuilt, once or every step, and where a frame fell back.
"""

from __future__ import annotations

import importlib.util
import json

import torch
from torch._dynamo.utils import counters
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.dynamo import recompile_limit
from nanobench.explain.checked import dry_steps_for
from nanobench.harness.errors import MeasurementFailed
from nanobench.harness.runs import dry_run as dry
from nanobench.harness.step.remedies import DYNAMIC_ROW, quote_dynamic_row
from tests.test_corpus import CORPUS

runner = CliRunner()
ROWS, PROMPT, STEP = 2, 4, 3  # explain --step 3: steps 0..4 exist
DRY = dry_steps_for(STEP, recompile_limit())  # the dry run's steps: past the limit, 10


def steps_here(name: str, steps: int, dynamic: bool = True, factory: str = "factory"):
    """dynamo's own frames built at each step, and the step a frame fell back at (None if none),
    over the steps under torch.compile(dynamic=..., backend="eager"), in this process."""
    spec = importlib.util.spec_from_file_location(name, CORPUS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = getattr(module, factory)(rows=ROWS, prompt_len=PROMPT, steps=steps, device="cpu",
                                      dtype="float32")  # fmt: skip
    torch._dynamo.reset()
    counters.clear()
    forward = torch.compile(target.forward, dynamic=dynamic, backend="eager")
    built, fell_back_at = [], None
    with torch.no_grad():
        for i in range(steps):
            ok, failed = (
                counters["frames"]["ok"],
                counters["frames"]["total"] - counters["frames"]["ok"],
            )
            args, kwargs = target.step_inputs(i)
            forward(*args, **kwargs)
            built.append(int(counters["frames"]["ok"] - ok))
            if (
                fell_back_at is None
                and counters["frames"]["total"] - counters["frames"]["ok"] > failed
            ):
                fell_back_at = i  # a frame dynamo tried and did not build: past the limit
    torch._dynamo.reset()
    return built, fell_back_at


def builds_here(name: str, steps: int) -> int:
    """dynamo's own frame count for dynamic=True over the steps, in this process."""
    return sum(steps_here(name, steps)[0])


def explained(name: str, factory: str = "factory") -> dict:
    result = runner.invoke(app, [
        "explain", "--target", f"{CORPUS / name}.py:{factory}", "--step", str(STEP),
        "--rows", str(ROWS), "--prompt-len", str(PROMPT), "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"][0]


def symbolic_of(row: dict) -> str:
    (symbolic,) = [r for r in row["remedies"] if r.startswith("symbolic")]
    return symbolic


def test_a_symbolic_remedy_that_does_not_help_says_so_and_where():
    # an integer index specialises pos again under dynamic=True: one build a step until the
    # limit, counted by dynamo here, in this process, on the same steps the dry run took
    built, fell_back_at = steps_here("index_position", DRY)
    assert (
        built[1 : recompile_limit()] == [1] * (recompile_limit() - 1) and fell_back_at is not None
    )
    symbolic = symbolic_of(explained("index_position"))
    assert "does not help" in symbolic and f"built {sum(built)} (" in symbolic
    assert f"steps 1..{fell_back_at - 1}: `" in symbolic and "every step" in symbolic
    assert f"fell back at step {fell_back_at}:" in symbolic
    assert "again at " in symbolic and "index_position.py:22" in symbolic
    assert "compile with dynamic=True" not in symbolic


def test_a_symbolic_remedy_that_helps_quotes_the_dry_runs_one_build():
    builds = builds_here("int_position", DRY)
    assert builds == 1
    symbolic = symbolic_of(explained("int_position"))
    assert f"built {builds} (step 0), no fall-back; compile with dynamic=True" in symbolic
    assert f"a dry run of dynamic=True over {DRY} steps" in symbolic
    assert DYNAMIC_ROW not in symbolic


def test_a_guard_that_fails_once_where_the_slice_reaches_the_caches_end_is_said_once():
    """item_cache_slice's cache sized exactly to the run: dynamic=True rebuilds once, at the
    last step (the slice covers the whole cache), and nowhere else: it helps, and says where."""
    built, fell_back_at = steps_here("item_cache_slice", DRY)
    last = DRY - 1
    assert built[last] == 1 and sum(built[1:last]) == 0 and fell_back_at is None
    symbolic = symbolic_of(explained("item_cache_slice"))
    assert f"a dry run of dynamic=True over {DRY} steps" in symbolic
    assert f"built {sum(built)} (step 0: {built[0]} frames; step {last}: `" in symbolic
    assert "once, at the last step, where (16 + 16*___stack0) reached " in symbolic
    assert "no fall-back; compile with dynamic=True [" in symbolic
    assert "does not help" not in symbolic


def test_the_same_step_with_headroom_builds_once_and_says_so():
    built, _ = steps_here("item_cache_slice", DRY, factory="headroom")
    assert sum(built[1:]) == 0
    symbolic = symbolic_of(explained("item_cache_slice", "headroom"))
    assert (
        f"built {sum(built)} (step 0: {built[0]} frames), no fall-back; compile with " in symbolic
    )


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


def compiled(name: str, modes: str, steps: int) -> dict:
    """`compile --json` of a corpus step as a user runs it: dynamo alone, one quick round."""
    result = runner.invoke(app, [
        "compile", "--target", f"{CORPUS / name}.py:factory", "--modes", modes, "--backend",
        "eager", "--steps", str(steps), "--rows", str(ROWS), "--prompt-len", str(PROMPT),
        "--threads", "1", "--processes", "1", "--rounds", "1", "--max-rounds", "1", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_compile_predicts_a_fall_back_by_a_dry_run_and_says_so():
    """index_position: dynamic=True specialises pos again at the indexed write, so dynamic
    falls back; the rule over the inputs (an int read from a tensor is symbolic under
    dynamic=True) said it would not. dynamo here counts the builds: the limit's 8, not 10."""
    steps = 10
    assert builds_here("index_position", steps) == 8 < steps
    rows = {r["mode"]: r for r in compiled("index_position", "off,dynamic", steps)["rows"]}
    dynamic = rows["dynamic"]
    assert dynamic["fell_back"] and dynamic["predicted_fall_back"]
    assert dynamic["predicted_by"] == (
        f"dry run: dynamo alone (eager backend) over the {steps} steps built 8"
    )
    assert rows["off"]["predicted_by"] is None


def test_every_step_built_says_where_more_steps_fall_back_and_what_helps():
    """item_cache_slice over 8 steps: static rebuilds at every step (a new int each step), so no
    step is steady, and more --steps would cross the recompile limit: the gate says at which
    step, from a dry run over more steps, and that dynamic=True helps, never "more --steps".
    dynamic=True rebuilds once, at the last step: its row says once, never "every step". Each
    figure is counted by dynamo here, in this process, on the same steps."""
    steps, limit = 8, recompile_limit()
    longer, fell_back_at = steps_here("item_cache_slice", limit + 2, dynamic=False)
    assert all(longer[:limit]) and fell_back_at is not None
    once, _ = steps_here("item_cache_slice", steps)
    assert [i for i, b in enumerate(once) if i and b] == [steps - 1]
    doc = compiled("item_cache_slice", "off,static,dynamic", steps)
    rows = {r["mode"]: r for r in doc["rows"]}
    (gate,) = [g["detail"] for g in doc["gates"] if g["name"] == "check_compile_amortised[static]"]
    assert rows["static"]["builds_per_step"] == longer[:steps]
    assert (
        f"more --steps would fall back past recompile_limit {limit} at step {fell_back_at}" in gate
    )
    assert "dynamic=True helps" in gate and "(more --steps)" not in gate
    (boundary,) = rows["dynamic"]["remedies"]
    assert (
        boundary.startswith(f"boundary: step {steps - 1}: `")
        and "once, at the last step" in boundary
    )
    assert "every step" not in boundary and "cannot help" not in boundary
    symbolic = symbolic_of(rows["static"])
    assert f"changes every step (steps 1..{steps - 1}: `" in symbolic
    assert (f"this sweep's dynamic row built {sum(once)} (step 0: {once[0]} frames; step "
            f"{steps - 1}: `") in symbolic  # fmt: skip
    assert "compile with dynamic=True" in symbolic and "does not help" not in symbolic
