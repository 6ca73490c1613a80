"""One call traced by dynamo as `torch._dynamo.explain` traces it, each graph's runs counted.

What it is: `trace_call(fn, *args, **kwargs)` returns a `Traced` with the fields of dynamo's
`ExplainOutput` (graphs, graph_count, graph_break_count = graphs - 1, break_reasons, op_count,
out_guards) plus `runs`: how often the call ran each graph. explain's own backend returns the
graph's forward untouched, so it cannot say that one break line both layers reach is passed
twice per call: a graph is built once and run once per layer. `hits(traced)` puts that number on
each break site. `recompile_reasons_in(metrics)` and `fell_back_in(metrics)` read dynamo's
compilation metrics the one way compile's ledger and explain's dry run both read them.
What it is not: a compile (the backend runs the traced graph as is) or a timing: the counting
wrapper costs a Python call per graph run, so nothing here is ever timed.
Invariant: graph_count, graph_break_count, op_count, break_reasons and out_guards equal what
`torch._dynamo.explain` reports for the same call (tests/test_counts.py holds them against it);
`runs` has one entry per graph, in build order.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field

import torch


@dataclass
class Traced:
    """dynamo's account of one call, and how many times that call ran each graph it built."""

    graphs: list = field(default_factory=list)
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    out_guards: list = field(default_factory=list)
    runs: list[int] = field(default_factory=list)  # runs[i]: times the call ran graphs[i]
    ends_in_break: list[bool] = field(default_factory=list)  # graphs[i] stopped at a break

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        """dynamo's definition (`explain`): graphs - 1, whatever the reasons say."""
        return self.graph_count - 1


def _counting_backend(traced: Traced):
    def backend(gm: torch.fx.GraphModule, example_inputs):
        index = len(traced.graphs)
        traced.graphs.append(gm)
        traced.op_count += sum(1 for n in gm.graph.nodes if n.op == "call_function")
        reason = gm.compile_subgraph_reason
        traced.ends_in_break.append(bool(reason.graph_break))
        if reason.graph_break:
            traced.break_reasons.append(reason)
        traced.runs.append(0)

        def run(*args):
            traced.runs[index] += 1
            return gm.forward(*args)

        return run

    return backend


def trace_call(fn, *args, **kwargs) -> Traced:
    """Trace and run `fn(*args, **kwargs)` once from a reset dynamo, as `explain` does."""
    traced = Traced()
    torch._dynamo.reset()
    try:
        optimized = torch._dynamo.optimize(
            _counting_backend(traced),
            nopython=False,
            guard_export_fn=traced.out_guards.extend,
        )(fn)
        optimized(*args, **kwargs)
    finally:
        torch._dynamo.reset()
    return traced


def site_of(reason) -> tuple[str, str, str]:
    """(first line of the reason, file:line, source line) of a break: where a user edits."""
    frame = reason.user_stack[-1] if reason.user_stack else None
    where = f"{frame.filename}:{frame.lineno}" if frame else "?"
    source = (
        (frame.line or linecache.getline(frame.filename, frame.lineno)).strip() if frame else ""
    )
    return reason.reason.splitlines()[0].strip(), where, source


def hits(traced: Traced) -> dict[tuple[str, str, str], int]:
    """Per break site: the times one call passed it (the runs of every graph that ends there)."""
    found: dict[tuple[str, str, str], int] = {}
    reasons = iter(traced.break_reasons)
    for ends, runs in zip(traced.ends_in_break, traced.runs):
        if ends:
            site = site_of(next(reasons))
            found[site] = found.get(site, 0) + runs
    return found


def recompile_reasons_in(metrics) -> list[str]:
    """dynamo's recompile reasons, whole, from its compilation metrics (a remedy reads the user
    stack they carry)."""
    return [m.recompile_reason for m in metrics if m.recompile_reason]


def fell_back_in(metrics) -> bool:
    """Whether a frame went past dynamo's recompile limit (it runs eager from then on)."""
    return any("recompile limit" in (m.fail_reason or "") for m in metrics)
