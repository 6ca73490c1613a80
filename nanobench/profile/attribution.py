"""Where a mode's profiled steady step goes: host events in, category and kernel rows out.

What it is: arithmetic over `Event`s. Each thread's events nest by interval, an event's self time
is its duration less what its direct children cover, and each event in a steady step puts it in
one of CATEGORIES by its name and whether it lies in a FORWARD_RANGE. Each kernel or op gets a
row, with bytes and flops where its shapes say them exactly (`profile.op_cost`).
`events_from_profiler` reads torch.profiler's FunctionEvents as `Event`s.
What it is not: the profiler run (the worker), the peaks' probe, the words or the report.
Invariant: every category is in the output, "unattributed" included, and their ms sum to the mean
steady step: "unattributed" is the steady wall less every attributed self time, 0 on one
well-nested thread, negative where time is counted twice (overlapping siblings, other threads'
events alongside the main one), positive where an event runs past its step; shares sum to 1.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping

from nanobench.profile.device import device_time
from nanobench.profile.op_cost import floor_ms, op_cost
from nanobench.profile.overhead import charged_us
from nanobench.profile.rows import (
    CATEGORIES,
    FORWARD_RANGE,
    HOST_CATEGORIES,
    STEP_RANGE,
    CategoryRow,
    Event,
    KernelRow,
)

KERNEL_CATEGORIES = ("fused kernels", "extern kernels", "eager ops", "copies and allocation")
DYNAMO_ENTRY = ("Torch-Compiled Region", "Pregraph bytecode", "AOTDispatcher", "CompiledFunction")
FUSED = re.compile(r"(graph_\d+_)?(triton_|cpp_)|.*cpp_fused")
EXTERN_NAMES = frozenset(
    "aten::mm aten::addmm aten::bmm aten::baddbmm aten::convolution aten::_convolution".split()
)
EXTERN_PREFIXES = tuple(
    "aten::_scaled_dot_product_ aten::_flash_attention aten::_efficient_attention aten::mkldnn_"
    " mkldnn:: aten::_weight_int4pack_mm aten::_int_mm".split()
)
COPY_NAMES = frozenset(
    "aten::copy_ aten::empty aten::empty_strided aten::empty_like aten::_to_copy aten::to"
    " aten::clone aten::contiguous aten::zeros aten::zero_ aten::fill_ aten::resize_"
    " aten::new_empty aten::new_empty_strided aten::new_zeros aten::full".split()
)
# A driver or runtime call (a launch, a sync): part of the op that made it.
RUNTIME_CALL = re.compile(r"cuda[A-Z_]|cu[A-Z]|hip[A-Z]")
# A kernel row whose ops no pass with stacks saw (or none ran): `user_lines` says the rest.
NOT_TRACED = "none: not in the pass with stacks"
FRAME = re.compile(r"^(?P<path>.+?\.py)\((?P<line>\d+)\)")


def nest(events: list[Event]) -> list[int]:
    """Each event's parent index, -1 for none: the innermost one on its thread open at its start."""
    parent, opened = [-1] * len(events), []
    for i in sorted(range(len(events)), key=lambda j: (events[j].thread, *_order(events[j]))):
        thread, start = events[i].thread, events[i].start_us
        opened = [j for j in opened if events[j].thread == thread and events[j].end_us > start]
        parent[i] = opened[-1] if opened else -1
        opened.append(i)
    return parent


def _order(e: Event) -> tuple[float, float]:
    """Earliest first, and of two starting together the longer first: parents before children."""
    return e.start_us, -e.end_us


def self_times_us(events: list[Event], parent: list[int]) -> list[float]:
    """Duration less the union of the direct children's intervals, clipped to the event."""
    children: dict[int, list[Event]] = defaultdict(list)
    for i, p in enumerate(parent):
        if p >= 0:
            children[p].append(events[i])
    out = []
    for i, e in enumerate(events):
        covered, reach = 0.0, e.start_us
        for c in sorted(children[i], key=lambda c: c.start_us):
            lo, hi = max(c.start_us, reach), min(c.end_us, e.end_us)
            covered += max(0.0, hi - lo)
            reach = max(reach, hi)
        out.append(e.end_us - e.start_us - covered)
    return out


