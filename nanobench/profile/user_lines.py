"""The user's line behind each profiled kernel or op: where in the user's own code it was called.

What it is: `CallLines` (a torch-function mode that only passes each call on: pushed around an
eager pass with stacks, it makes an operator or a subscript on a user's line a Python call the
profiler sees, made from that line), `call_sites(prof)` (each op's innermost frame outside the
libraries, at the line it was running: read off the profiler's Python call tree, where a call's
`caller` frame carries the line of the call and its event's name only its function's first line),
`enable_provenance()` and `provenance()` (Inductor's record of the FX nodes each generated kernel
and extern call came from, with their user stack traces, `node.meta["stack_trace"]`) and
`kernel_lines(ops, sites, texts, graphs)` (each kernel row's key, `attribution.group_key`, to its
user lines, "file.py:31,32", or why it has none, a sentence starting "none: ", over the ops inside
a forward, `forward_ops`).

Why Inductor's provenance tracking (`config.trace.provenance_tracking_level = 1`) and not its
generated code's comments, on torch 2.13: the wrapper's "Topologically Sorted Source Nodes"
comment names FX nodes without a file or a line, and only above Triton kernels and extern calls,
never above a C++ kernel; the "# File: ...:line in forward" annotations are in FX's own printed
graphs, not in the module that runs. Provenance tracking writes `# [Provenance debug handles]
name:handle` above every kernel and extern call the wrapper makes, and keeps each handle's FX
nodes' stack traces in dynamo's compilation metrics (`inductor_provenance`), on a fresh compile
and on an FX-cache hit alike (`codecache.FxGraphCache`). The cache key holds the level and the
graph's code, whose comments name the user's lines, so a hit carries its own graph's lines. It
changes the wrapper's comments only, not a kernel; it is set in every worker of a profiled mode.
What it is not: the timing, the attribution (`profile.attribution`) or the FX node names that
`profile.generated` reads for the `source` column.
Invariant: a line is read from a record (the profiler's call tree, Inductor's provenance), never
guessed from a kernel's name; a kernel or op with no user line says why instead.
"""

from __future__ import annotations

import json
import os
import re
import sysconfig
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from torch.overrides import TorchFunctionMode

from nanobench.profile.attribution import FUSED, group_key, holder
from nanobench.profile.generated import GRAPH_PREFIX
from nanobench.profile.rows import FORWARD_RANGE, STEP_RANGE, Event

# Why a kernel or op names no user line. Each starts "none: ", so a reader tells it from a line.
NO_NODE = "none: no FX node, Inductor's own"  # an allocation or copy the wrapper makes itself
NO_TRACE = "none: its FX nodes have no stack"
NO_PROVENANCE = "none: no provenance for its graph"
LIBRARY = "none: a library call, no user frame"
NO_STACK = "none: no Python stack recorded"
UNRECORDED = "none: an operator in {fn}() ({file}:{line} def), lines in off only"
HANDLE = re.compile(r"^\s*#\s*\[Provenance debug handles\]\s*(\S+):(\d+)\s*$")
TRACE_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in ')
METRICS_KEPT = 4096  # compiled frames whose provenance dynamo keeps (its default keeps 64)
OWN = str(Path(__file__).resolve().parents[1]) + os.sep  # nanobench/: the harness, not the step


@lru_cache(maxsize=4096)
def is_library(path: str) -> bool:
    """A frame of torch, an installed package, Python's own library, nanobench's harness (its
    ranges and `CallLines`), or code with no file ("<frozen ...>", FX's "<eval_with_key>")."""
    if not path or path.startswith("<"):
        return True
    full = os.path.abspath(path)
    if "-packages" + os.sep in full or full.startswith(OWN):
        return True
    return f"{os.sep}torch{os.sep}" in full or full.startswith(sysconfig.get_paths()["stdlib"])


@dataclass(frozen=True)
class Site:
    """Where an op was called from: the innermost frame outside the libraries ("" none)."""

    path: str = ""
    line: int = 0
    function: str = ""
    called: bool = True  # False: the op ran in this frame itself, `line` its function's first

    @property
    def frame(self) -> str:
        return f"{os.path.basename(self.path)}:{self.line}"


