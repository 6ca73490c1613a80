"""`nanobench startup`'s promises, read off its rows.

What it is: `gates(spec, rows)`: every warm and hot start hit the caches its cold start saved
(a miss fails, naming the start, the graph and what changed in the cache key), and with
`--max-warm-s` each mode's warm start is under it (its runs' geometric mean and t interval, the
row's `ready_gm_s`, pooled over the modes where they agree: pass only when the whole interval
is under, fail only when the whole of it is over).
What it is not: the rows or their arithmetic (`startup.rows`, `harness.statistics.t_intervals`).
Invariant: a gate reads only ok rows; a failed start fails the run through `finish`, not here.
"""

from __future__ import annotations

from nanobench.harness.runs.gates import Gate
from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS
from nanobench.startup.rows import StartRow
from nanobench.startup.spec import StartupSpec
from reports.style import counted


def caches_hit(rows: list[StartRow]) -> Gate:
    later = [r for r in rows if r.kind != "cold" and r.status == "ok" and r.mode != "off"]
    missed = [r for r in later if r.missed]
    if not later:
        return Gate("warm and hot starts hit their caches", True, "no warm or hot start ran")
    if missed:
        r = missed[0]
        return Gate(
            "warm and hot starts hit their caches",
            False,
            f"{len(missed)} of {len(later)} missed; first: {r.mode} {r.kind} (run {r.run}) "
            f"{r.missed}",
        )
    return Gate("warm and hot starts hit their caches", True, f"all {len(later)} hit")


def warm_under(rows: list[StartRow], mode: str, max_s: float) -> Gate:
    """The mode's warm ready seconds against max_s on the interval the rows carry (`with_saved`)."""
    name = f"{mode} warm start under {max_s:g} s"
    warm = [r for r in rows if (r.mode, r.kind, r.status) == (mode, "warm", "ok")]
    if not warm:
        return Gate(name, False, f"{mode}: no warm start finished")
    r = warm[0]
    mean, low, high = r.ready_gm_s, r.ready_gm_s_low, r.ready_gm_s_high
    if low is None or high is None:
        verdict, span = INCONCLUSIVE, f"{mean:.2f} s over 1 run (an interval needs --runs 2)"
    else:
        verdict = PASS if high < max_s else FAIL if low > max_s else INCONCLUSIVE
        span = (f"{mean:.2f} s [{low:.2f}, {high:.2f}] over {counted(len(warm), 'run')} "
                f"({r.ready_gm_s_variance}, {r.ready_gm_s_df:g} df)")  # fmt: skip
    detail = f"{span}; the target is under {max_s:g} s"
    if verdict == INCONCLUSIVE:
        detail += "; can't tell at this noise (more --runs)"
    return Gate(name, verdict == PASS, detail, verdict, mean, low, high, max_s)


def gates(spec: StartupSpec, rows: list[StartRow]) -> list[Gate]:
    found = [caches_hit(rows)]
    if spec.max_warm_s and "warm" in spec.starts:
        found += [warm_under(rows, m, spec.max_warm_s) for m in spec.modes if m != "off"]
    return found