def category(name: str, in_forward: bool) -> str:
    """One event's category, from its name and whether it lies inside a FORWARD_RANGE."""
    if name in (FORWARD_RANGE, STEP_RANGE) or not in_forward:
        return "forward python" if name == FORWARD_RANGE else "outside the forward"
    if name == "TorchDynamo Cache Lookup":
        return "guards"
    if name.startswith(DYNAMO_ENTRY):
        return "dynamo entry"
    if name.startswith("## ") and name.endswith(" ##"):
        return "wrapper python"
    if FUSED.match(name):
        return "fused kernels"
    if name in EXTERN_NAMES or name.startswith(EXTERN_PREFIXES):
        return "extern kernels"
    return "copies and allocation" if name in COPY_NAMES else "eager ops"


def holder(ranges: list[Event]):
    """A test of whether an event lies entirely inside one of these disjoint ranges."""
    ranges = sorted(ranges, key=lambda r: r.start_us)
    starts = [r.start_us for r in ranges]

    def holds(e: Event) -> bool:
        k = bisect_right(starts, e.start_us) - 1
        return k >= 0 and e.end_us <= ranges[k].end_us

    return holds


def steady_steps(events: list[Event], steady: list[bool]) -> list[Event]:
    """The STEP_RANGE events flagged steady, by start; ValueError where there are none."""
    steps = sorted((e for e in events if e.name == STEP_RANGE), key=lambda e: e.start_us)
    if len(steps) != len(steady):
        raise ValueError(f"{len(steps)} {STEP_RANGE} ranges for {len(steady)} steps profiled")
    kept = [s for s, ok in zip(steps, steady) if ok]
    if sum(s.end_us - s.start_us for s in kept) <= 0:  # none, or none the clock saw last
        raise ValueError(f"no steady step with time among the {len(steps)} profiled: no profile")
    return kept


def owners(events: list[Event], parent: list[int], in_step, in_forward):
    """Whose self time each event's is (-1: outside the steady steps), and each owner's category.
    A runtime call (cudaLaunchKernel) is part of the op that made it: its parent's owner owns it."""
    owner, cats = [-1] * len(events), [None] * len(events)
    for i in sorted(range(len(events)), key=lambda j: _order(events[j])):
        e, p = events[i], parent[i]
        if not in_step(e):
            continue
        if RUNTIME_CALL.match(e.name) and p >= 0 and owner[p] >= 0:
            owner[i] = owner[p]
        else:
            owner[i], cats[i] = i, category(e.name, in_forward(e))
    return owner, cats


def events_per_step(events: list[Event], steady: list[bool]) -> float:
    """The events recorded inside the steady steps, ranges and runtime calls included, a step."""
    steps = steady_steps(events, steady)
    in_step = holder(steps)
    return sum(map(in_step, events)) / len(steps)


