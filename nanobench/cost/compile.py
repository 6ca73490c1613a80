"""What compiling the decode step costs and buys, and whether the compiler will keep its graph.

What it is: the compile arithmetic (compile seconds, Amdahl step speedup, breakeven), the build
prediction from a run's shape history (how many builds each mode asks for and whether that
walks past dynamo's recompile limit), a classifier for dynamo's recompile reasons, and the
gates that turn those into pass/fail with `CompileUnsound`.
What it is not: a compiler driver or a timer. It never imports torch; the numbers come from
`torch._dynamo` counters and `get_compilation_metrics()` read by the probes.
Invariant: a prediction depends only on the history, the mode, the limit and the guard kind,
and a guard on a Python value rebuilds per distinct value in every compiled mode, because
`dynamic=True` only makes tensor dimensions symbolic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Sequence
from typing import Literal

MODES = ("off", "dynamic", "static")
GUARD_KINDS = ("shape", "value", "none")
GuardKind = Literal["shape", "value", "none"]

# torch._dynamo.config.recompile_limit (formerly cache_size_limit) defaults to 8.
DEFAULT_RECOMPILE_LIMIT = 8


class CompileUnsound(RuntimeError):
    """The compiled decode broke a promise: fragments, fallback, rebuilds or no payback."""


# --- arithmetic -------------------------------------------------------------------------------


def compile_cost_s(per_frame_compile_s: Iterable[float]) -> float:
    """sum(per_frame_compile_s): the compiler's own ledger, one entry per frame build."""
    values = list(per_frame_compile_s)
    if any(v < 0 for v in values):
        raise ValueError(f"per_frame_compile_s: expected non-negative seconds, got {values}")
    return float(sum(values))


def step_speedup(forward_speedup: float, forward_share: float) -> float:
    """1 / ((1 - forward_share) + forward_share / forward_speedup): Amdahl over the forward."""
    if not 0.0 <= forward_share <= 1.0:
        raise ValueError(f"forward_share: expected a share in [0, 1], got {forward_share}")
    if forward_speedup <= 0:
        raise ValueError(f"forward_speedup: expected a positive factor, got {forward_speedup}")
    denominator = (1.0 - forward_share) + forward_share / forward_speedup
    # An infinitely fast forward that is the whole step has no ceiling.
    return math.inf if denominator == 0 else 1.0 / denominator


def saving_per_step_s(eager_step_s: float, compiled_step_s: float) -> float:
    """eager_step_s - compiled_step_s; negative when compiling made the step slower."""
    return eager_step_s - compiled_step_s


def breakeven_steps(compile_s: float, saving_per_step_s: float) -> float:
    """compile_s / saving_per_step_s, or math.inf when saving_per_step_s <= 0 (never pays back).

    A float, not rounded: the gate compares it with planned steps, and inf compares correctly
    where None would need a special case at every call site.
    """
    if compile_s < 0:
        raise ValueError(f"compile_s: expected non-negative seconds, got {compile_s}")
    if saving_per_step_s <= 0:
        return math.inf
    return compile_s / saving_per_step_s


def net_saving_s(steps: int, compile_s: float, saving_per_step_s: float) -> float:
    """steps * saving_per_step_s - compile_s."""
    if steps < 0:
        raise ValueError(f"steps: expected a non-negative integer, got {steps}")
    return steps * saving_per_step_s - compile_s


def worth_compiling(steps_served: int, compile_s: float, saving_per_step_s: float) -> bool:
    """net_saving_s(steps_served, compile_s, saving_per_step_s) > 0."""
    return net_saving_s(steps_served, compile_s, saving_per_step_s) > 0


# --- build prediction -------------------------------------------------------------------------


def distinct_shapes(history: Iterable[Hashable]) -> int:
    """len(set(history)): distinct shapes (or guarded values) a run presented."""
    return len(set(history))


