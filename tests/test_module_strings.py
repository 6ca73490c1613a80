"""Every module the code names as a string (a worker run with `python -m`, a built-in target's
`module:factory`, the Makefile's gpu-check) imports, and the attribute it names exists.

A string is invisible to the import graph and to a rename; this test is what sees it.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("nanobench", "engine", "kernels", "reports")
TOPS = "|".join(PACKAGES)
NAMED = re.compile(rf"^(?:{TOPS})(?:\.[a-z_][a-z0-9_]*)+(?::[a-z_][a-z0-9_]*)?$")


def named_modules() -> list[tuple[str, str]]:
    found = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if NAMED.match(node.value):
                        found.append((str(path.relative_to(ROOT)), node.value))
    for line in (ROOT / "Makefile").read_text().splitlines():
        found += [("Makefile", m) for m in re.findall(r"-m ((?:nanobench|engine)\.[\w.]+)", line)]
    return found


def test_the_code_names_modules_as_strings_that_this_test_sees():
    names = {name for _, name in named_modules()}
    # The ones known when this test was written: the workers, the built-in targets, the CLI.
    assert {"nanobench.compile.session", "nanobench.decode.session", "nanobench.cli"} <= names
    assert "nanobench.gpu.check" in names


@pytest.mark.parametrize("where,name", named_modules())
def test_each_module_named_as_a_string_imports(where, name):
    module, _, attr = name.partition(":")
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as e:
        pytest.fail(f"{where} names {name!r}, which does not import: {e}")
    if attr:
        assert hasattr(imported, attr), f"{where} names {name!r}: {module} has no {attr}"
