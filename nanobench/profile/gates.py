"""The profile's gates: each mode measured and profiled, and its host share under a ceiling.

What it is: `gates(spec, rows)`: `measured[mode]` (the mode ran and its first worker returned a
profile: a row without one fails, never passes), `categories_add_up[mode]` (the categories
within 10% of the steps timed without the profiler beside the profiled ones, in the same worker:
what the profiler's own cost allows; a miss past 10% but within the passes' own noise,
`beside_spread`, inconclusive) and,
with `--max-overhead-share`, `max_overhead_share[mode]` for every compiled mode (the step's host
work, `rows.HOST_CATEGORIES`: what compiling adds per call and what a recorded graph could
remove, as a share of the profiled step).
What it is not: the measurement or the attribution.
Invariant: a gate reads typed fields of the profiled rows; a missing figure fails its gate.
"""

from __future__ import annotations

from nanobench.harness.runs.gates import Gate
from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS
from nanobench.profile.rows import ProfileRow

ADD_UP = 0.10  # the categories (the profiler's overhead taken out) against the unprofiled step


def added_up(row: ProfileRow) -> float | None:
    """How far the categories miss the step timed without the profiler beside them, in the same
    worker: |attributed - plain| / plain."""
    if not row.attributed_ms or not row.plain_step_ms:
        return None
    return abs(row.attributed_ms - row.plain_step_ms) / row.plain_step_ms


def add_up_verdict(missed: float | None, spread: float | None) -> str:
    """Pass where the miss is within ADD_UP; fail where it passes ADD_UP by more than the passes'
    noise; else inconclusive: on a busy box a miss within the noise may be the noise, and a
    verdict that noise could flip is never a fail."""
    if missed is None:
        return FAIL
    if missed <= ADD_UP:
        return PASS
    return FAIL if missed - (spread or 0.0) > ADD_UP else INCONCLUSIVE


def add_up_gate(name: str, r: ProfileRow) -> Gate:
    """`categories_add_up`: the net categories against the step beside them, with its noise."""
    missed = added_up(r)
    verdict = add_up_verdict(missed, r.beside_spread)
    noise = "" if r.beside_spread is None else f", passes {r.beside_spread:.0%} apart at one step"
    detail = (
        f"attributed {r.attributed_ms or 0:.3f} ms a profiled step of "
        f"{r.profiled_step_ms:.3f}, unprofiled beside it {r.plain_step_ms or 0:.3f}: "
        f"{'-' if missed is None else f'{missed:.0%}'} apart (at most {ADD_UP:.0%}){noise}"
    )
    if verdict == INCONCLUSIVE:
        detail += "; the box is too busy to tell: rerun on a quieter one, or with more --passes"
    return Gate(f"categories_add_up{name}", verdict == PASS, detail, verdict, missed,
                target=ADD_UP)  # fmt: skip


def gates(spec, rows: list[ProfileRow]) -> list[Gate]:
    """Measured and profiled; the categories add up; each compiled mode's host share."""
    found = []
    for r in rows:
        name = f"[{r.mode}]" if not r.side else f"[{r.side} {r.mode}]"
        if r.status != "ok" or r.profiled_step_ms is None:
            found.append(Gate(f"measured{name}", False, r.status if r.status != "ok"
                              else "no profile came back from the mode's first worker"))  # fmt: skip
            continue
        found.append(add_up_gate(name, r))
        if spec.max_overhead_share is not None and r.mode != "off":
            share = r.host_share
            found.append(Gate(f"max_overhead_share{name}", share is not None
                              and share <= spec.max_overhead_share,
                              f"host work {share:.0%} of the step (at most "
                              f"{spec.max_overhead_share:.0%})", estimate=share,
                              target=spec.max_overhead_share))  # fmt: skip
    return found
