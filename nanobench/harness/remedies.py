"""Remedies: the fix that applies to a row that fell back or whose guards read Python values.

What it is: pure functions from what a row measured (break reasons with their frames, guards
on Python values that change between steps, the recompile guard kind, whether dynamo fell back,
which input dimension grew) to `Remedy` records, each with the source line it points at:
plan the value outside the traced region; mark the growing dimension dynamic; bucket it (the
multiple from the bucket arithmetic of `nanobench.cost.buckets`); fail fast in CI with
`torch.compiler.set_stance("fail_on_recompile")`.
What it is not: a measurement, and never imports torch.
Invariant: a row with nothing to fix (no fall-back, no step-varying value guard, no break that
reads a tensor into Python) gets no remedy; every remedy names where it applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nanobench.cost.buckets import round_up

# Break reasons that mean "a tensor was read into a Python value inside the region".
VALUE_READS = ("item()", "tolist", "data-dependent", "__int__", "__bool__", "__float__")
FAIL_FAST = 'torch.compiler.set_stance("fail_on_recompile")'


@dataclass(frozen=True)
class Remedy:
    kind: str  # plan-outside | mark-dynamic | bucket | fail-fast
    fix: str
    where: str  # file:line and source, or the input it applies to

    def text(self) -> str:
        return f"{self.kind}: {self.fix} [{self.where}]"


@dataclass(frozen=True)
class Growth:
    """One input dimension that changed over the run: `what` names it for the user."""

    what: str
    dim: int
    first: int
    last: int


def width_multiple_for(sizes: Iterable[int], max_shapes: int) -> int:
    """Smallest power of two N with len({round_up(s, N)}) <= max_shapes: least padding that fits."""
    values = sorted(set(sizes))
    if max_shapes < 1:
        raise ValueError(f"max_shapes: expected a positive integer, got {max_shapes}")
    if not values:
        raise ValueError("sizes: expected at least one size")
    n = 1
    while len({round_up(s, n) for s in values}) > max_shapes:
        n *= 2
    return n


def plan_outside(breaks: Sequence[dict], value_guards: Sequence[str]) -> list[Remedy]:
    """A break that reads a tensor into Python, or a guard on a value that changes each step."""
    found = [
        Remedy(
            "plan-outside",
            "this reads a tensor into a Python value inside the traced region; compute it "
            "before the call (in step_inputs or the plan) and pass it in as a tensor",
            f"{b['frame']}: {b['source']}",
        )
        for b in breaks
        if any(word in b["reason"] for word in VALUE_READS)
    ]
    found += [
        Remedy(
            "plan-outside",
            "a guard on a Python value that changes every step rebuilds in every compiled "
            "mode (dynamic=True cannot help); keep the value out of the traced region",
            guard,
        )
        for guard in value_guards
    ]
    return found


def for_shapes(growth: Sequence[Growth], limit: int, inputs_where: str, engine: bool) -> list:
    """Fixes for a shape-guard fall-back: mark the growing dimension dynamic, or bucket it.

    Inputs that grow alike (a cache's keys and values in every layer) share one pair of fixes.
    """
    alike: dict[tuple[int, int, int], list[str]] = {}
    for g in growth:
        alike.setdefault((g.dim, g.first, g.last), []).append(g.what)
    found = []
    for (dim, first, last), names in alike.items():
        what = names[0] + (f" (and {len(names) - 1} more alike)" if len(names) > 1 else "")
        n = width_multiple_for(range(first, last + 1), limit)
        if engine:
            dynamic = "compile with --modes dynamic (dynamic=True makes the width symbolic)"
            bucket = f"close the shape set: --bucketed --width-multiple {n}"
        else:
            dynamic = f"torch._dynamo.mark_dynamic({names[0]}, {dim}) where step_inputs builds it"
            bucket = f"pad dim {dim} up to a multiple of {n}"
        where = f"{inputs_where}: {what} dim {dim}"
        shapes = len({round_up(s, n) for s in range(first, last + 1)})
        found.append(Remedy("mark-dynamic", dynamic, where))
        found.append(
            Remedy(
                "bucket",
                f"{bucket}: sizes {first}..{last} ({last - first + 1} shapes) become {shapes} "
                f"within recompile_limit {limit}",
                where,
            )
        )
    return found


def remedies_for(
    *,
    fell_back: bool,
    guard_kind: str,
    breaks: Sequence[dict] = (),
    value_guards: Sequence[str] = (),
    growth: Sequence[Growth] = (),
    limit: int = 8,
    inputs_where: str = "",
    engine: bool = False,
) -> list[Remedy]:
    """Every fix that applies to one row, most specific first; fail-fast closes a fall-back."""
    found = plan_outside(breaks, value_guards)
    if fell_back and guard_kind == "shape":
        found += for_shapes(growth, limit, inputs_where, engine)
    if fell_back:
        found.append(
            Remedy(
                "fail-fast",
                f"in CI, call {FAIL_FAST} after warm-up: a recompile raises instead of "
                "silently running eager past recompile_limit",
                "the serving loop, after the first steps",
            )
        )
    return found
