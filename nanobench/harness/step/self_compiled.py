"""Steps that compile themselves: their modes, and where they can run.

What it is: `VLLM_MODES` and `SELF_COMPILED` (each such built-in target and its modes, `off` its
eager), `target_modes` (a self-compiled target runs its own modes and no others, every other step
nanobench's) and `vllm_reachable` (vLLM's steps asked of an interpreter without it). All of it
is read before any worker, with nothing imported: no torch, no vLLM.
What it is not: the target itself (`vllm_target`, in the worker) or the target protocol
(`targets`).
Invariant: a mode name belongs to one kind of step; a wrong one is `BadInput`, one line.
"""

from __future__ import annotations

import importlib.util
import sys

from nanobench.harness.errors import BadInput

# vLLM's CompilationMode 1 and 2 (guards kept; traced once, every guard dropped), and 2 with its
# evaluate_guards debug mode (the shape guards kept and evaluated each call): the modes of
# `--target vllm` (`vllm_target`), which compiles itself. The modes of each target that compiles
# itself, `off` its eager; every other step is compiled by nanobench, in `cli.choices.MODES`.
EVALUATE_GUARDS = "evaluate-guards"
VLLM_MODES = ("stock-torch-compile", "dynamo-trace-once", EVALUATE_GUARDS)
SELF_COMPILED = {"vllm": ("off", *VLLM_MODES)}


def target_modes(spec: str, modes) -> None:
    """A target that compiles itself runs its own modes and no others; every other step runs
    nanobench's (BadInput, one line, before any worker)."""
    own = SELF_COMPILED.get(spec)
    if own is not None:
        wrong = [m for m in modes if m not in own]
        if wrong:
            raise BadInput(f"--modes {wrong[0]}: --target {spec} compiles itself; its modes are "
                           f"{', '.join(own)}")  # fmt: skip
        return
    theirs = sorted({m for own in SELF_COMPILED.values() for m in own if m != "off"} & set(modes))
    if theirs:
        raise BadInput(f"--modes {theirs[0]}: a mode of --target "
                       f"{', '.join(SELF_COMPILED)}, which compiles itself")  # fmt: skip


def vllm_reachable(what: str, python: str) -> None:
    """vLLM's steps run in an interpreter that has it: where the workers run under this one
    (no --python), it is checked here, before any worker starts (BadInput, one line); another
    interpreter's worker says so itself (`vllm_target.import_vllm`)."""
    if python or importlib.util.find_spec("vllm") is not None:
        return
    raise BadInput(f"{what}: {sys.executable} has no vLLM: run `make vllm`, then "
                   ".venv-vllm/bin/nanobench (or pass --python .venv-vllm/bin/python)")  # fmt: skip
