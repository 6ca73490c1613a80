"""A decode step written here, diagnosed as a user's `--target`: explain and the compile sweep.

The toy has both traps of the seed logs: its forward reads a tensor into a Python int (a graph
break) and its input grows by one token each step (a shape guard per step in static mode).
The spec is this file itself, so every source line nanobench names is a line of this file.
Compile tests use dynamo's `eager` backend: the point is dynamo's guards, counters and
recompile limit, which are the same under Inductor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner()
SPEC = f"{__file__}:toy"


class ToyDecode:
    """One decode step with a host read inside and an input one token wider every step."""

    def __init__(self, rows: int, prompt_len: int, device: str) -> None:
        self.rows, self.prompt_len, self.device = rows, prompt_len, device
        self.weight = torch.linspace(-1.0, 1.0, 8, device=device)  # (8,)

    def forward(self, x):  # x (B, W): W = prompt_len + step + 1
        scale = int(x[0, 0])  # the host read: dynamo breaks the graph here
        return (x.sum(-1, keepdim=True) * self.weight).sum(-1) * scale  # (B,)

    def step_inputs(self, step: int):
        return (torch.ones(self.rows, self.prompt_len + step + 1, device=self.device),), {}


def toy(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> ToyDecode:
    return ToyDecode(rows, prompt_len, device)


def line_of(text: str) -> int:
    """The line of this file holding `text`: the expected frame, read from the source itself."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "lines" not in line)


