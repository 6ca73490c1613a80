"""Corpus: a step whose own forward raises a shape error at step 0.

The idiom: a bias built for one width added to activations of another (a head count or a
hidden size mistyped in the user's own code). Eager raises `RuntimeError: The size of tensor a
(4) must match the size of tensor b (5)`; under torch.compile dynamo raises it while tracing
with fake tensors and wraps it (`TorchRuntimeError`). nanobench says the user's error, where
their code raised it, once.
"""

from __future__ import annotations

import torch


class ShapeError(torch.nn.Module):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(5))  # should be 4 wide, as x is

    def forward(self, x):  # x (B, 4)
        # the mistake: (B, 4) + (5,)
        return torch.relu(x + self.bias)


class Step:
    def __init__(self, rows: int) -> None:
        self.forward, self.rows = ShapeError(rows), rows

    def step_inputs(self, step: int):
        return (torch.ones(self.rows, 4),), {}


def factory(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> Step:
    return Step(rows)