class CallLines(TorchFunctionMode):
    """Passes every torch call on unchanged: its only effect is a Python frame per call, whose
    caller is the user's line, for an op the user's code reaches with no call of its own
    (`x[i] = y`, `a + b`). Eager only: dynamo guards on the mode stack, so under it a compiled
    mode would build again."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def site_of(op, py_call, py_c_call) -> Site:
    """An op's call site, walking its Python ancestors outwards: the first whose caller is not a
    library's is the call the user's line made; a user's own function met first ran the op
    itself, on a line the profiler did not record."""
    p = op.parent
    while p is not None:
        if p.tag == py_call:
            here = p.extra_fields.callsite
            if not is_library(here.file_name):
                return Site(here.file_name, here.line_number, here.function_name, called=False)
        if p.tag in (py_call, py_c_call):
            caller = p.extra_fields.caller
            if not is_library(caller.file_name):
                return Site(caller.file_name, caller.line_number, caller.function_name)
        p = p.parent
    return Site()


def call_sites(prof) -> dict[int, Site]:
    """Each op's call site by its correlation id (a `FunctionEvent`'s id), from a profile taken
    with `with_stack=True`."""
    from torch._C._profiler import _EventType

    found, todo = {}, list(prof.profiler.kineto_results.experimental_event_tree())
    while todo:
        e = todo.pop()
        todo.extend(e.children)
        if e.tag == _EventType.TorchOp:
            found[e.correlation_id] = site_of(e, _EventType.PyCall, _EventType.PyCCall)
    return found


def enable_provenance() -> None:
    """Inductor's provenance tracking on for what this process compiles from now (where this
    torch has it; a level the user set is kept), and dynamo's metrics kept for every frame."""
    import torch._inductor.config as inductor
    from torch._dynamo import utils

    if getattr(inductor.trace, "provenance_tracking_level", None) == 0:
        inductor.trace.provenance_tracking_level = 1
    if hasattr(utils, "set_compilation_metrics_limit"):
        utils.set_compilation_metrics_limit(METRICS_KEPT)


def provenance() -> list[dict[str, list[str]]]:
    """Each compiled graph's provenance: "name:handle" -> its FX nodes' user stack traces."""
    from torch._dynamo.utils import get_compilation_metrics

    return [
        json.loads(text)
        for m in get_compilation_metrics()
        for text in sorted(getattr(m, "inductor_provenance", None) or ())
    ]


@dataclass(frozen=True)
class Generated:
    """Inductor's generated modules as provenance reads them, by file name."""

    texts: dict[str, str]
    handles: dict[str, dict[int, str]]  # file -> a call's line (1-based) -> its "name:handle"
    traces: dict[str, dict[str, list[str]]]  # file -> "name:handle" -> its FX nodes' traces

    @classmethod
    def of(cls, texts: dict[str, str], graphs: list[dict]) -> Generated:
        handles = {file: calls_handled(text) for file, text in texts.items()}
        traces = {file: merged(set(h.values()), graphs) for file, h in handles.items()}
        return cls(texts, handles, traces)

    def kernel(self, name: str) -> list[tuple[str, str]]:
        """(file, "name:handle") of every call of a fused kernel by its profiled name; where a
        graph prefix names it, the modules whose code records that very name."""
        bare = GRAPH_PREFIX.sub("", name)
        calls = [(f, key) for f, found in self.handles.items() for key in found.values()
                 if key.rpartition(":")[0] == bare]  # fmt: skip
        exact = [(f, key) for f, key in calls if name in self.texts[f]]
        return exact if name != bare and exact else calls

    def lines(self, file: str, key: str) -> set[tuple[str, int]] | str:
        """The user lines of one call's FX nodes (each trace's innermost user frame), or why
        none."""
        traces = self.traces[file].get(key)
        if traces is None:
            return NO_PROVENANCE
        found = {innermost_user(t) for t in traces} - {None}
        return found or (LIBRARY if traces else NO_TRACE)