def test_explain_names_the_break_with_this_files_line():
    result = runner.invoke(app, ["explain", "--target", SPEC, "--step", "3", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert (row["graphs"], row["graph_breaks"]) == (2, 1)
    (brk,) = row["break_reasons"]
    where = f"{__file__}:{line_of('scale = int(x[0, 0])')}"
    assert brk["frame"] == where
    assert brk["source"].startswith("scale = int(x[0, 0])")
    # int(x[0, 0]) is always 1 here: the guard on it is a constant, not a per-step value.
    assert row["value_guards"] == 0
    assert any(r.startswith("plan-outside") and where in r for r in row["remedies"])
    gates = json.loads(result.stdout)["gates"]
    # A pass/fail gate (no interval): its verdict is fail and it carries no estimate.
    assert [(g["name"], g["passed"], g["verdict"], g["estimate"]) for g in gates] == [
        ("check_single_graph[target step 3]", False, "fail", None)
    ]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy")
    result = runner.invoke(
        app,
        [
            "compile",
            "--target",
            SPEC,
            "--modes",
            "off,dynamic,static",
            "--steps",
            "12",
            "--backend",
            "eager",
            "--threads",
            "1",
            "--trace",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    return {r["mode"]: r for r in doc["rows"]}, out


def test_static_falls_back_as_predicted_on_a_shape_guard(sweep):
    rows, _ = sweep
    off, dynamic, static = rows["off"], rows["dynamic"], rows["static"]
    assert all(r["status"] == "ok" and r["target"] == SPEC for r in rows.values())
    # Widths 17..28: twelve shapes, one per step, over dynamo's limit of 8.
    assert static["shapes"] == 12 and static["recompile_limit"] == 8
    assert static["fell_back"] and static["predicted_fall_back"]
    assert static["guard_kind"] == "shape" and static["predicted_guard_kind"] == "shape"
    assert static["recompile_reasons"]
    assert all("size mismatch at index 1" in r for r in static["recompile_reasons"])
    # Each build before the limit compiles two frames: the forward up to the break and the
    # resume function after it; both take x, so both hit the limit.
    assert static["builds"] == 2 * 8
    assert dynamic["builds"] == 2 and not dynamic["fell_back"]
    assert not dynamic["predicted_fall_back"]
    assert off["builds"] == 0 and off["step_ms"] > 0
    assert static["growing"] == ["args[0] dim 1: 17..28"]


def test_the_fall_back_ends_with_its_remedies(sweep):
    rows, _ = sweep
    remedies = rows["static"]["remedies"]
    kinds = [r.split(":", 1)[0] for r in remedies]
    assert kinds == ["plan-outside", "mark-dynamic", "bucket", "fail-fast"]
    step_inputs_line = f"{__file__}:{line_of('def step_inputs')}"
    assert "torch._dynamo.mark_dynamic(args[0], 1)" in remedies[1]
    assert step_inputs_line in remedies[1]
    # 17..28 rounded up to 2: 18, 20, ..., 28 (6 shapes <= 8); to 1: 12 shapes > 8.
    assert "multiple of 2" in remedies[2] and "become 6" in remedies[2]
    assert 'set_stance("fail_on_recompile")' in remedies[3]
    # dynamic did not fall back: only the host read is left to fix.
    assert [r.split(":", 1)[0] for r in rows["dynamic"]["remedies"]] == ["plan-outside"]


def test_trace_writes_raw_traces_and_a_tlparse_index_per_compiled_mode(sweep):
    from nanobench.compile.traces import tlparse_path

    rows, out = sweep
    for mode in ("dynamic", "static"):
        assert list((out / "trace" / mode).glob("*.log")), mode
    if tlparse_path() is None:
        pytest.skip("tlparse is not installed (pip install nanobench[trace])")
    for mode in ("dynamic", "static"):
        index = Path(rows[mode]["trace_index"])
        assert index == out / "trace" / mode / "tlparse" / "index.html"
        assert index.stat().st_size > 1000


def test_the_mark_dynamic_remedy_quotes_its_dry_run_as_dynamo_counts_it(sweep):
    """The remedy is tried before it is printed: its builds are dynamo's, counted here with the
    width marked dynamic over the same 12 steps (4 rows, prompt 16: compile's defaults)."""
    from torch._dynamo.utils import counters

    target = toy(rows=4, prompt_len=16, steps=12, device="cpu", dtype="float32")
    torch._dynamo.reset()
    counters.clear()
    forward = torch.compile(target.forward, backend="eager")
    for step in range(12):
        (x,), _ = target.step_inputs(step)
        torch._dynamo.mark_dynamic(x, 1)
        forward(x)
    builds = int(counters["frames"]["ok"])
    torch._dynamo.reset()
    rows, _ = sweep
    (marked,) = [r for r in rows["static"]["remedies"] if r.startswith("mark-dynamic")]
    assert f"a dry run with it (dynamo alone, eager backend) over the 12 steps built {builds}, " \
        "no fall-back" in marked  # fmt: skip
    assert rows["static"]["predicted_by"].startswith("dry run: dynamo alone")


def test_the_fail_fast_remedy_quotes_the_step_its_stance_raised_at(sweep):
    """Checked here: after step 1, under fail_on_recompile, the first step that raises."""
    target = toy(rows=4, prompt_len=16, steps=12, device="cpu", dtype="float32")
    torch._dynamo.reset()
    forward = torch.compile(target.forward, backend="eager", dynamic=False)
    raised = None
    for step in range(12):
        (x,), _ = target.step_inputs(step)
        try:
            with torch.compiler.set_stance("fail_on_recompile" if step >= 1 else "default"):
                forward(x)
        except Exception:  # dynamo's own error for a recompile under this stance
            raised = step + 1
            break
    torch._dynamo.reset()
    rows, _ = sweep
    (fail_fast,) = [r for r in rows["static"]["remedies"] if r.startswith("fail-fast")]
    assert raised is not None
    assert f"a dry run with it after step 1 (dynamo alone, eager backend) raised at step {raised}" \
        in fail_fast  # fmt: skip


def test_a_remedy_prints_in_lines_an_80_column_terminal_holds_whole(tmp_path):
    args = ["explain", "--target", SPEC, "--step", "3", "--out", str(tmp_path)]
    table = runner.invoke(app, args)
    (remedy,) = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["rows"][0]["remedies"]
    lines = table.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("remedy "))
    block = [lines[at]] + [ln for ln in lines[at + 1 :] if ln.startswith("    ")][: len(lines)]
    assert all(len(line) <= 80 for line in block), block
    assert len(block) > 1  # the remedy is longer than a line: it went on, indented
    # the words are the file's, whole: only the line breaks differ
    assert " ".join(" ".join(block).split()) == " ".join(f"remedy {remedy}".split())
