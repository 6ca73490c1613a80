"""Each side of a `compile` run resolved: its model and dtype checked, its worker spec built.

What it is: `resolve(spec)` (a side's dtype and model directory, "" for a target's own,
checked to fit the machine with every worker of the run holding its copy; `startup` resolves
the same way) and `worker_specs(sides, trace)` (the run's dtype and each side's `WorkerSpec`).
What it is not: the options' own checks (`spec.CompileSpec.validate`), the sides themselves
(`harness.runs.sides.Sides`) or the measuring.
Invariant: the before side's bad input names the option the user typed for it (--vs,
--vs-path), never the after side's (`Sides.resolved`).
"""

from __future__ import annotations

from functools import partial

from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.harness.cli.validate import dtype_option, fits_option, model_option
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.sides import Sides
from nanobench.harness.step.knobs import checked_side
from nanobench.harness.step.targets import BUILTINS, target_option


def resolve(spec: CompileSpec, members: int) -> tuple[str, str]:
    """The run's dtype and model directory ("" for a target's own): resolved, checked to fit
    with the run's `members` (every side's modes) each holding a copy in every process; a
    side's knob held against the installed torch."""
    if spec.knob:
        checked_side(spec.knob)
    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    directory = ""
    if spec.target:
        target_option(spec.target)
    if not spec.target or spec.target in BUILTINS:
        directory, config = model_option(spec.model)
        # Every worker of every mode (of each side) holds its model; one at a time also loads a
        # probe to set up.
        fits_option(config, dtype, spec.device, copies=members * spec.processes + 1)
        if spec.prompt_len + spec.steps > config.max_position_embeddings:
            raise BadInput("--prompt-len + --steps exceed the model's max_position_embeddings")
    return dtype, str(directory)


def worker_specs(sides: Sides, trace: str) -> tuple[str, dict[str, WorkerSpec]]:
    """The run's dtype (its main side's) and each side's worker spec."""
    resolved = sides.resolved(partial(resolve, members=len(sides.planned())))
    workers = {s: sides[s].spec.worker(d, t, trace) for s, (t, d) in resolved.items()}
    return resolved[sides.main][0], workers
