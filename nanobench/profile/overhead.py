"""The profiler's own cost: measured on the step, charged to the events it lands in, taken out.

What it is: `event_cost_us` (what one event cost this step: the step timed with and without the
profiler in the same worker, the difference over the events a step records), `charged_us`
(where that cost lands: the part inside an event, `inside_us`, in its own self time; the rest,
the enter and exit around it, in its parent's, as a probe of one no-work op splits them) and
`net_of_profiler` (each category less what was charged to it; "unattributed" the step timed
without the profiler beside the profiled ones, in the same worker, less the rest).
What it is not: the profiling (`profile.session`) or the attribution (`profile.attribution`).
Invariant: the cost is measured, never assumed; a charge never passes the self time it lands in
(what would goes up to the parent), so no category goes below 0; the categories as profiled are
kept beside the net ones (`profiled_ms_per_step`), and "unattributed" may be negative (the net
categories add up to more than the step): shown, never clipped.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import fmean

from nanobench.profile.rows import HOST_CATEGORIES, CategoryRow, Event


def event_cost_us(profiled_ms: list[float], plain_ms: list[float], events_per_step: float) -> float:
    """(mean profiled step - mean plain step) / events a step, in µs; 0 where no slower. Means,
    as the events a step are: a mode that alternates two kinds of step (a fall-back's eager ones
    among compiled ones) has a median that is one kind's, its events the mix's."""
    if not profiled_ms or not plain_ms or events_per_step <= 0:
        return 0.0
    return max(fmean(profiled_ms) - fmean(plain_ms), 0.0) * 1e3 / events_per_step


def charged_us(
    events: list[Event], parent: list[int], owner: list[int], self_us: list[float], cost: tuple
) -> list[float]:
    """The profiler's cost charged to each owner, in µs: `cost = (inside_us, outside_us)` a
    recorded event, inside to the event's owner, outside to its parent's; a charge past the
    owner's own self time goes up to its parent's owner, and past the outermost is dropped."""
    inside, outside = cost
    owned = [0.0] * len(events)
    for i in (i for i, o in enumerate(owner) if o >= 0):
        owned[owner[i]] += self_us[i]
    charge = [0.0] * len(events)
    # children before parents: latest start first, and of two starting together the shorter
    for i in sorted(range(len(events)), key=lambda j: (-events[j].start_us, events[j].end_us)):
        if owner[i] < 0:
            continue
        up = owner[parent[i]] if parent[i] >= 0 else -1
        charge[owner[i]] += inside
        if up >= 0 and up != owner[i]:
            charge[up] += outside
        if owner[i] == i and charge[i] > owned[i]:
            if up >= 0:
                charge[up] += charge[i] - owned[i]
            charge[i] = owned[i]
    return charge


def net_of_profiler(
    categories: list[CategoryRow], step_ms: float | None
) -> tuple[list[CategoryRow], dict]:
    """The categories net of the profiler's cost charged to each, "unattributed" `step_ms` (the
    worker's unprofiled steps beside the profile) less them, and the facts that change with them (attributed, unattributed, host share,
    one guard check's µs)."""
    if not step_ms or not categories or any(c.profiler_ms_per_step is None for c in categories):
        return categories, {}
    net = {c.category: c.ms_per_step - c.profiler_ms_per_step for c in categories}
    attributed = sum(ms for name, ms in net.items() if name != "unattributed")
    net["unattributed"] = step_ms - attributed
    # shares of the step, or of the categories where they add up to more than it: never past 1
    whole = max(step_ms, attributed)
    rows = [
        replace(c, ms_per_step=net[c.category], share=net[c.category] / whole,
                profiled_ms_per_step=c.ms_per_step)
        for c in categories
    ]  # fmt: skip
    host = sum(net[name] for name in HOST_CATEGORIES if name in net) / whole
    guards = next((c for c in categories if c.category == "guards" and c.calls_per_step), None)
    per_call = net["guards"] * 1e3 / guards.calls_per_step if guards else None
    return rows, {"attributed_ms": attributed, "unattributed_ms": net["unattributed"],
                  "host_share": host, "guard_us_per_call": per_call}  # fmt: skip
