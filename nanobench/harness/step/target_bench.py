"""Explain a user's decode step (a `--target`): what explain shows and compile's probe reads.

What it is: `explain_target` / `probe_target` (steps 0..K-1 eagerly, then
`torch._dynamo.explain` of `forward` at step K and K+1: a guard on a Python value whose text
differs between the two is one that changes every step) and `call_step` (one call of a
target's forward, a raise made a `TargetError` naming the step, in the user's terms:
`forward_raised`).
What it is not: compiling or timing a target (`nanobench.compile.target_session`, which
imports this; harness sits below the commands and imports none of them).
Invariant: step inputs are built outside the traced region; a step that raises is a
`TargetError` of one line (the user's error where their own forward raised, a failed row where
the compiler alone failed or a timed window broke the contract), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from nanobench.harness.step.dynamo_call import trace_call
from nanobench.harness.step.dynamo_explain import ExplainRow, break_table, explained_counts
from nanobench.harness.step.forward_raised import forward_raised
from nanobench.harness.step.remedies import (
    ValueGuard,
    in_user_terms,
    remedies_for,
    symbolic_source,
)
from nanobench.harness.step.targets import Target, TargetError, inputs_at

# Guards on a value a step may change: a constant, an equality, a container's length.
STEP_GUARDS = ("CONSTANT_MATCH", "EQUALS_MATCH", "SEQUENCE_LENGTH", "DICT_LENGTH")


def guard_where(guard) -> str:
    """file:line: source of the frame dynamo recorded for a guard ("" when it recorded none)."""
    frame = guard.user_stack[-1] if getattr(guard, "user_stack", None) else None
    return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}" if frame else ""


def step_value_guards(guards_k, guards_next) -> list:
    """Guards on Python values at step K whose text is different at step K+1 (`ValueGuard`s)."""

    def by_text(guards) -> dict:
        # Entry by entry: a length guard's code also checks the type, which never changes.
        return {
            text: g
            for g in guards or ()
            if g.create_fn_name() in STEP_GUARDS and g.name.startswith("L[")
            for text in g.code_list or (g.name,)
        }

    at_k, at_next = by_text(guards_k), by_text(guards_next)
    return [
        ValueGuard(text, guard_where(at_k[text]) or text, symbolic_source(text))
        for text in sorted(set(at_k) - set(at_next))
    ]


def _explain_steps(target: Target, step: int):
    with torch.no_grad():
        for k in range(step):
            args, kwargs = inputs_at(target, k)
            call_step(target, k, target.forward, args, kwargs)
        outs = []
        for k in (step, step + 1):
            args, kwargs = inputs_at(target, k)
            traced = (
                partial(target.explained, trace_call)
                if target.explained
                else partial(trace_call, target.forward)
            )
            outs.append(call_step(target, k, traced, args, kwargs))
    return outs


def call_step(target: Target, step: int, fn: Callable, args, kwargs):
    """`fn(*args, **kwargs)`, the target's forward at `step` (compiled or not); what it raised, a
    `TargetError` in the user's terms (`forward_raised`: their error, their file:line)."""
    try:
        return fn(*args, **kwargs)
    except TargetError:
        raise
    except Exception as e:
        raise forward_raised(target, step, fn, e, args, kwargs) from None


def explain_target(target: Target, step: int) -> ExplainRow:
    return probe_target(target, step)[0]


def probe_target(target: Target, step: int) -> tuple[ExplainRow, list, set[str]]:
    """The explained row at `step`, its guards that change by step K+1 (`ValueGuard`s) and the
    source of every guard dynamo installed (what the step reads). A `symbolic` remedy keeps its
    `DYNAMIC_ROW` slot: explain words it by a dry run (`dry_run`), never a rule alone."""
    out, following = _explain_steps(target, step)
    breaks = break_table(out)
    varying = step_value_guards(out.out_guards, following.out_guards)
    remedies = remedies_for(fell_back=False, guard_kind="none", breaks=breaks, value_guards=varying)
    row = ExplainRow(
        layers=None,
        path=f"target step {step}",
        target=target.spec,
        attention="",
        **explained_counts(out, breaks, [g.guard for g in varying]),
        remedies=[r.text() for r in remedies],  # a `symbolic` one left for its check
        value_guard_named=[in_user_terms(g) for g in varying],
    )
    guarded = {g.name for o in (out, following) for g in o.out_guards or ()}
    return row, varying, guarded