def calls_handled(text: str) -> dict[int, str]:
    """Each call's line (1-based) and the provenance handle in the comments right above it."""
    found, pending = {}, None
    for i, line in enumerate(text.splitlines(), 1):
        if (m := HANDLE.match(line)) is not None:
            pending = f"{m.group(1)}:{m.group(2)}"
        elif not line.lstrip().startswith("#"):
            if pending is not None:
                found[i] = pending
            pending = None
    return found


def merged(keys: set[str], graphs: list[dict]) -> dict[str, list[str]]:
    """One module's handles' traces: from every graph whose provenance holds all its handles
    (two graphs that generated the same module both run it: their lines are both its)."""
    out: dict[str, list[str]] = defaultdict(list)
    for graph in graphs:
        if keys and keys <= set(graph):
            for key in keys:
                out[key] += [t for t in graph[key] if t not in out[key]]
    return dict(out)


def innermost_user(trace: str) -> tuple[str, int] | None:
    """A stack trace's innermost frame outside the libraries, as (file name, line)."""
    for path, line in reversed(TRACE_FRAME.findall(trace)):
        if not is_library(path):
            return os.path.basename(path), int(line)
    return None


def worded(lines: set[tuple[str, int]]) -> str:
    """{("gptfast.py", 32), ("gptfast.py", 31)} -> "gptfast.py:31,32"; files apart by "; "."""
    by_file: dict[str, list[str]] = defaultdict(list)
    for file, line in sorted(lines):
        by_file[file].append(str(line))
    return "; ".join(f"{file}:{','.join(found)}" for file, found in by_file.items())


def lines_of(e: Event, site: Site | None, generated: Generated) -> set[tuple[str, int]] | str:
    """One op's or kernel's user lines, or why none: a fused kernel by its name's calls in the
    generated modules; anything else by its call site, through the handle above the call
    where that site is a generated module's line."""
    if FUSED.match(e.name) and (calls := generated.kernel(e.name)):
        found = [generated.lines(f, key) for f, key in calls]
        lines = set().union(*(x for x in found if isinstance(x, set)))
        return lines or min(x for x in found if isinstance(x, str))
    if site is None:
        return NO_STACK
    if not site.path:
        return LIBRARY
    file = os.path.basename(site.path)
    if file in generated.handles:
        key = generated.handles[file].get(site.line)
        if key is None:  # no handle in the whole module: it was built without provenance
            return NO_NODE if generated.handles[file] else NO_PROVENANCE
        return generated.lines(file, key)
    if not site.called:
        return UNRECORDED.format(fn=site.function, file=file, line=site.line)
    return {(file, site.line)}


def forward_ops(events: list[Event]) -> list[Event]:
    """The host ops inside a forward: what a kernel row is made of (`attribution.category`)."""
    inside = holder([e for e in events if e.name == FORWARD_RANGE])
    ranges = (FORWARD_RANGE, STEP_RANGE)
    return [e for e in events if not e.device and e.name not in ranges and inside(e)]


def kernel_lines(ops: list[Event], sites: dict[int, Site], texts: dict[str, str],
                 graphs: list[dict]) -> dict[tuple, str]:  # fmt: skip
    """Each kernel row's key (`attribution.group_key`) to the user lines of its ops (of a pass
    with stacks, `forward_ops`), or, where none of them has one, why."""
    generated = Generated.of(texts, graphs)
    lines: dict[tuple, set] = defaultdict(set)
    why: dict[tuple, set] = defaultdict(set)
    seen: dict[tuple, set | str] = {}  # a step repeats its ops: each (name, site) read once
    for e in ops:
        site = sites.get(e.correlation)
        if (e.name, site) not in seen:
            seen[e.name, site] = lines_of(e, site, generated)
        found = seen[e.name, site]
        if isinstance(found, set):
            lines[group_key(e)] |= found
        else:
            why[group_key(e)].add(found)
    keys = set(lines) | set(why)
    return {k: worded(lines[k]) if lines[k] else "; ".join(sorted(why[k])) for k in keys}
