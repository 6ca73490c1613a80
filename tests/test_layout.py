"""The house's floors, read from the source: no import cycle anywhere, and imports run down.

The graph is every `import` of every module of nanobench, engine, kernels and reports, at the top
or inside a function (a lazy import still ties two modules), so a cycle or an upward import that
hides behind a function-level import shows here. This is how the layout's promises are measured:
0 cycles, 0 imports against the floors, at most 8 modules directly in nanobench/.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("nanobench", "engine", "kernels", "reports")
COMMANDS = (
    "explain",
    "compile",
    "buckets",
    "capture",
    "pool_budget",
    "decode",
    "startup",
    "sweep",
)
# What sits under the commands: each of these may import only its own floor and below.
LOWER = ("harness", "memory", "cost")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for top in TOPS for p in (ROOT / top).rglob("*.py")}


def imports_of(path: Path, known: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found & known


def graph() -> dict[str, set[str]]:
    files = modules()
    known = set(files)
    return {name: imports_of(path, known) - {name} for name, path in files.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def upward(g: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import against the floors."""
    found = set()
    for m, targets in g.items():
        top, _, rest = m.partition(".")
        sub = rest.split(".")[0] if top == "nanobench" else ""
        for t in targets:
            ttop, _, trest = t.partition(".")
            tsub = trest.split(".")[0] if ttop == "nanobench" else ""
            if top == "reports" and ttop in ("nanobench", "engine"):
                found.add((m, t))
            if top == "engine" and ttop == "nanobench":
                found.add((m, t))
            if top == "kernels" and ttop in ("nanobench", "engine", "reports"):
                found.add((m, t))
            if sub in LOWER and tsub in COMMANDS:
                found.add((m, t))
            if sub == "cost" and tsub in ("harness", "memory"):
                found.add((m, t))
            if sub in COMMANDS + LOWER and t in ("nanobench.cli", "nanobench.commands"):
                if not (sub == "sweep" and t == "nanobench.commands"):  # sweep reads the registry
                    found.add((m, t))
    return found


def test_no_import_cycle_anywhere():
    assert cycles(graph()) == []


def test_no_import_runs_against_the_floors():
    assert sorted(upward(graph())) == []


def test_the_checks_see_a_cycle_and_an_upward_import():
    g = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert cycles(g) == [["a", "b"]]
    g = {"reports.x": {"nanobench.harness.rows"}, "nanobench.harness.rows": set()}
    assert upward(g) == {("reports.x", "nanobench.harness.rows")}
    g = {"nanobench.harness.x": {"nanobench.compile.bench"}, "nanobench.compile.bench": set()}
    assert upward(g) == {("nanobench.harness.x", "nanobench.compile.bench")}


def test_few_modules_sit_directly_in_nanobench():
    direct = sorted(p.name for p in (ROOT / "nanobench").glob("*.py"))
    assert len(direct) <= 8, direct


def test_no_function_in_compile_or_decode_runs_past_60_lines():
    """A command's pieces stay small: only the Typer signature (`*_command`) may run long."""
    long = []
    for package in ("compile", "decode"):
        for path in sorted((ROOT / "nanobench" / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and not node.name.endswith("_command"):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 60:
                        long.append(f"{path.name}:{node.name} {lines} lines")
    assert not long, long
