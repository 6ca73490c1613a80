"""The foreign corpus: decode steps written in real engines' idioms, diagnosed as `--target`s.

Each step in `tests/corpus/` (and transformers' own, `hf-static` / `hf-dynamic`) is run here
through `torch._dynamo` directly, with nothing of nanobench's: `torch._dynamo.explain` for
graphs, breaks, ops and guards, and `torch.compile` with dynamo's `CompileCounter` backend for
builds per mode, recompile reasons and fall-back. `nanobench explain` (its table and its JSON)
and `nanobench compile --backend eager` must report the same figures. What no dynamo call
answers (which guard kind a mode should predict, which value guard changes per step) is
counted by hand from the step's source, in `IDIOMS`.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics
from typer.testing import CliRunner

from nanobench.cli import app
from tests.helpers import shown_rows

runner = CliRunner()
CORPUS = Path(__file__).parent / "corpus"
# Tiny: two rows, a four-token prompt; ten steps walk one past dynamo's recompile limit of 8.
ROWS, PROMPT, STEPS, STEP = 2, 4, 10, 3
SIZES = ["--rows", str(ROWS), "--prompt-len", str(PROMPT)]


@dataclass(frozen=True)
class Idiom:
    """One corpus step and what its source says dynamo must do, counted by hand."""

    name: str
    # Value guards that change between step STEP and STEP + 1 (position PROMPT + STEP = 7).
    varying: tuple[str, ...] = ()
    # The guard kind each compiled mode's inputs predict: "none" when nothing changes.
    kinds: dict = field(default_factory=lambda: {"dynamic": "none", "static": "none"})
    modes: str = "dynamic,static"
    # Each compiled mode's remedy kinds, and the source text the first one points at.
    remedies: dict = field(default_factory=lambda: {"dynamic": [], "static": []})
    points_at: str = ""

    @property
    def spec(self) -> str:
        return self.name if self.name.startswith("hf-") else f"{CORPUS / self.name}.py:factory"


IDIOMS = [
    Idiom("static_kv"),
    # pos is an int argument: static guards on its value, dynamic makes it a SymInt.
    Idiom("int_position", ("L['pos'] == 7",), {"dynamic": "none", "static": "value"},
          "dynamic,static", {"dynamic": [], "static": ["symbolic", "fail-fast"]},
          "self.kv_cache.k_cache[:, :, pos : pos + 1] = k"),
    # Its sweep fails in the first window, checked on its own below (table and CSV).
    Idiom("stateful_inputs", modes="off,static"),
    # temperature and top_k are Python numbers, but the same every step.
    Idiom("sampling"),
    # .item() breaks the graph; its int reaches the resume function as a local, one per step.
    Idiom("item_in_step", ("L['___stack0'] == 7",), {"dynamic": "none", "static": "value"},
          remedies={"dynamic": ["plan-outside"],
                    "static": ["plan-outside", "symbolic", "fail-fast"]},
          points_at="n = input_pos.max().item() + 1"),
    Idiom("tensor_branch", remedies={"dynamic": ["plan-outside"], "static": ["plan-outside"]},
          points_at="if (input_pos < WINDOW).all():"),
    # Two lists, each one entry longer per step: a length is never symbolic. Each recompile
    # reason names the first guard that failed (keys'), so one remedy for both lists.
    Idiom("list_cache", ("len(L['keys']) == 7", "len(L['values']) == 7"),
          {"dynamic": "value", "static": "value"},
          remedies={"dynamic": ["plan-outside", "fail-fast"],
                    "static": ["plan-outside", "fail-fast"]},
          points_at="keys.append(k)"),
    # transformers loads in every worker: the static cache's claim, 1 build, needs static only.
    Idiom("hf-static", modes="static"),
    # The DynamicCache's keys and values grow by one token a step.
    Idiom("hf-dynamic", kinds={"dynamic": "none", "static": "shape"},
          remedies={"dynamic": [], "static": ["mark-dynamic", "bucket", "fail-fast"]}),
]  # fmt: skip


def factory_of(idiom: Idiom):
    """The step's own factory, loaded here by path (not through nanobench's loader)."""
    if idiom.name.startswith("hf-"):
        from engine.sources import materialize_preset
        from nanobench.harness.step import hf_targets

        made = getattr(hf_targets, idiom.name.replace("-", "_"))
        model = str(materialize_preset("tiny"))
        return lambda **protocol: made(model=model, **protocol)
    loader = importlib.util.spec_from_file_location(
        f"corpus_{idiom.name}", CORPUS / f"{idiom.name}.py"
    )
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module.factory


def build(idiom: Idiom, steps: int):
    return factory_of(idiom)(
        rows=ROWS, prompt_len=PROMPT, steps=steps, device="cpu", dtype="float32"
    )


def line_of(idiom: Idiom, text: str) -> int:
    """The line of the idiom's file whose statement starts with `text` (not its docstring)."""
    lines = (CORPUS / f"{idiom.name}.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text))


def dynamo_explain(idiom: Idiom):
    """torch._dynamo.explain of the step at STEP and STEP + 1, after steps 0..STEP-1 eagerly."""
    made = build(idiom, STEP + 2)
    outs = []
    with torch.no_grad():
        for k in range(STEP + 2):
            args, kwargs = made.step_inputs(k)
            if k < STEP:
                made.forward(*args, **kwargs)
            else:
                outs.append(torch._dynamo.explain(made.forward)(*args, **kwargs))
    return outs


def dynamo_compile(idiom: Idiom, mode: str) -> dict:
    """One mode's first pass under torch.compile, counted by dynamo's CompileCounter backend."""
    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    made = build(idiom, STEPS)
    backend = CompileCounter()
    compiled = torch.compile(made.forward, backend=backend, dynamic=mode == "dynamic")
    with torch.no_grad():
        for k in range(STEPS):
            args, kwargs = made.step_inputs(k)
            compiled(*args, **kwargs)
    metrics = get_compilation_metrics()
    return {
        "builds": backend.frame_count,
        "graph_breaks": sum(counters["graph_break"].values()),
        "fell_back": any("recompile limit" in (m.fail_reason or "") for m in metrics),
        # The failed guard of each recompile, as dynamo's reason opens ("0/3: pos == 19  # ...").
        "reasons": [
            m.recompile_reason.split("#")[0].split(": ", 1)[1].strip()
            for m in metrics
            if m.recompile_reason
        ],
    }


def table_cells(output: str, first: str) -> list[str]:
    """The cells of the table row whose second cell is `first`."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) > 1 and cells[1] == first:
            return cells
    raise AssertionError(f"no table row {first!r} in:\n{output}")


@pytest.mark.slow
@pytest.mark.parametrize("idiom", IDIOMS, ids=lambda i: i.name)
def test_explain_reports_what_dynamo_explains(idiom):
    at, following = dynamo_explain(idiom)
    args = ["explain", "--target", idiom.spec, "--step", str(STEP), *SIZES]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert (row["graphs"], row["graph_breaks"], row["ops"], row["guards"]) == (
        at.graph_count, at.graph_break_count, at.op_count, len(at.out_guards)
    )  # fmt: skip
    lines = sorted(r.user_stack[-1].lineno for r in at.break_reasons)
    assert sorted(int(b["frame"].rsplit(":", 1)[1]) for b in row["break_reasons"]) == lines
    assert row["value_guard_text"] == list(idiom.varying)
    # The default table: exit as with --json, no traceback, the same figures as the JSON.
    table = runner.invoke(app, args)
    assert table.exit_code == result.exit_code and "Traceback" not in table.output, table.output
    cells = table_cells(table.output, f"target step {STEP}")
    assert [int(c) for c in cells[2:8]] == [
        row["graphs"], row["graph_breaks"], row["break_sites"], row["ops"], row["guards"],
        row["value_guards"],
    ]  # fmt: skip


@pytest.fixture(scope="module")
def compiled_rows(tmp_path_factory):
    """Each idiom's sweep, run once: --json rows by mode."""
    done = {}

    def sweep(idiom: Idiom) -> tuple[int, dict]:
        if idiom.name not in done:
            out = tmp_path_factory.mktemp(idiom.name)
            result = runner.invoke(app, [
                "compile", "--target", idiom.spec, "--modes", idiom.modes, "--steps", str(STEPS),
                *SIZES, "--backend", "eager", "--threads", "1", "--rounds", "1",
                "--max-rounds", "1", "--budget-s", "5", "--out", str(out), "--json",
            ])  # fmt: skip
            assert result.exit_code in (0, 1), result.output
            doc = json.loads(result.stdout)
            done[idiom.name] = result.exit_code, {r["mode"]: r for r in doc["rows"]}
        return done[idiom.name]

    return sweep


@pytest.mark.slow
@pytest.mark.parametrize("idiom", [i for i in IDIOMS if "off" not in i.modes],
                         ids=lambda i: i.name)  # fmt: skip
def test_compile_reports_what_dynamo_did(idiom, compiled_rows):
    _, rows = compiled_rows(idiom)
    for mode in idiom.modes.split(","):
        want, row = dynamo_compile(idiom, mode), rows[mode]
        got = {k: row[k] for k in ("builds", "graph_breaks", "fell_back")}
        assert got == {k: want[k] for k in got}, mode
        assert [r.split(" # ")[0] for r in row["recompile_reasons"]] == want["reasons"], mode
        # What the inputs predicted, against what dynamo did and the hand count.
        assert row["predicted_fall_back"] == want["fell_back"], mode
        assert row["predicted_guard_kind"] == idiom.kinds[mode], mode
        assert row["status"] == "ok", row["status"]
        kinds = [r.split(":", 1)[0] for r in row["remedies"]]
        assert kinds == idiom.remedies[mode], (mode, row["remedies"])
        if kinds and idiom.points_at:
            # The file:line dynamo's reason (or the break's frame) carries, and its source.
            where = f"{idiom.name}.py:{line_of(idiom, idiom.points_at)}: {idiom.points_at}"
            assert where in row["remedies"][0], (mode, row["remedies"])


@pytest.mark.slow
def test_a_changing_int_argument_is_symbolic_as_the_dynamic_row_measured(compiled_rows):
    """int_position: static's remedy says dynamic=True helps, quoting dynamic's builds (all at
    step 0: nothing rebuilt); the dynamic row itself has nothing to fix."""
    idiom = next(i for i in IDIOMS if i.name == "int_position")
    _, rows = compiled_rows(idiom)
    dynamic = dynamo_compile(idiom, "dynamic")
    symbolic = rows["static"]["remedies"][0]
    assert f"this sweep's dynamic row built {dynamic['builds']} (step 0), no fall-back" in symbolic
    assert "cannot help" not in symbolic and rows["dynamic"]["remedies"] == []


@pytest.mark.slow
def test_a_list_length_is_specialised_in_every_mode(compiled_rows):
    idiom = next(i for i in IDIOMS if i.name == "list_cache")
    _, rows = compiled_rows(idiom)
    for mode in ("dynamic", "static"):
        assert "dynamic=True cannot help" in rows[mode]["remedies"][0]
        assert "len(keys) == " in rows[mode]["remedies"][0]


CONTRACT = "timed window 1, step 0 broke the step_inputs contract"
DERIVED = ("speedup", "saving_per_step_ms", "breakeven_steps", "worth_compiling")


@pytest.mark.slow
def test_state_advanced_in_step_inputs_fails_the_first_window_and_derives_nothing(tmp_path):
    """gpt-fast's `input_pos += 1`: the first pass runs (as dynamo's, one build), then the first
    window's step 0 writes past the cache. The table and the CSV (the JSON's rows) say so, name
    the target in the title, and show no speedup, breakeven or verdict."""
    import csv

    idiom = next(i for i in IDIOMS if i.name == "stateful_inputs")
    result = runner.invoke(
        app,
        ["compile", "--target", idiom.spec, "--modes", idiom.modes, "--steps", str(STEPS),
         *SIZES, "--backend", "eager", "--threads", "1", "--rounds", "1", "--max-rounds", "1",
         "--budget-s", "5", "--out", str(tmp_path)],
        env={"COLUMNS": "400"},
    )  # fmt: skip
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    # The title names the target; the unused --model (tiny) is nowhere.
    assert f"compiled decode of target {idiom.spec}: cpu float32" in result.output
    assert "tiny" not in result.output
    for mode in ("off", "static"):
        assert f"FAIL measured[{mode}]: error: --target {idiom.spec!r}: {CONTRACT}" in result.output
    # The failed rows' long status makes the table print a block per row at 160 columns.
    rows = shown_rows(result.output, "mode")
    shown = {
        m: [rows[m][c] for c in ("speedup [95%]", "breakeven [95%]", "worth it at 10,000 steps")]
        for m in rows
    }
    assert shown == {"off": ["-"] * 3, "static": ["-"] * 3}, result.output
    with open(tmp_path / "compile.csv") as f:
        rows = {r["mode"]: r for r in csv.DictReader(f)}
    want = dynamo_compile(idiom, "static")
    assert (int(rows["static"]["builds"]), rows["static"]["fell_back"]) == (
        want["builds"], str(want["fell_back"])
    )  # fmt: skip
    assert rows["off"]["builds"] == "0"
    for mode, row in rows.items():
        assert "must depend on step alone" in row["status"], mode
        assert [row[k] for k in DERIVED] == [""] * len(DERIVED), mode
