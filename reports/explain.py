"""Terminal tables for `nanobench explain`: one row per depth, then the break reasons; with a
before side, the before / after / change table and what is gone and new.

What it is: `render_explain`, over `nanobench.harness.step.dynamo_explain.ExplainRow`s (their fields
are the JSON's), and `render_before_after`, over (member, before row, after row) pairs, their
count `Change`s (read by attribute) and the one-side-only break reasons and value guards.
What it is not: explaining or comparing; nothing here runs dynamo or subtracts a count.
Invariant: dynamo's counts print as dynamo gave them, under the names every command uses
(graphs, breaks, break sites, hits: docs/measuring.md, "The counts"); a change prints as the
`Change` says it.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from reports.style import gate_mark, note_lines

BEFORE_AFTER = {
    "graphs": "graphs",
    "breaks": "graph_breaks",
    "break_sites": "break_sites",
    "ops": "ops",
    "guards": "guards",
    "value_guards": "value_guards",
}


def render_explain(console, rows: list, verdict: str, gates, outputs: dict | None = None) -> None:
    targets = sorted({r.target for r in rows if r.target})
    named = f": {', '.join(targets)}" if targets else ""
    table = Table(title=f"one decode forward, torch._dynamo.explain{named}")
    for col in (
        "layers",
        "path",
        "graphs",
        "breaks",
        "break sites",
        "ops",
        "guards",
        "value guards",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            "-" if r.layers is None else str(r.layers),
            r.path,
            str(r.graphs),
            str(r.graph_breaks),
            str(r.break_sites),
            str(r.ops),
            str(r.guards),
            str(r.value_guards),
        )
    console.print(table)
    console.print(
        "graphs: built for one call; breaks: graphs - 1 (dynamo's count); break sites: source "
        "lines a break stopped a graph at; hits: times one call passed a site"
    )
    if len(rows) > 1:
        console.print(f"break scaling: {verdict}")
    last = rows[-1]
    at = last.path if last.layers is None else f"{last.layers} layers"
    if last.target:
        console.print(f"target: {last.target}", markup=False)
    if last.break_reasons:
        reasons = Table(title=f"break sites at {at}")
        for col in ("hits", "reason", "frame", "source"):
            reasons.add_column(col)
        for b in last.break_reasons:
            reasons.add_row(str(b["hits"]), b["reason"], b["frame"], b["source"])
        console.print(reasons)
    if last.value_guard_text:
        console.print(
            "guards on Python values (each one is a rebuild on every step that changes it):"
        )
        for text in (getattr(last, "value_guard_named", None) or last.value_guard_text)[:8]:
            console.print(f"  {text}", markup=False)
    for remedy in last.remedies or ():
        console.print(note_lines(f"remedy {remedy}"), markup=False)
    _print_gates(console, gates, outputs)


def _print_gates(console, gates, outputs: dict | None) -> None:
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)
    for path in (outputs or {}).values():
        console.print(f"wrote {Path(path).name}: {path}", markup=False)


def render_before_after(
    console, before: str, after: str, pairs, changes, found: dict, gates, outputs
) -> None:
    """Per member: before, after and change in each count; then the breaks and value guards
    on one side only, each break with its reason and source line."""
    for member, b, a in pairs:
        title = f"before {before} / after {after}, torch._dynamo.explain"
        table = Table(title=title if len(pairs) == 1 else f"{member}: {title}")
        table.add_column("side")
        for column in BEFORE_AFTER:
            table.add_column(column.replace("_", " "), justify="right")
        table.add_row("before", *(str(getattr(b, f)) for f in BEFORE_AFTER.values()))
        table.add_row("after", *(str(getattr(a, f)) for f in BEFORE_AFTER.values()))
        mine = {c.column: c for c in changes if c.member == member}
        table.add_row("change", *(_change(mine[c]) for c in BEFORE_AFTER))
        console.print(table)
    for key, what in (("breaks_gone", "breaks gone"), ("breaks_new", "breaks new")):
        rows = found[key]
        if not rows:
            console.print(f"{what}: none", markup=False)
            continue
        table = Table(title=what)
        for col in ("member", "hits", "reason", "source"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["member"], str(r["hits"]), r["reason"], r["source"])
        console.print(table)
    for key, what in (("value_guards_gone", "value guards gone"),
                      ("value_guards_new", "value guards new")):  # fmt: skip
        rows = found[key]
        console.print(f"{what}: {'none' if not rows else len(rows)}", markup=False)
        for r in rows:
            console.print(f"  {r['member']}: {r['guard']}", markup=False)
    _print_gates(console, gates, outputs)


def _change(c) -> str:
    """after - before and its verdict: "-1 fewer", "+0 same"."""
    return f"{c.verdict}" if c.change is None else f"{c.change:+d} {c.verdict}"


def draw_explain(rows: list, path: Path, title: str) -> Path:
    """explain.png: per explained forward (a depth, a path or a target's step, each side under
    --vs), its graphs and breaks as dynamo counted them, and the guards on Python values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.csvio import save_figure

    names = [_name(r) for r in rows]
    x = range(len(rows))
    fig, (counts, guards) = plt.subplots(1, 2, figsize=(11, 4.5))
    width = 0.4
    counts.bar([i - width / 2 for i in x], [r.graphs for r in rows], width, label="graphs")
    counts.bar([i + width / 2 for i in x], [r.graph_breaks for r in rows], width, label="breaks")
    counts.set_title("graphs and breaks of one forward (dynamo)")
    guards.bar(list(x), [r.value_guards for r in rows], 0.6, color="tab:red")
    guards.set_title("guards on Python values")
    for ax in (counts, guards):
        ax.set_xticks(list(x), names, rotation=30 if len(rows) > 3 else 0, ha="right")
    counts.legend()
    fig.suptitle(title, wrap=True)
    fig.tight_layout()
    return save_figure(fig, path)


def _name(r) -> str:
    """'2 layers', 'target step 3', 'before 2 layers': a forward's x-axis label."""
    what = f"{r.layers} layers" if r.layers is not None else r.path
    return f"{r.side} {what}".strip()
