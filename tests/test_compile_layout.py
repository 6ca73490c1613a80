"""compile's layout: the worker's spec travels as a frozen dataclass's fields, the first pass is
one typed row, and the imports among compile's modules and the harness run one way.

The import graph is read from the source (every `import`, at module top or inside a function),
never from what happens to be loaded, so a cycle hidden behind a lazy import still shows.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from nanobench.compile.rows import FIRST_PASS, CompileRow
from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.harness.rows import RowSchemaError

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("explain", "compile", "buckets", "capture", "pool_budget", "decode", "sweep")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every nanobench module a file imports, wherever in the file the import sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            # `from nanobench.compile import session` names a module, not an attribute
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.startswith("nanobench.")}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (ROOT / "nanobench").rglob("*.py")}
    return {name: imports_of(path) & set(files) for name, path in files.items()}


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, by depth-first search (None when there is none)."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_import_cycle_passes_through_compile_or_the_harness():
    found = graph()
    mine = [m for m in found if m.startswith(("nanobench.compile", "nanobench.harness"))]
    cycles = {m: c for m in mine if (c := cycle_through(found, m))}
    assert not cycles, next(iter(cycles.values()))


def test_the_harness_imports_no_command():
    found = graph()
    upward = {
        (m, i)
        for m, targets in found.items()
        if m.startswith("nanobench.harness")
        for i in targets
        if i.split(".")[1] in COMMANDS
    }
    assert not upward, sorted(upward)


def test_the_sweep_does_not_import_the_command():
    assert "nanobench.compile.command" not in imports_of(ROOT / "nanobench/compile/bench.py")


def test_a_worker_spec_carries_every_option_it_shares_with_the_command():
    """Every WorkerSpec field set from a CompileSpec whose values are all off their defaults."""
    asked = CompileSpec(
        rows=3,
        max_batch=5,
        prompt_len=7,
        steps=9,
        bucketed=True,
        width_multiple=64,
        max_model_len=96,
        block_size=8,
        cache="warm",
        backend="eager",
        path="unplanned",
        device="cuda",
        threads=2,
        target="pkg.mod:factory",
    )
    got = asked.worker("/models/m", "bfloat16", "/traces")
    expected = {
        "model": "/models/m", "mode": "off", "rows": 3, "max_batch": 5, "prompt_len": 7,
        "steps": 9, "bucketed": True, "width_multiple": 64, "max_model_len": 96,
        "block_size": 8, "cache": "warm", "backend": "eager", "device": "cuda",
        "dtype": "bfloat16", "seed": 0, "decode_path": "unplanned", "threads": 2,
        "target": "pkg.mod:factory", "trace": "/traces",
    }  # fmt: skip
    assert asdict(got) == expected


def test_a_worker_spec_defaults_are_the_commands():
    """A worker spec left at its defaults asks for what `nanobench compile` with none does."""
    spec = WorkerSpec(model="tiny")
    assert (spec.rows, spec.max_batch, spec.prompt_len, spec.steps) == (4, 8, 16, 16)
    assert (spec.block_size, spec.width_multiple, spec.max_model_len) == (16, 128, 2048)
    assert (spec.cache, spec.backend, spec.decode_path, spec.device) == (
        "cold", "inductor", "planned", "cpu",
    )  # fmt: skip


def test_the_worker_refuses_a_spec_field_it_does_not_know():
    """A payload is rebuilt as WorkerSpec(**payload): a renamed key fails before any build."""
    from nanobench.compile.session import open_session

    payload = {**asdict(WorkerSpec(model="tiny")), "block": 16}
    with pytest.raises(RowSchemaError, match="unknown field 'block'"):
        open_session(payload)


def test_a_first_pass_is_a_part_of_the_row_under_the_rows_names():
    row = {f.name for f in fields(CompileRow)}
    assert set(FIRST_PASS) <= row, sorted(set(FIRST_PASS) - row)
    assert {"builds", "compile_s", "fell_back", "recompile_reasons", "step_ms"} <= set(FIRST_PASS)