def _validate(mode: str, recompile_limit: int, guard_kind: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if guard_kind not in GUARD_KINDS:
        raise ValueError(
            f"guard_kind: expected one of {', '.join(GUARD_KINDS)}, got {guard_kind!r}"
        )
    if recompile_limit < 1:
        raise ValueError(f"recompile_limit: expected a positive integer, got {recompile_limit}")


def one_patterns(history: Iterable[Hashable]) -> int:
    """len({tuple(d == 1 for d in shape)}): the 0/1 specialisations a shape history presents.

    dynamo never makes a size of 1 symbolic (it specialises 0 and 1), so under dynamic=True a
    dimension that is 1 in one shape and larger in another asks for a graph of each.
    """

    def pattern(s: Hashable) -> tuple[bool, ...]:
        shape = isinstance(s, tuple) and all(isinstance(d, int) for d in s)
        return tuple(d == 1 for d in s) if shape else ()  # a guarded value: no sizes

    return len({pattern(s) for s in history})


def requested_builds(history: Sequence[Hashable], mode: str, guard_kind: str = "shape") -> int:
    """Builds the history asks for, uncapped.

    off: 0. value guard: one per distinct value in either compiled mode. static with a shape
    guard: one per distinct shape. dynamic with a shape guard: one per 0/1 specialisation
    (`one_patterns`: a batch of 1 beside larger ones is 2). No failing guard: 1.
    """
    _validate(mode, DEFAULT_RECOMPILE_LIMIT, guard_kind)
    if mode == "off" or not history:
        return 0
    if guard_kind == "value" or (mode == "static" and guard_kind == "shape"):
        return distinct_shapes(history)
    if guard_kind == "none":
        return 1
    # Automatic dynamic (a size that is not an argument's) may specialise once first, so
    # measured dynamic builds can be one more: this is the lower bound.
    return one_patterns(history)


def predicts_fall_back(
    history: Sequence[Hashable],
    mode: str,
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT,
    guard_kind: str = "shape",
) -> bool:
    """requested_builds(history, mode, guard_kind) > recompile_limit.

    Past the limit dynamo marks the frame and runs it eager for the rest of the process,
    silently; predicting it from the history is the only cheap way to know.
    """
    _validate(mode, recompile_limit, guard_kind)
    return requested_builds(history, mode, guard_kind) > recompile_limit


# --- recompile reasons ------------------------------------------------------------------------

# Guards on tensor geometry: symbolic shapes can generalise these.
_SHAPE_PATTERNS = (
    re.compile(r"\b(size|stride) mismatch at index \d+"),
    re.compile(r"\brank mismatch\b"),
    re.compile(r"\.size\(\)"),
    re.compile(r"\.stride\(\)"),
    re.compile(r"\.storage_offset\(\)"),
)
# dynamo prefixes each reason with its compile id ("0/3: ") and appends source comments and a
# "User stack trace:" block; the source text can say anything, so it must not be classified.
_COMPILE_ID = re.compile(r"^\s*(\[[^\]]*\]\s*)?\d+/\d+:\s*")
_COMMENT = re.compile(r"\s+#.*$")


def _top_level(line: str) -> list[str]:
    """`line` split at each "; " outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and line.startswith("; ", i):
            parts.append(line[start:i])
            start = i + 2
    return [*parts, line[start:]]


def _guard_parts(reason: str) -> list[str]:
    head = reason.split("User stack trace:", 1)[0]
    parts: list[str] = []
    for line in head.splitlines():
        line = _COMPILE_ID.sub("", line)
        # Several failed guards of one entry are joined with "; "; a "; " inside parentheses
        # is a comment's (the 0/1-specialization note's "...; to avoid specialization try").
        for part in _top_level(line):
            part = _COMMENT.sub("", part).strip()
            if part:
                parts.append(part)
    return parts


def classify_guard(reason: str | None) -> GuardKind:
    """Classify a dynamo recompile reason as "shape", "value" or "none".

    "shape" when every failed guard is on tensor geometry (`size mismatch at index 1`,
    `.size()[1]` bounds), "value" when any is not, "none" for no reason (a first build).

    "value" means any guard symbolic shapes cannot generalise: a Python attribute or int
    (`tables[0].num_tokens == 13`, `len(rows) == 3`), an object or type identity
    (`___check_obj_id`, `___check_type_id`), or a tensor's dtype or device. dynamic=True
    cannot help with any of them.
    """
    if reason is None:
        return "none"
    parts = _guard_parts(reason)
    if not parts:
        return "none"
    kinds = {"shape" if any(p.search(part) for p in _SHAPE_PATTERNS) else "value" for part in parts}
    return "value" if "value" in kinds else "shape"


# --- gates ------------------------------------------------------------------------------------


def check_single_graph(graphs: int, breaks: int) -> None:
    """One decode forward traces to exactly one graph with no breaks."""
    if graphs != 1 or breaks != 0:
        raise CompileUnsound(
            f"decode forward traced to {graphs} graph{'s' * (graphs != 1)} with {breaks} "
            f"break{'s' * (breaks != 1)}, expected 1 and 0: "
            "each break is a line dynamo ran in the interpreter, named in the breaks above"
        )


def check_no_fallback(fell_back: bool, reason: str = "") -> None:
    """The compiled frame never went past the recompile limit and back to eager."""
    if fell_back:
        why = f" (last recompile reason: {reason})" if reason else ""
        raise CompileUnsound(
            "compiled decode fell back to eager past the recompile limit" + why + "; "
            "the compile was paid for and the compiled speed is never collected"
        )


def check_graph_reused(builds: int, steps: int, max_builds: int = 1) -> None:
    """A run of `steps` decode steps built at most `max_builds` graphs."""
    if builds > max_builds:
        raise CompileUnsound(
            f"{builds} builds over {steps} steps, expected at most {max_builds}: a guard fails "
            "as the run moves; classify the recompile reasons (shape -> bucket or dynamic, "
            "value -> take it out of the traced region)"
        )


def check_shapes_bucketed(shapes_seen: Iterable[tuple[int, int]], buckets: object) -> None:
    """Every shape the compiled forward saw is a member of the bucket set (`x in buckets`)."""
    seen = {tuple(s) for s in shapes_seen}
    outside = sorted(s for s in seen if s not in buckets)  # type: ignore[operator]
    if outside:
        raise CompileUnsound(
            f"{len(outside)} of {len(seen)} shapes the compiled forward saw are not buckets, "
            f"e.g. {outside[:3]}: each one is its own static build"
        )


def check_compile_amortised(breakeven_steps: float, planned_steps: int) -> None:
    """The compile pays back within the planned run: breakeven_steps <= planned_steps."""
    if breakeven_steps > planned_steps:
        if math.isinf(breakeven_steps):
            shown = "never (no per-step saving)"
        else:
            shown = f"after {breakeven_steps:,.0f} steps"
        raise CompileUnsound(
            f"compile pays back {shown}, run plans {planned_steps:,} steps: leave compile off"
        )
