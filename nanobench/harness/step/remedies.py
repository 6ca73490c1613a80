"""Remedies: the fix that applies to a row that fell back or whose guards read Python values.

What it is: pure functions from what a row measured (break reasons with their frames, guards
on Python values that change between steps, the recompile guard kind, whether dynamo fell back,
which input dimension grew) to `Remedy` records, each with the source line it points at:
plan the value outside the traced region; let dynamic=True make a changing int or float argument
symbolic (`symbolic`, worded by what a dynamic=True run did: step by step by `rebuilt.quote_run`,
by its counts alone by `quote_dynamic_row` where its steps were not recorded); mark the growing dimension dynamic; bucket it (the multiple from the bucket
arithmetic of `nanobench.cost.buckets`); fail fast in CI with
`torch.compiler.set_stance("fail_on_recompile")`. `value_guard` reads one dynamo recompile
reason (guard, source line, file:line) into a `ValueGuard`.
What it is not: a measurement, and never imports torch.
Invariant: a row with nothing to fix (no fall-back, no step-varying value guard, no break that
reads a tensor into Python) gets no remedy; every remedy names where it applies (the file:line
dynamo's reason carries, when it carries one); "dynamic=True cannot help" is said only of what
dynamo specialises, decided from the guard's source, never of an int or float argument; a
guard is said to change every step only where a run saw it fail at more than one step, or where
the probe saw its value differ between two steps (one that failed once is `rebuilt.boundary`'s).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nanobench.cost.buckets import round_up

# Break reasons that mean "a tensor was read into a Python value inside the region".
# dynamo names a branch on a tensor's truth value `generic_jump`.
VALUE_READS = (
    "item()", "tolist", "data-dependent", "__int__", "__bool__", "__float__", "generic_jump"
)  # fmt: skip
FAIL_FAST = 'torch.compiler.set_stance("fail_on_recompile")'
# The slot a `symbolic` remedy leaves for what the sweep's dynamic row measured.
DYNAMIC_ROW = "{dynamic row}"
# dynamo's words on a recompile from an int attribute of an nn.Module: those stay static.
MODULE_INT_HINT = "integer attributes of the nn.Module to be static"
# A guard `source == number` on a local or what hangs off it (L['pos'], o.n, l[0], L['d']['k']).
_NUMBER_GUARD = re.compile(
    r"^(?:L\['(?P<local>\w+)'\]|(?P<name>\w+))(?:\[\d+\]|\['[^']*'\]|\.\w+)*"
    r" == -?\d[\d.e+-]*$"
)
_COMPILE_ID = re.compile(r"^\s*(\[[^\]]*\]\s*)?\d+/\d+:\s*")
_STACK_SLOT = re.compile(r"\b___stack\d+\b")  # dynamo's name for a value live across a break
_LOCATION = re.compile(r"#\s*(\S+:\d+) in [\w<>.]+")


@dataclass(frozen=True)
class Remedy:
    kind: str  # plan-outside | symbolic | mark-dynamic | bucket | fail-fast
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


@dataclass(frozen=True)
class ValueGuard:
    """A guard on a Python value that fails as the run moves, and where dynamo says it is."""

    guard: str  # as dynamo writes it: "pos == 16", "len(keys) == 16", "L['pos'] == 19"
    where: str  # "file:line: source" from dynamo's reason or the guard's frame; or the guard
    symbolic: bool  # an int or float argument: dynamic=True makes it a SymInt / SymFloat

    @property
    def expression(self) -> str:
        """The guarded source without its value: one remedy for "pos == 16" and "pos == 17"."""
        return self.guard.rsplit(" == ", 1)[0]


def symbolic_source(guard: str, reason: str = "") -> bool:
    """Whether dynamic=True makes the guarded value symbolic, from the guard's source.

    An int or float reached from an argument (a local, its items, a plain object's attributes)
    becomes a SymInt / SymFloat; dynamo specialises a container's length, a non-number, and
    an attribute of an nn.Module (`self`, or a reason carrying dynamo's module hint).
    """
    found = _NUMBER_GUARD.match(guard.strip())
    root = found and (found.group("local") or found.group("name"))
    return bool(found) and root != "self" and MODULE_INT_HINT not in reason


def value_guard(reason: str) -> ValueGuard:
    """dynamo's recompile reason ("0/3: pos == 19  # source  # file.py:20 in forward ...")."""
    line = _COMPILE_ID.sub("", reason.split("User stack trace:", 1)[0].strip().splitlines()[0])
    guard, _, rest = line.partition("#")
    guard = guard.split("; ")[0].strip()
    at = list(_LOCATION.finditer(rest))
    if not at:
        return ValueGuard(guard, guard, symbolic_source(guard, reason))
    # The source line may hold a '#' of its own: the location is dynamo's last "# file:line in".
    source = " ".join(rest[: at[-1].start()].split())
    return ValueGuard(guard, f"{at[-1].group(1)}: {source}", symbolic_source(guard, reason))


SWEEP_ROW = "this sweep's dynamic row"  # who measured dynamic=True, in compile's remedies


def in_user_terms(g: ValueGuard) -> str:
    """The guard named as the user wrote it: a `___stackN` is no variable of theirs but the value
    dynamo carried across a graph break into its resume function (`L['___stack0']`), so it is
    named by the line that produced it, as dynamo recorded it; any other guard as it reads."""
    if not _STACK_SLOT.search(g.guard) or ": " not in g.where:
        return g.guard
    where, source = g.where.split(": ", 1)
    code = re.split(r"\s#\s", source)[0].strip()  # the line without its comment
    return f"{g.guard} (`{code}` at {where}, carried across the break)"


def quote_dynamic_row(
    text: str, builds: int | None, fell_back: bool | None, by: str = SWEEP_ROW, again_at: str = ""
) -> str:
    """A `symbolic` remedy worded by what dynamic=True did on the same steps (None: not run) by
    its counts alone, where the steps it rebuilt at were not recorded (the engine's rows; a
    run's steps are `rebuilt.quote_run`'s): `by` names who ran it, `again_at` where dynamo's
    reason says it specialised the value again."""
    if DYNAMIC_ROW not in text:
        return text
    if builds is None:
        said = (
            "dynamic=True (or automatic dynamic, after the first recompile) makes an int "
            "argument symbolic (nanobench compile --modes dynamic measures it)"
        )
    elif fell_back or builds > 2:
        where = f"again at {again_at}" if again_at else "where named"
        said = (
            f"does not help: dynamic=True would make an int argument symbolic, but {by} "
            f"built {builds}{' and fell back' if fell_back else ''}: dynamo specialised it "
            f"{where}; pass it as a tensor"
        )
    else:
        said = (
            "dynamic=True (or automatic dynamic, after the first recompile) makes this int "
            f"argument symbolic: {by} built {builds}, no fall-back; compile with dynamic=True"
        )
    return text.replace(DYNAMIC_ROW, said)


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


def plan_outside(
    breaks: Sequence[dict],
    value_guards: Sequence[ValueGuard | str],
    mode: str = "static",
    failed_at: Mapping[str, str] | None = None,
) -> list[Remedy]:
    """A break that reads a tensor into Python, or a guard on a value that changes each step.

    A guard on an int or float argument is `symbolic` (nothing to fix in the dynamic mode,
    which already makes it symbolic); anything dynamo specialises is `plan-outside`. A bare
    string is a guard text without a source line (the engine's probe). `failed_at` maps a
    guard's expression to the steps the run saw it fail at, in words (`rebuilt.StepRun`), quoted
    beside "changes every step"; a guard that failed once is not handed here (`rebuilt.boundary`).
    """
    seen_at = failed_at or {}
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
    seen: set[tuple[str, str]] = set()
    for g in value_guards:
        g = g if isinstance(g, ValueGuard) else ValueGuard(g, g, False)
        if (g.expression, g.where) in seen or (g.symbolic and mode == "dynamic"):
            continue
        seen.add((g.expression, g.where))
        steps = f" ({seen_at[g.expression]})" if seen_at.get(g.expression) else ""
        if g.symbolic:
            fix = f"{in_user_terms(g)} changes every step{steps}; {DYNAMIC_ROW}"
            found.append(Remedy("symbolic", fix, g.where))
            continue
        found.append(
            Remedy(
                "plan-outside",
                f"{in_user_terms(g)}: a guard on a Python value that changes every step{steps} "
                "rebuilds in every compiled mode (dynamo specialises it: dynamic=True cannot "
                "help); keep the value out of the traced region",
                g.where,
            )
        )
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
    value_guards: Sequence[ValueGuard | str] = (),
    growth: Sequence[Growth] = (),
    limit: int = 8,
    inputs_where: str = "",
    engine: bool = False,
    mode: str = "static",
    failed_at: Mapping[str, str] | None = None,
) -> list[Remedy]:
    """Every fix that applies to one row, most specific first; fail-fast closes a fall-back.
    `failed_at`: each value guard's steps in words, where the run recorded them."""
    found = plan_outside(breaks, value_guards, mode, failed_at)
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


def quote_marked(remedy: Remedy, builds: int, steps: int, fell_back: bool) -> Remedy:
    """A `mark-dynamic` remedy worded by a dry run of the user's steps with the dimension
    marked (dynamo alone, eager backend): what it built, and whether it still fell back."""
    if remedy.kind != "mark-dynamic":
        return remedy
    ran = f"a dry run with it (dynamo alone, eager backend) over the {steps} steps built {builds}"
    said = f"does not help: {ran} and fell back" if fell_back else f"{ran}, no fall-back"
    return Remedy(remedy.kind, f"{remedy.fix}: {said}", remedy.where)


def quote_fail_fast(remedy: Remedy, warm_up: int, raised_at: int | None) -> Remedy:
    """A `fail-fast` remedy worded by a dry run with the stance set after `warm_up` steps:
    the step whose recompile raised, or that none did."""
    if remedy.kind != "fail-fast":
        return remedy
    ran = f"a dry run with it after step {warm_up} (dynamo alone, eager backend)"
    said = f"{ran} raised at step {raised_at}" if raised_at else f"{ran} raised at no step"
    return Remedy(remedy.kind, f"{remedy.fix}: {said}", remedy.where)
