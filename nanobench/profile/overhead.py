"""The profiler's own cost, taken out of a profiled step so its categories add up to the real one.

What it is: `net_of_profiler(categories, cost_us, step_ms)`: each category less the profiler's
cost of its events (calls a step x the cost of one event, measured in the same worker on an op
that does next to nothing, `profile.session.event_cost_us`), and "unattributed" the step timed
without the profiler less the rest; shares of that step, or of the net categories where they
add up to more (a share never passes 100%). With no unprofiled step (no round ran),
the categories as profiled.
What it is not: a model of where the profiler's time lands inside an event (its cost is put on
the event's own category) or the attribution (`profile.attribution`).
Invariant: the cost is measured, never assumed; the categories as profiled are kept beside the
net ones (`profiled_ms_per_step`), and "unattributed" may be negative (the net categories add
up to more than the step): shown, never clipped.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.profile.rows import HOST_CATEGORIES, CategoryRow


def net_ms(ms: float, calls: float, cost_us: float) -> float:
    """A category's ms a step less its events' profiler cost: ms - calls · cost_us / 1000, at least 0."""
    return max(ms - calls * cost_us / 1e3, 0.0)


def net_of_profiler(
    categories: list[CategoryRow], cost_us: float | None, step_ms: float | None
) -> tuple[list[CategoryRow], dict]:
    """The categories net of the profiler's cost, "unattributed" the unprofiled step less
    them, and the facts that change with them (attributed, unattributed, host share, one guard
    check's µs)."""
    if cost_us is None or not step_ms or not categories:
        return categories, {}
    net = {c.category: net_ms(c.ms_per_step, c.calls_per_step, cost_us) for c in categories}
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
