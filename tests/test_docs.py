"""The pages the docs promise exist: each command's `--help` page, and every relative link.

What it is: a check of the repository's Markdown against its files, reading nothing but text,
and of docs/gpu-check.md's package list against the imports of what the GPU check runs (read
from the source, mapped to distributions by this environment's package metadata).
What it is not: the check that the command lines in the docs parse (that belongs to the tests of
the product as used).
Invariant: a page named by a command's `--help`, or linked from README.md or a page under docs/,
is a file in the checkout; every package the GPU check's modules and the test modules `pytest -m
gpu` collects import is on docs/gpu-check.md's list or installed by one on it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from nanobench.commands import COMMANDS
from nanobench.sweep.command import SWEEP

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A Markdown link's target, skipping web addresses and in-page anchors.
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)")


@pytest.mark.parametrize("c", [*COMMANDS, SWEEP], ids=lambda c: c.name)
def test_each_commands_help_page_exists(c):
    assert c.doc, f"{c.name} names no page under docs/"
    assert (ROOT / c.doc).is_file(), f"{c.name} --help links {c.doc}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    targets = LINK.findall(page.read_text())
    missing = [t for t in targets if not (page.parent / t).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} links missing files: {missing}"


def test_readme_links_every_docs_page():
    linked = set(LINK.findall((ROOT / "README.md").read_text()))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages, "no pages under docs/"
    assert pages <= linked, f"README.md does not link {sorted(pages - linked)}"


# -- the GPU check's package list ---------------------------------------------------------------

GPU_CHECK = ROOT / "docs" / "gpu-check.md"
# The sentence that lists what the machine's own python3 must have.
NEEDS = re.compile(r"it needs (.+?); no `make setup`", re.S)


def listed_packages(text: str) -> set[str]:
    """The distributions the page's sentence names: `torch >= 2.5 with CUDA` -> torch."""
    found = NEEDS.search(text)
    assert found, f"{GPU_CHECK.name} has no 'it needs ...; no `make setup`' sentence"
    return {normal(item.split()[0]) for item in found.group(1).split(",")}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def is_optional(handler_types: list[ast.ExceptHandler]) -> bool:
    """A `try` whose handler catches a missing module: what it imports may be absent."""
    names = {"ImportError", "ModuleNotFoundError"}
    for h in handler_types:
        caught = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if any(isinstance(c, ast.Name) and c.id in names for c in caught):
            return True
    return False


def imported(tree: ast.AST) -> set[str]:
    """Every module an `import` names that runs when its code runs (at any depth), skipping
    those under `if TYPE_CHECKING:` or in a `try` that tolerates their absence."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Try) and is_optional(node.handlers):
            return  # an optional import and its fallback (tomllib, else tomli)
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def source_file(module: str) -> Path | None:
    """The checkout's file for a dotted module name, or None when it is not one of ours."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def gpu_check_imports() -> set[str]:
    """Top-level names of what the GPU check's modules and every collected test module import,
    following the checkout's own modules (and their packages' __init__) transitively."""
    todo = [*(ROOT / "nanobench" / "gpu").glob("*.py"), *(ROOT / "tests").rglob("*.py")]
    seen: set[Path] = set()
    names: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in imported(ast.parse(path.read_text())):
            parts = module.split(".")
            ours = [source_file(".".join(parts[:i])) for i in range(1, len(parts) + 1)]
            todo += [p for p in ours if p is not None]
            # Ours: a package or module at the root (tests/ has no __init__), or a corpus
            # module's neighbour (it puts its own folder on sys.path).
            top = parts[0]
            local = (ROOT / top).is_dir() or (path.parent / f"{top}.py").is_file() or ours[0]
            if not local and top not in sys.stdlib_module_names:
                names.add(top)
    return names


def installed_with(listed: set[str]) -> set[str]:
    """The listed distributions and everything they require unconditionally, transitively."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    found, todo = set(), list(listed)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            wanted = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in wanted:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(normal(req.name))
    return found


def test_gpu_check_lists_every_package_what_it_runs_imports():
    from importlib.metadata import packages_distributions

    listed = listed_packages(GPU_CHECK.read_text())
    covered = installed_with(listed)
    owners = packages_distributions()
    missing = sorted(
        f"{name} ({', '.join(owners.get(name, [name]))})"
        for name in gpu_check_imports()
        if not any(normal(d) in covered for d in owners.get(name, [name]))
    )
    assert not missing, (
        f"{GPU_CHECK.relative_to(ROOT)} does not list what the GPU check imports: {missing}"
    )


def test_the_readmes_install_lines_put_nanobench_on_the_path():
    """After `make setup`, the README's own lines (the ones that are not `make`) find the
    checkout's `nanobench` from a shell whose PATH has no `.venv/bin`, as a newcomer's has not."""
    import subprocess

    block = re.search(r"## Install\n.*?```\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    lines = [ln.split("#")[0].strip() for ln in block.group(1).splitlines()]
    shell = "; ".join(ln for ln in lines if ln and not ln.startswith("make "))
    done = subprocess.run(["bash", "-c", f"{shell}; command -v nanobench"], cwd=ROOT,
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.stdout.strip() == str(ROOT / ".venv" / "bin" / "nanobench"), done.stderr