def attribute(
    events: list[Event],
    steady: list[bool],
    peaks: tuple[float, float] | None = None,
    cost: tuple[float, float] = (0.0, 0.0),
    lines: Mapping[tuple, str] | None = None,
    sources: Mapping[tuple, str] | None = None,
) -> tuple[list[CategoryRow], list[KernelRow], dict]:
    """(CategoryRows in CATEGORIES' order, KernelRows by ms a step, the step's facts). A category's
    calls are its events: for "forward python" the FORWARD_RANGEs, for "outside the forward" the
    STEP_RANGE and each op outside the forward; "unattributed" has none. `cost` is the profiler's
    (inside, outside) µs an event (`overhead.charged_us`): each category carries what it was
    charged, and each kernel's time is net of it. `lines` and `sources`: each kernel's user line
    and origin by its `group_key` (`user_lines.kernel_lines`, `generated.kernel_sources`)."""
    device = [e for e in events if e.device]
    events = [e for e in events if not e.device]
    steps = steady_steps(events, steady)
    in_step = holder(steps)
    forwards = [e for e in events if e.name == FORWARD_RANGE and in_step(e)]
    in_forward = holder(forwards)
    parent = nest(events)
    self_us = self_times_us(events, parent)
    owner, cats = owners(events, parent, in_step, in_forward)
    charge = charged_us(events, parent, owner, self_us, cost)
    owned_us = [0.0] * len(events)
    for i in (i for i, o in enumerate(owner) if o >= 0):
        owned_us[owner[i]] += self_us[i]
    on_device, device_us = device_time(events, owner, device, steps)
    attributed = [(events[i], cats[i], owned_us[i], charge[i], device_us[i])
                  for i in range(len(events)) if cats[i]]  # fmt: skip
    n = len(steps)
    step_us = sum(s.end_us - s.start_us for s in steps) / n
    forward_us = sum(f.end_us - f.start_us for f in forwards) / n
    rows = category_rows([(c, us, paid) for _, c, us, paid, _ in attributed], n, step_us)
    net = [(e, c, us - paid, dev) for e, c, us, paid, dev in attributed]
    kernels = kernel_rows(net, n, peaks, lines or {}, sources or {})
    share, ms = {r.category: r.share for r in rows}, {r.category: r.ms_per_step for r in rows}
    facts = {
        "profiled_step_ms": step_us / 1e3,
        "steps_profiled": n,
        "forward_share": forward_us / step_us,
        "host_share": sum(share[c] for c in HOST_CATEGORIES),
        "attributed_ms": sum(v for c, v in ms.items() if c != "unattributed"),
        "unattributed_ms": ms["unattributed"],
        "kernels": len(kernels),
        "fused_kernels": sum(k.kind == "fused kernels" for k in kernels),
        **on_device,
    }
    return rows, kernels, facts


def category_rows(attributed: list[tuple], n: int, step_us: float) -> list[CategoryRow]:
    """One row per category from (category, self µs, profiler µs charged) per owner, zeros
    kept; "unattributed" the step's wall less the rest."""
    total_us, paid_us = dict.fromkeys(CATEGORIES, 0.0), dict.fromkeys(CATEGORIES, 0.0)
    calls = dict.fromkeys(CATEGORIES, 0)
    for cat, us, paid in attributed:
        total_us[cat] += us
        paid_us[cat] += paid
        calls[cat] += 1
    total_us["unattributed"] = round(step_us * n - sum(total_us.values()), 6)  # to the ps
    return [
        CategoryRow(category=c, ms_per_step=total_us[c] / n / 1e3,
                    share=total_us[c] / n / step_us, calls_per_step=calls[c] / n,
                    profiler_ms_per_step=paid_us[c] / n / 1e3)
        for c in CATEGORIES
    ]  # fmt: skip


def group_key(e: Event) -> tuple:
    """The kernel row an event's time goes to: a fused kernel's name, another op's name, shapes
    and dtypes (one op on two shapes is two kernels)."""
    return (e.name,) if FUSED.match(e.name) else (e.name, e.shapes, e.dtypes)


def kernel_rows(attributed: list[tuple], n: int, peaks: tuple[float, float] | None,
                lines: Mapping[tuple, str], sources: Mapping[tuple, str]):  # fmt: skip
    """One row per fused kernel name, and per (name, shapes, dtypes) for the other ops; each
    with its origin from `sources` (else its first event's frame) and its user line from
    `lines`, or why it has none."""
    groups: dict[tuple, tuple] = {}
    for e, cat, us, dev in attributed:
        if cat not in KERNEL_CATEGORIES:
            continue
        key = group_key(e)
        first, _, count, total_us, source, dev_us = groups.get(key, (e, cat, 0, 0.0, "", 0.0))
        source = source or sources.get(key) or (e.stack[0] if e.stack else "")
        groups[key] = (first, cat, count + 1, total_us + us, source, dev_us + dev)
    # on a GPU a floor is held to device time: an op that put none on the device gets none
    on_gpu = any(g[5] for g in groups.values())
    rows = [_kernel_row(*g, n, None if on_gpu and not g[5] else peaks, lines.get(k, NOT_TRACED))
            for k, g in groups.items()]  # fmt: skip
    return sorted(rows, key=lambda r: (-r.ms_per_step, r.name))


