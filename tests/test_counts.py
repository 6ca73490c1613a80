"""One meaning per count: graphs, breaks, break sites (with their hits), builds and recompiles
say the same thing in `explain` and `compile`, and each agrees with what `torch._dynamo` reports.

The step has a `.item()` in each layer: one source line that every layer's call passes, so by
construction one call hits that site once per layer (the number no dynamo counter gives).
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.step.dynamo_call import hits, trace_call
from nanobench.harness.step.targets import make_target

runner = CliRunner()
STEPS = 4
STEP = """
import torch

LAYERS = {layers}


class Step:
    def __init__(self, rows, prompt_len):
        self.rows, self.prompt_len = rows, prompt_len
        g = torch.Generator().manual_seed(0)
        self.w = [torch.randn(32, 32, generator=g) for _ in range(LAYERS)]  # (D, D)

    def layer(self, x, w):
        h = (x @ w).softmax(-1)  # (B, W, D)
        scale = h.abs().max().item()  # the host read: a break in every layer
        return h / (1.0 + scale)

    def forward(self, x):
        for w in self.w:
            x = self.layer(x, w)
        return x

    def step_inputs(self, step):
        x = torch.randn(self.rows, self.prompt_len + step + 1, 32)  # (B, W, D)
        return (x,), {{}}


def factory(*, rows, prompt_len, steps, device, dtype):
    return Step(rows, prompt_len)
"""
ITEM_LINE = 15  # the `.item()` line in STEP, counted from the file's first line


def write_step(folder, layers: int) -> str:
    path = folder / f"items_{layers}.py"
    path.write_text(STEP.format(layers=layers))
    assert "item()" in path.read_text().splitlines()[ITEM_LINE - 1]
    return f"{path}:factory"


def made(spec: str):
    return make_target(spec, model="tiny", rows=2, prompt_len=8, steps=STEPS, device="cpu",
                       dtype="float32")  # fmt: skip


def dynamo_explain(spec: str, step: int = 0):
    target = made(spec)
    args, kwargs = target.step_inputs(step)
    with torch.no_grad():
        return torch._dynamo.explain(target.forward)(*args, **kwargs)


@pytest.mark.parametrize("layers", [2, 3])
def test_a_traced_call_counts_as_dynamo_explains_and_hits_the_site_once_per_layer(tmp_path, layers):
    spec = write_step(tmp_path, layers)
    peer = dynamo_explain(spec)
    target = made(spec)
    args, kwargs = target.step_inputs(0)
    with torch.no_grad():
        mine = trace_call(target.forward, *args, **kwargs)
    assert mine.graph_count == peer.graph_count > 1
    assert mine.graph_break_count == peer.graph_break_count
    assert mine.op_count == peer.op_count
    assert len(mine.break_reasons) == len(peer.break_reasons)
    assert len(mine.out_guards) == len(peer.out_guards)
    ((site, n),) = hits(mine).items()
    assert site[1].endswith(f"items_{layers}.py:{ITEM_LINE}") and n == layers


def cells(output: str, first: str) -> list[str]:
    for line in output.splitlines():
        found = [c.strip() for c in line.split("│")[1:-1]]
        if found and found[0] == first:
            return found
    raise AssertionError(f"no row {first!r} in:\n{output}")


def test_explain_reports_graphs_breaks_and_each_sites_hits_under_their_names(tmp_path):
    spec = write_step(tmp_path, 2)
    peer = dynamo_explain(spec)
    doc = runner.invoke(app, ["explain", "--target", spec, "--step", "0", "--json",
                              "--out", str(tmp_path / "j")])  # fmt: skip
    assert doc.exit_code in (0, 1), doc.output
    (row,) = json.loads(doc.stdout)["rows"]
    assert (row["graphs"], row["graph_breaks"]) == (peer.graph_count, peer.graph_break_count)
    assert row["break_sites"] == 1 and [b["hits"] for b in row["break_reasons"]] == [2]
    table = runner.invoke(app, ["explain", "--target", spec, "--step", "0",
                                "--out", str(tmp_path / "t")])  # fmt: skip
    out = table.output
    for header in ("graphs", "breaks", "break sites"):
        assert f" {header} " in out, out
    assert cells(out, "-")[2:5] == [str(peer.graph_count), str(peer.graph_break_count), "1"]
    # The sites' table, wider than 160 columns with a tmp path, prints a block per site.
    assert re.search(rf"hits: 2\s+reason .*\s+frame\s+\S+items_2.py:{ITEM_LINE}\s", out), out


def dynamo_static_run(spec: str) -> tuple[int, int]:
    """Builds and recompiles of STEPS steps under torch.compile(dynamic=False), as dynamo counts."""
    target = made(spec)
    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    compiled = torch.compile(target.forward, dynamic=False, backend="eager")
    with torch.no_grad():
        for k in range(STEPS):
            args, kwargs = target.step_inputs(k)
            compiled(*args, **kwargs)
    recompiles = sum(1 for m in get_compilation_metrics() if m.recompile_reason)
    found = counters["frames"]["ok"], recompiles
    torch._dynamo.reset()
    return found


@pytest.mark.slow
def test_compile_reports_the_same_counts_under_the_same_names(tmp_path):
    spec = write_step(tmp_path, 2)
    peer = dynamo_explain(spec)
    builds, recompiles = dynamo_static_run(spec)
    assert recompiles > 0  # W grows every step: a shape guard fails each time
    result = runner.invoke(app, [
        "compile", "--target", spec, "--modes", "off,static", "--steps", str(STEPS),
        "--rows", "2", "--prompt-len", "8", "--backend", "eager", "--threads", "1",
        "--processes", "1", "--rounds", "1", "--max-rounds", "1", "--no-history",
        "--out", str(tmp_path / "c"),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    row = pd.read_csv(tmp_path / "c" / "compile.csv").set_index("mode").loc["static"]
    assert (row["graphs_per_call"], row["breaks_per_call"], row["break_sites"]) == (
        peer.graph_count,
        peer.graph_break_count,
        1,
    )
    assert (row["builds"], row["recompiles"]) == (builds, recompiles)
    line = re.sub(r"\s+", " ", result.output)
    assert (
        f"static: one call: {peer.graph_count} graphs, {peer.graph_break_count} breaks, "
        f"1 break site (items_2.py:{ITEM_LINE}, 2 hits); the run: {builds} builds, "
        f"{recompiles} recompiles (limit "
    ) in line, result.output
