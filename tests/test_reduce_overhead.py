"""reduce-overhead on a CUDA device: torch's CUDA graph trees, counted by torch itself.

Two steps written here, both of fixed shape so nothing re-records: one whose graph runs on the
device only (recorded: no skip), one that takes a CPU tensor (Inductor refuses to record a
graph with a CPU input and counts a skip for each compiled graph that has one: here one).
Without CUDA the whole file skips (and `compile` refuses the mode: tests/test_targets.py).
"""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
runner = CliRunner()


class FixedStep:
    def __init__(self, rows: int, device: str, cpu_input: bool) -> None:
        g = torch.Generator().manual_seed(0)
        self.weight = torch.randn(64, 64, generator=g).to(device)  # (D, D)
        self.x = torch.randn(rows, 64, generator=g).to(device)  # (B, D)
        self.bias = torch.randn(64, generator=g)  # (D,), on the CPU when cpu_input
        self.cpu_input = cpu_input
        self.device = device

    def forward(self, x, bias):
        return (x @ self.weight).relu() + bias.to(x.device)  # (B, D)

    def step_inputs(self, step: int):
        bias = self.bias if self.cpu_input else self.bias.to(self.device)
        return (self.x, bias), {}


def on_device(*, rows, prompt_len, steps, device, dtype):
    return FixedStep(rows, device, cpu_input=False)


def with_cpu_input(*, rows, prompt_len, steps, device, dtype):
    return FixedStep(rows, device, cpu_input=True)


@pytest.mark.parametrize("factory,skips", [("on_device", 0), ("with_cpu_input", 1)])
def test_reduce_overhead_counts_skips_and_rerecords(factory, skips, tmp_path):
    result = runner.invoke(
        app,
        [
            "compile",
            "--target",
            f"{__file__}:{factory}",
            "--modes",
            "reduce-overhead",
            "--device",
            "cuda",
            "--steps",
            "6",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert row["status"] == "ok", row["status"]
    assert row["builds"] == 1 and not row["fell_back"]
    assert row["cudagraph_skips"] == skips
    # One shape, inputs at the same addresses: the recorded graph is replayed, never re-recorded.
    assert row["cudagraph_rerecords"] == 0