def _kernel_row(e: Event, kind: str, count: int, us: float, source: str, dev_us: float, n: int,
                peaks, user_line: str):  # fmt: skip
    """A group's row: per-step time and calls, its bytes and flops, rates and floor; on a GPU its
    device time, which its rates and floor are then held to (the host's op time is a launch)."""
    calls, ms = count / n, us / n / 1e3
    device_ms = dev_us / n / 1e3 if dev_us else None
    ms = device_ms if device_ms is not None else ms
    nbytes, flops = op_cost(e.name, e.shapes, e.dtypes) if kind != "fused kernels" else (None,) * 2
    call_ms = ms / calls
    row = {"name": e.name, "kind": kind, "calls_per_step": calls, "ms_per_step": us / n / 1e3}
    row["device_ms_per_step"] = device_ms
    row |= {"bytes": nbytes, "flops": flops, "source": source, "user_line": user_line}
    row["gbs"] = nbytes / call_ms / 1e6 if nbytes is not None and call_ms > 0 else None
    row["gflops"] = flops / call_ms / 1e6 if flops is not None and call_ms > 0 else None
    row["floor_ms"] = floor_ms(calls, nbytes, flops, *peaks) if peaks else None
    row["floor_ratio"] = ms / row["floor_ms"] if row["floor_ms"] else None
    return KernelRow(**row)


def user_frames(frames) -> tuple[str, ...]:
    """ "file.py:line" for each frame "path/file.py(line): fn" not under torch/ or site-packages."""
    out = []
    for found in filter(None, map(FRAME.match, frames)):
        path = found["path"].replace(os.sep, "/")
        if not (path.startswith("torch/") or "/torch/" in path or "-packages/" in path):
            out.append(f"{os.path.basename(path)}:{found['line']}")
    return tuple(out)


def _python_parents(e) -> list[str]:
    """e's Python-function ancestors, innermost first (with_stack=True): each named by the line
    its frame was entered at, its function's first, not the line of the call."""
    names = []
    while (e := e.cpu_parent) is not None:
        names += [e.name] if getattr(e, "is_python_function", False) else []
    return names


def _tuples(value):
    """A shape as nested tuples (a tensor list's shapes are a list of lists)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def events_from_profiler(prof_events, frames: Mapping[int, str] | None = None) -> list[Event]:
    """Host ops and ranges as `Event`s; Python frames (with_stack=True records them as events,
    not in `e.stack`) dropped as events and kept as each op's `stack`, or `e.stack` where set;
    where `frames` names an op's call site by its id ("file.py:line", `user_lines.call_sites`),
    that one frame is its stack: the line of the call, not its function's first."""
    from torch.autograd import DeviceType

    out = []
    for e in prof_events:
        on_device = e.device_type in (DeviceType.CUDA, DeviceType.PrivateUse1)
        if getattr(e, "is_python_function", False) or not (
            on_device or e.device_type == DeviceType.CPU
        ):
            continue
        stack = () if on_device else user_frames(e.stack or _python_parents(e))
        stack = (frames[e.id],) if frames and e.id in frames and not on_device else stack
        shapes = _tuples(e.input_shapes or ())
        dtypes = tuple(getattr(e, "input_dtypes", None) or getattr(e, "input_types", None) or ())
        span = e.time_range.start, e.time_range.end
        out.append(Event(e.name, *span, e.thread, shapes, dtypes, stack, on_device, e.id))
    return out
