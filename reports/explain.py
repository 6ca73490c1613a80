"""Terminal tables for `nanobench explain`: one row per depth, then the break reasons.

What it is: `render_explain`, over `nanobench.harness.dynamo_explain.ExplainRow`s (their fields are the JSON's).
What it is not: explaining; nothing here runs dynamo.
Invariant: dynamo's counts print as dynamo gave them; a disagreement is flagged, not fixed.
"""

from __future__ import annotations

from rich.table import Table

from reports.style import gate_mark


def render_explain(console, rows: list, verdict: str, gates) -> None:
    table = Table(title="one decode forward, torch._dynamo.explain")
    for col in ("layers", "path", "graphs", "breaks", "counted", "ops", "guards", "value guards"):
        table.add_column(col, justify="right")
    for r in rows:
        counted = str(r.counted_breaks) + ("" if r.breaks_agree else " (!)")
        table.add_row(
            "-" if r.layers is None else str(r.layers),
            r.path,
            str(r.graphs),
            str(r.graph_breaks),
            counted,
            str(r.ops),
            str(r.guards),
            str(r.value_guards),
        )
    console.print(table)
    if any(not r.breaks_agree for r in rows):
        console.print(
            "(!) dynamo's graph_break_count is graphs - 1; the counted, deduplicated break "
            "reasons disagree with it"
        )
    if len(rows) > 1:
        console.print(f"break scaling: {verdict}")
    last = rows[-1]
    at = last.path if last.layers is None else f"{last.layers} layers"
    if last.target:
        console.print(f"target: {last.target}", markup=False)
    if last.break_reasons:
        reasons = Table(title=f"break reasons at {at}")
        for col in ("count", "reason", "frame", "source"):
            reasons.add_column(col)
        for b in last.break_reasons:
            reasons.add_row(str(b["count"]), b["reason"], b["frame"], b["source"])
        console.print(reasons)
    if last.value_guard_text:
        console.print(
            "guards on Python values (each one is a rebuild on every step that changes it):"
        )
        for text in last.value_guard_text[:8]:
            console.print(f"  {text}", markup=False)
    for remedy in last.remedies or ():
        console.print(f"remedy {remedy}", markup=False)
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)
