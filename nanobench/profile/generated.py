"""Where a profiled kernel comes from: Inductor's generated modules, read as text.

What it is: `generated_sources()` (the source of every module Inductor generated and loaded in
this process, by file name), `defined_kernels(texts)` (each kernel a generated module defines,
with the FX nodes of the call that runs it, from the module's own "Source Nodes" comment) and
`kernel_sources(events, texts)` (a kernel row's origin, by its key: a fused kernel's FX nodes;
an op's first frame, the FX nodes above that line when the frame is generated code, else the
user's file:line).
What it is not: timing or attribution (`profile.attribution`).
Invariant: an origin is read from the generated code or the op's own stack, never guessed from
its name; a kernel the profiler saw but no module defines keeps no origin.
"""

from __future__ import annotations

import re
from pathlib import Path

from nanobench.profile.attribution import group_key

DEFINED = re.compile(r"^(\w+) = async_compile\.(?:cpp_pybinding|cpp|triton)\(", re.M)
NODES = re.compile(r"#\s*(?:Topologically Sorted )?Source Nodes: \[([^\]]*)\]")
CALL = re.compile(r"^\s+(?:extern_kernels\.\w+|\w*(?:cpp|triton)_\w+(?:\.run)?)\(")
GRAPH_PREFIX = re.compile(r"^graph_\d+_")  # Inductor's kernel profile names: graph_<id>_<kernel>


def generated_sources() -> dict[str, str]:
    """Every module Inductor generated and loaded here, by its file's name."""
    from torch._inductor.codecache import PyCodeCache

    found = {}
    for module in list(PyCodeCache.modules):
        path = getattr(module, "__file__", None)
        if path and Path(path).is_file():
            found[Path(path).name] = Path(path).read_text()
    return found


def is_call(line: str) -> bool:
    """A line of a generated `call()` that runs a kernel: its own or an extern one."""
    return bool(CALL.match(line))


def nodes_above(lines: list[str], index: int) -> str:
    """The FX nodes of the "Source Nodes" comment above line `index` (0-based), back to the
    previous kernel call: a comment above an earlier call is that call's, not this one's."""
    for line in reversed(lines[:index]):
        found = NODES.search(line)
        if found:
            return "nodes: " + found.group(1)
        if is_call(line):
            return ""
    return ""


def defined_kernels(texts: dict[str, str]) -> dict[str, str]:
    """Each kernel the modules define, with the FX nodes of the call that runs it."""
    kernels = {}
    for text in texts.values():
        lines = text.splitlines()
        for name in DEFINED.findall(text):
            call = next(
                (i for i, line in enumerate(lines) if line.strip().startswith(f"{name}(")), None
            )
            kernels[name] = nodes_above(lines, call) if call is not None else ""
    return kernels


def frame_source(frame: str, texts: dict[str, str]) -> str:
    """A stack frame "file.py:line" as an origin: generated code names its FX nodes."""
    file, _, line = frame.rpartition(":")
    if file in texts and line.isdigit():
        return nodes_above(texts[file].splitlines(), int(line) - 1) or frame
    return frame


def kernel_sources(events: list, texts: dict[str, str]) -> dict[tuple, str]:
    """Each kernel row's origin by its key (`attribution.group_key`: an op on other shapes is
    another row, maybe from another line): a fused kernel's FX nodes, an op's first frame (or
    the generated call's FX nodes); the first event of a key that names one."""
    defined = defined_kernels(texts)
    found: dict[tuple, str] = {}
    for e in events:
        key, bare = group_key(e), GRAPH_PREFIX.sub("", e.name)
        if key in found:
            continue
        if bare in defined:
            found[key] = defined[bare]
        elif e.stack:
            found[key] = frame_source(e.stack[0], texts)
    return found
