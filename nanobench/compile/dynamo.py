"""What the compile worker asks of dynamo: the shapes it will see, its limit, its compiler.

What it is: `predict(spec, guard_kind)` (builds and fall-back from the spec's shape history,
`WorkerSpec.step_shapes`, alone, before running), `recompile_limit()` (dynamo's per-frame limit under either name),
`compiler_for(backend)` (the `torch.compile` a mode's step is wrapped with), `quiet_dynamo()`
and `short_reason(reason)` (a recompile reason on one line).
What it is not: the sweep that runs the workers (`compile.bench`), the worker itself
(`compile.session`) or the cost model the prediction comes from (`cost.compile`).
Invariant: a prediction reads the spec and dynamo's config only; nothing here compiles or
times a step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch._dynamo.config as dc

from nanobench.compile.reduce_overhead import compile_kwargs, prediction_mode
from nanobench.compile.spec import WorkerSpec
from nanobench.cost.compile import predicts_fall_back


def recompile_limit() -> int:
    return int(getattr(dc, "recompile_limit", getattr(dc, "cache_size_limit", 8)))


def predict(spec: WorkerSpec, guard_kind: str) -> dict:
    history = spec.step_shapes()
    return {
        "shapes": len(set(history)),
        "predicted_fall_back": predicts_fall_back(
            history, prediction_mode(spec.mode), recompile_limit(), guard_kind
        ),
    }


def compiler_for(backend: str, options: dict | None = None) -> Callable:
    """The engine's compiler: `options` is a --try side's (`knobs.compile_options`)."""

    def compile_with(fn, mode):
        return torch.compile(fn, **compile_kwargs(mode, backend), **(options or {}))

    return compile_with


def quiet_dynamo() -> None:
    """The recompile-limit warning is read from dynamo's records, not its log."""
    for name in ("torch._dynamo", "torch._inductor", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def short_reason(reason: str) -> str:
    """dynamo's reason on one line, its user stack dropped: the failed guard, its source line
    and the file:line dynamo names ("pos == 17 # k_cache[...] = k # step.py:20 in forward")."""
    head = reason.split("User stack trace:", 1)[0].strip()
    first = head.splitlines()[0] if head else ""
    first = first.split(": ", 1)[1] if first[:1].isdigit() and ": " in first else first
    return " ".join(first.split())
