"""A profiled step's device side on a GPU: kernel time, launches, graph replays, skipped graphs.

What it is: `device_time(host, owner, device, steps)`: each device record (a kernel, a copy, a
fill: `Event.device`) joined to the host runtime call that made it by their shared correlation
id (CUPTI gives a launch and its kernels one), and through that call to the op that owns it
(`attribution.owners`); per steady step: the device's busy time (the union of its records)
against the host's wall, its kernel time, the launches and the graph replays the host made,
and the share of device time inside replayed graphs; and each owner's device µs, for its
kernel row. `skip_reasons()`: Inductor's "skipping cudagraphs due to ..." lines, caught while
a mode builds, one per graph it would not record.
What it is not: the host attribution (`profile.attribution`) or the profiling (`session`).
Invariant: a device record whose launch is outside the steady steps (a warm-up's, a build's)
counts nowhere; with no device record at all every figure is None, never 0: a CPU run says
nothing of a device it does not have.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from nanobench.profile.rows import Event

# A host call that puts work on the device (CUDA runtime or driver, HIP): its records share its
# correlation id.
SUBMIT = re.compile(r"(cuda|cu|hip)(Launch|ExtModuleLaunch|GraphLaunch|Memcpy|Memset)")
LAUNCH = re.compile(r"(cuda|cu|hip)(LaunchKernel|LaunchCooperativeKernel|ExtModuleLaunch)")
GRAPH_LAUNCH = re.compile(r"(cuda|cu|hip)GraphLaunch")
# Inductor's cudagraph skips are warned on this artifact logger (torch/_inductor/cudagraph_utils)
SKIP_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"


def busy_us(spans: list[tuple[float, float]]) -> float:
    """The length of the union of [start, end] spans: overlapping streams counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def device_time(
    host: list[Event], owner: list[int], device: list[Event], steps: list[Event]
) -> tuple[dict, list[float]]:
    """(the steady steps' device facts, each host event's device µs as an owner), per step."""
    n = len(steps)
    calls = {e.correlation: i for i, e in enumerate(host) if owner[i] >= 0 and SUBMIT.match(e.name)}
    launched = [host[i] for i in calls.values()]
    owned_us = [0.0] * len(host)
    spans, graph_us = [], 0.0
    for d in device:
        i = calls.get(d.correlation)
        if i is None or not d.correlation:
            continue
        owned_us[owner[i]] += d.end_us - d.start_us
        spans.append((d.start_us, d.end_us))
        graph_us += (d.end_us - d.start_us) if GRAPH_LAUNCH.match(host[i].name) else 0.0
    if not spans:
        return dict.fromkeys(DEVICE_FACTS), owned_us
    kernel_us = sum(end - start for start, end in spans)
    wall_us = sum(s.end_us - s.start_us for s in steps)
    return {
        "device_ms_per_step": kernel_us / n / 1e3,
        "device_busy_share": busy_us(spans) / wall_us,
        "launches_per_step": sum(bool(LAUNCH.match(e.name)) for e in launched) / n,
        "graph_replays_per_step": sum(bool(GRAPH_LAUNCH.match(e.name)) for e in launched) / n,
        "graph_device_share": graph_us / kernel_us,
    }, owned_us


DEVICE_FACTS = (
    "device_ms_per_step",
    "device_busy_share",
    "launches_per_step",
    "graph_replays_per_step",
    "graph_device_share",
)


class _Caught(logging.Handler):
    def __init__(self, found: list[str]):
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(record.getMessage())


@contextmanager
def skip_reasons() -> Iterator[list[str]]:
    """The cudagraph skips Inductor warns of inside the block, each its message, in order.
    The logger is held at WARNING and kept from its parents meanwhile: a session that quiets
    `torch._inductor` (`compile.dynamo.quiet_dynamo`) still has its skips caught, not printed."""
    found: list[str] = []
    handler, logger = _Caught(found), logging.getLogger(SKIP_LOGGER)
    was = logger.level, logger.propagate
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        logger.setLevel(was[0])
        logger.propagate = was[1]
