"""The house's floors, read from the source: no import cycle anywhere, and imports run down.

The graph is every `import` of every module of nanobench, engine, kernels and reports, at the top
or inside a function (a lazy import still ties two modules), so a cycle or an upward import that
hides behind a function-level import shows here. This is how the layout's promises are measured:
0 cycles, 0 imports against the floors, at most 8 modules directly in nanobench/, and no function
in those packages past 60 lines (a Triton kernel and a Typer command's option list not counted).
"""

from __future__ import annotations

import ast
from pathlib import Path

from nanobench.cli import COMPARE, HISTORY
from nanobench.commands import COMMANDS as REGISTERED
from nanobench.sweep.command import SWEEP

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("nanobench", "engine", "kernels", "reports")
# Every command's package, as the CLI registers them: nanobench/commands.py's one list, and the
# three cli.py registers itself (sweep, compare, history).
COMMANDS = tuple(c.name.replace("-", "_") for c in (*REGISTERED, SWEEP, COMPARE, HISTORY))
# What sits under the commands: each of these may import only its own floor and below.
LOWER = ("harness", "memory", "cost")
# A function's lines, `def` to its last line, decorators not counted.
LONGEST = 60


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
                # sweep and compare read the registry
                if not (sub in ("sweep", "compare") and t == "nanobench.commands"):
                    found.add((m, t))
    return found


def test_no_import_cycle_anywhere():
    assert cycles(graph()) == []


def test_no_import_runs_against_the_floors():
    assert sorted(upward(graph())) == []


# harness's sub-packages, bottom up: a package imports only those before it (errors first).
HARNESS_FLOORS = (("errors",), ("statistics", "step"), ("cli",), ("workers",), ("runs",))


def harness_floor(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["nanobench", "harness"] or len(parts) < 3:
        return None
    return next(i for i, names in enumerate(HARNESS_FLOORS) if parts[2] in names)


def harness_upward(g: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import from one harness sub-package into one on its floor or above."""
    found = set()
    for m, targets in g.items():
        mine = harness_floor(m)
        for t in targets:
            theirs = harness_floor(t)
            same = t.split(".")[2:3] == m.split(".")[2:3]
            if mine is not None and theirs is not None and not same and theirs >= mine:
                found.add((m, t))
    return found


def test_harness_sub_packages_import_down_their_floors():
    assert sorted(harness_upward(graph())) == []
    every = {p.parent.name for p in (ROOT / "nanobench" / "harness").glob("*/__init__.py")}
    assert every == {n for names in HARNESS_FLOORS for n in names} - {"errors"}


def test_the_harness_check_sees_an_import_up_a_floor():
    g = {"nanobench.harness.cli.console": {"nanobench.harness.workers.lifeline"}}
    assert harness_upward(g) == {("nanobench.harness.cli.console",
                                  "nanobench.harness.workers.lifeline")}  # fmt: skip
    g = {"nanobench.harness.runs.x": {"nanobench.harness.cli.y", "nanobench.harness.runs.z"}}
    assert harness_upward(g) == set()


def test_the_checks_see_a_cycle_and_an_upward_import():
    g = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert cycles(g) == [["a", "b"]]
    g = {"reports.x": {"nanobench.harness.runs.rows"}, "nanobench.harness.runs.rows": set()}
    assert upward(g) == {("reports.x", "nanobench.harness.runs.rows")}
    g = {"nanobench.harness.x": {"nanobench.compile.bench"}, "nanobench.compile.bench": set()}
    assert upward(g) == {("nanobench.harness.x", "nanobench.compile.bench")}


def test_few_modules_sit_directly_in_nanobench():
    direct = sorted(p.name for p in (ROOT / "nanobench").glob("*.py"))
    assert len(direct) <= 8, direct


def is_triton_kernel(node: ast.AST) -> bool:
    """A function decorated with something whose name ends in `jit`: `@triton.jit`, `@jit(...)`."""
    return any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("jit")
        for d in getattr(node, "decorator_list", ())
    )


def first_line(node: ast.stmt) -> int:
    """Where a statement starts: its first decorator's line, if it has any."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def span(node: ast.stmt) -> int:
    """A statement's lines, its decorators included."""
    return node.end_lineno - first_line(node) + 1


def kernel_lines(node: ast.AST) -> int:
    """The lines of the Triton kernels defined anywhere inside `node`."""
    return sum(
        span(child) if is_triton_kernel(child) else kernel_lines(child)
        for child in ast.iter_child_nodes(node)
    )


def counted_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef, command_module: bool) -> int:
    """`def` to the last line (decorators not counted), less the Triton kernels defined inside.

    In a command.py the count starts at the first statement past the docstring: a Typer
    command's signature is its option list, one line per option, and its docstring its help.
    """
    start = fn.lineno
    if command_module:
        body = fn.body[1:] if ast.get_docstring(fn) is not None and len(fn.body) > 1 else fn.body
        start = first_line(body[0])
    return fn.end_lineno - start + 1 - kernel_lines(fn)


def long_functions(source: str, command_module: bool = False) -> list[tuple[str, int]]:
    """(name, lines counted) of every function past LONGEST lines; a Triton kernel is not counted."""
    return [
        (node.name, lines)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not is_triton_kernel(node)
        if (lines := counted_lines(node, command_module)) > LONGEST
    ]


def test_no_function_runs_past_60_lines():
    """Every function of nanobench, engine, kernels and reports is small: at most LONGEST lines
    from `def` to its last line. Not counted: a Triton kernel (decorated with a name ending in
    `jit`) wherever it is defined, and a command.py function's signature and docstring."""
    long = [
        f"{path.relative_to(ROOT)}:{name} {lines} lines"
        for top in TOPS
        for path in sorted((ROOT / top).rglob("*.py"))
        for name, lines in long_functions(path.read_text(), path.name == "command.py")
    ]
    assert not long, long


def test_the_length_check_sees_a_long_function_and_only_its_exceptions():
    def function(name: str, body_lines: int, head: str = "", params: int = 0) -> str:
        signature = "".join(f"    p{i}: int = 0,\n" for i in range(params))
        body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
        return f'{head}def {name}(\n{signature}):\n    """Doc."""\n{body}'

    # def, signature close and docstring: 3 lines besides the body.
    assert long_functions(function("f", LONGEST - 3)) == []
    assert long_functions(function("f", LONGEST - 2)) == [("f", LONGEST + 1)]
    # A Typer command: a long option list passes in a command.py, nowhere else; a long body never.
    command = function("run", 10, params=LONGEST)
    assert long_functions(command, command_module=True) == []
    assert long_functions(command) == [("run", LONGEST + 13)]
    assert long_functions(function("run", LONGEST + 1), command_module=True) == [
        ("run", LONGEST + 1)
    ]
    # A Triton kernel, and a builder's lines that are its kernel; not the builder's own logic.
    assert long_functions(function("k", 2 * LONGEST, head="@triton.jit\n")) == []
    kernel = function("k", 2 * LONGEST, head="@triton.jit\n")
    nested = "".join(f"    {line}\n" for line in kernel.splitlines())
    assert long_functions(f"def build():\n{nested}    return k\n") == []
    logic = "".join(f"    y{i} = {i}\n" for i in range(LONGEST))
    assert long_functions(f"def build():\n{nested}{logic}    return k\n") == [
        ("build", LONGEST + 2)
    ]
