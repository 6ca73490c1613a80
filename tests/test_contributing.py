"""docs/contributing.md's claims about the layout, held to the tree: the page cannot drift.

What it is: a reading of the page's tables and backticked names against the checkout, by text
and by the source's syntax trees (nothing is measured; only the CLI is imported, for its
commands). The package tables (a `package` column and a `files` column) list each package's
files besides `__init__.py`, both ways, and every package of nanobench, engine, kernels and
reports has a row; the command table names every command the CLI shows, its package, and the
module that defines its `Command`; the run-kind table names every `RunKind` subclass (in its
command's `run.py`) and every fleet part (in its `bench.py`, each with every member of
`fleet.Part`); the harness table's floors and imports are tests/test_layout.py's. Every path
the page names exists (a `file.py:name` defines the name), a bare file named after a folder in
one paragraph is that folder's, and every `Class.member` it names is defined in that class or a
base of it. The last test breaks the page one claim at a time and watches each check see it.
What it is not: the check of the floors themselves (tests/test_layout.py reads the imports), of
the page's links (tests/test_docs.py) or of its command lines (tests/test_as_used.py); nor a
check of the page's prose beyond the names it puts in backticks.
Invariant: a file added to or removed from a package, a package added, a command registered
elsewhere, a kind or part added, or a module renamed fails here until the page says so.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_layout import HARNESS_FLOORS

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "contributing.md"
TOPS = ("nanobench", "engine", "kernels", "reports")
# A bare path is read from the root first, then as nanobench's (`harness/...`, `compile/...`),
# then as harness's (`runs/measured_run.py`).
BASES = (ROOT, ROOT / "nanobench", ROOT / "nanobench" / "harness")
# Paths the page names that a command makes: not in a checkout.
MADE = {".oldest-hf/cache"}
TICKED = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w.*/-]+$")
MEMBER = re.compile(r"^([A-Z]\w*)\.([a-z_]\w*)$")
# What a file's name ends in, where a bare name (`requirements-oldest.txt`) is a checkout's file;
# an output's (`compare.png`, `-samples.csv`) is not.
SOURCES = (".py", ".txt", ".toml", ".md", ".lock")


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[dict[str, str], ...]

    def column(self, word: str) -> str | None:
        """The first header that starts with `word` (case and backticks aside)."""
        return next((h for h in self.header if h.strip("`").lower().startswith(word)), None)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(text: str) -> list[Table]:
    """Every Markdown table of the page: its header, then a row per line as header -> cell."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            block.append(cells(line))
            continue
        if len(block) >= 2:
            header = tuple(block[0])
            rows = [b for b in block[1:] if not all(set(c) <= set("-: ") for c in b)]
            found.append(Table(header, tuple(dict(zip(header, r)) for r in rows)))
        block = []
    return found


def ticked(text: str) -> list[str]:
    return TICKED.findall(text)


def files_in(cell: str) -> set[str]:
    return {n for n in ticked(cell) if n.endswith(".py") and "/" not in n}


def package_rows(text: str) -> list[tuple[str, set[str]]]:
    """(package path, files named) of each row of each table with a package and a files column."""
    found = []
    for t in tables(text):
        package, files = t.column("package"), t.column("files")
        if package and files:
            found += [(ticked(r[package])[0], files_in(r[files])) for r in t.rows]
    return found


def on_disk(package: str) -> set[str]:
    return {p.name for p in (ROOT / package).glob("*.py")} - {"__init__.py"}


def tree_packages() -> set[str]:
    """Every package of nanobench, engine, kernels and reports, as `nanobench/compile/`."""
    return {
        f"{p.parent.relative_to(ROOT).as_posix()}/"
        for top in TOPS
        for p in (ROOT / top).rglob("__init__.py")
    }


# -- the package tables --------------------------------------------------------------------------


def package_problems(text: str) -> list[str]:
    """What the package tables leave out or add, against the tree, and the packages with no row."""
    rows = package_rows(text)
    problems = []
    for package, files in rows:
        if not (ROOT / package).is_dir():
            problems.append(f"{package}: no such package")
            continue
        if missing := sorted(on_disk(package) - files):
            problems.append(f"{package}: the page does not list {missing}")
        if extra := sorted(files - on_disk(package)):
            problems.append(f"{package}: the page lists {extra}, which it does not hold")
    named = [package for package, _ in rows]
    if twice := sorted({p for p in named if named.count(p) > 1}):
        problems.append(f"packages with more than one row: {twice}")
    if unlisted := sorted(tree_packages() - set(named)):
        problems.append(f"packages with no row: {unlisted}")
    return problems


def test_each_package_table_lists_exactly_the_files_of_each_package():
    assert package_rows(PAGE.read_text()), f"{PAGE.name} has no package table"
    assert package_problems(PAGE.read_text()) == []


# -- the command table ---------------------------------------------------------------------------


def command_table(text: str) -> Table:
    found = [t for t in tables(text) if t.column("command") and t.column("registered")]
    assert len(found) == 1, f"{PAGE.name}: {len(found)} tables with command and registered columns"
    return found[0]


def shown_commands() -> set[str]:
    """The commands `nanobench --help` lists (an alias is registered hidden)."""
    from nanobench.cli import app

    return {c.name for c in app.registered_commands if not c.hidden}


def defines(path: Path, name: str) -> bool:
    """`name` is assigned, or a function or class of that name defined, at the file's top level."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def registration_problems(text: str) -> list[str]:
    """Each row's command against the CLI: its package, and the module that defines its Command."""
    from nanobench.commands import Command

    table = command_table(text)
    command, package, where = (table.column(w) for w in ("command", "package", "registered"))
    problems, shown = [], shown_commands()
    named = {ticked(r[command])[0]: r for r in table.rows}
    if named.keys() != shown:
        problems.append(f"the table names {sorted(named)}; the CLI shows {sorted(shown)}")
    for name, row in named.items():
        if ticked(row[package]) != [f"nanobench/{name.replace('-', '_')}/"]:
            problems.append(f"{name}: its package is not {row[package]}")
        path, attr = ticked(row[where])[:2]
        if not (ROOT / path).is_file() or not defines(ROOT / path, attr):
            problems.append(f"{name}: {path} does not define {attr}")
            continue
        value = getattr(importlib.import_module(path[:-3].replace("/", ".")), attr)
        registered = value if isinstance(value, tuple) else (value,)
        if name not in {c.name for c in registered if isinstance(c, Command)}:
            problems.append(f"{name}: {path}'s {attr} does not register it")
    return problems


def test_each_command_has_the_package_and_the_registration_the_page_says():
    assert registration_problems(PAGE.read_text()) == []


# -- the run kinds and the fleet's parts ---------------------------------------------------------


def classes() -> dict[str, list[tuple[Path, ast.ClassDef]]]:
    """Every class defined in nanobench, engine, kernels and reports, by name."""
    found: dict[str, list[tuple[Path, ast.ClassDef]]] = {}
    for top in TOPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append((path, node))
    return found


def own_members(node: ast.ClassDef) -> set[str]:
    names = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
        elif isinstance(item, ast.Assign):
            names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
            names |= {e.id for t in item.targets if isinstance(t, ast.Tuple) for e in t.elts}
    return names


def base_names(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).split(".")[-1] for b in node.bases]


def members(node: ast.ClassDef, index: dict, seen: frozenset = frozenset()) -> set[str]:
    """A class's members and those of its bases defined in the tree."""
    names = own_members(node)
    for base in (b for b in base_names(node) if b not in seen | {node.name}):
        for _, found in index.get(base, []):
            names |= members(found, index, seen | {node.name})
    return names


def part_members(index: dict) -> set[str]:
    """What a fleet part supplies: the members of `fleet.Part`."""
    fleet = ROOT / "nanobench" / "harness" / "workers" / "fleet.py"
    return members(next(n for p, n in index["Part"] if p == fleet), index)


def kinds_table(text: str) -> Table:
    found = [t for t in tables(text) if t.column("runkind") and t.column("fleet parts")]
    assert len(found) == 1, f"{PAGE.name}: {len(found)} tables of run kinds and fleet parts"
    return found[0]


def subclasses_of(base: str, index: dict) -> set[str]:
    found = {name for name, defs in index.items() if any(base in base_names(n) for _, n in defs)}
    return found | {s for name in found for s in subclasses_of(name, index)}


def kind_problems(text: str) -> list[str]:
    """Each row's kind and parts where the table says, against every kind and part in the tree."""
    index, table = classes(), kinds_table(text)
    command, kind, parts = (table.column(w) for w in ("command", "runkind", "fleet parts"))
    needs = part_members(index)
    problems, kinds, named_parts = [], set(), set()
    for row in table.rows:
        package = ROOT / "nanobench" / ticked(row[command])[0].replace("-", "_")
        for name in ticked(row[kind]):
            kinds.add(name)
            if not any(p == package / "run.py" for p, _ in index.get(name, [])):
                problems.append(f"{name}: not a class of {package.name}/run.py")
        for name in (n for n in ticked(row[parts]) if "/" not in n):
            named_parts.add(name)
            found = [n for p, n in index.get(name, []) if p == package / "bench.py"]
            if not found:
                problems.append(f"{name}: not a class of {package.name}/bench.py")
            elif lacks := sorted(needs - members(found[0], index)):
                problems.append(f"{name}: a fleet part without {lacks}")
    if kinds != subclasses_of("RunKind", index):
        problems.append(f"the table's kinds {sorted(kinds)}; the tree's "
                        f"{sorted(subclasses_of('RunKind', index))}")  # fmt: skip
    tree_parts = {
        name
        for name, defs in index.items()
        for path, node in defs
        if path.name != "fleet.py" and needs <= members(node, index)
    }
    if named_parts != tree_parts:
        problems.append(f"the table's parts {sorted(named_parts)}; the tree's {sorted(tree_parts)}")
    return problems


def test_each_run_kind_and_fleet_part_is_where_the_page_says():
    assert kind_problems(PAGE.read_text()) == []


# -- harness's floors ----------------------------------------------------------------------------


def harness_problems(text: str) -> list[str]:
    """The floor table's floors and imports against tests/test_layout.py's HARNESS_FLOORS."""
    found = [t for t in tables(text) if t.column("floor")]
    assert len(found) == 1, f"{PAGE.name}: {len(found)} tables with a floor column"
    table = found[0]
    package, floor, may = (table.column(w) for w in ("package", "floor", "may import"))
    want = {name: i for i, names in enumerate(HARNESS_FLOORS) for name in names}
    problems, seen = [], {}
    for row in table.rows:
        path = ticked(row[package])[0]
        sub = path.removeprefix("nanobench/harness/").strip("/")
        # harness's own row: the modules beside the sub-packages, on the lowest floor (errors)
        for name in [sub] if sub else sorted(n[:-3] for n in on_disk(path)):
            seen[name] = int(row[floor])
            below = {n for n, i in want.items() if i < want.get(name, -1)}
            if set(ticked(row[may])) != below:
                problems.append(f"{name} may import {sorted(below)}, not {row[may]}")
    if seen != want:
        problems.append(f"floors on the page {seen}; in tests/test_layout.py {want}")
    return problems


def test_the_harness_floors_are_the_layout_tests():
    assert harness_problems(PAGE.read_text()) == []


# -- every path and every Class.member the page names --------------------------------------------


def resolve(path: str) -> list[Path]:
    """The files or folders a path names: from the root, nanobench or harness; a glob's matches."""
    for base in BASES:
        found = sorted(base.glob(path)) if "*" in path else [base / path]
        if found and all(p.exists() for p in found):
            return found
    return []


def everywhere(name: str) -> bool:
    """A bare file name (`bench.py`): a file of that name at the root, in the packages or tests."""
    return (ROOT / name).is_file() or any(any((ROOT / t).rglob(name)) for t in (*TOPS, "tests"))


def path_problems(text: str) -> list[str]:
    """Every backticked path that names nothing, or a `file.py:name` whose file lacks the name."""
    problems = []
    for token in dict.fromkeys(ticked(text)):
        path, _, name = token.partition(":")
        if "<" in token or not PATH.match(path) or path in MADE:
            continue  # a placeholder (`reports/<name>.py`), not a path, or made by a command
        if "/" not in path and not path.endswith(SOURCES):
            continue
        if "/" not in path:
            if not everywhere(path):
                problems.append(f"{token}: no file of that name")
            continue
        found = resolve(path)
        if not found:
            problems.append(f"{token}: no such path")
        elif name and not defines(found[0], name.lstrip(":")):
            problems.append(f"{token}: {found[0].relative_to(ROOT)} does not define {name}")
    return problems


def member_problems(text: str) -> list[str]:
    """Every backticked `Class.member` whose class is in the tree and does not have the member."""
    index, problems = classes(), []
    for token in dict.fromkeys(ticked(text)):
        found = MEMBER.match(token)
        if not found or token.endswith(SOURCES):
            continue
        cls, member = found.groups()
        if cls not in index:
            problems.append(f"{token}: no class {cls}")
        elif not any(member in members(n, index) for _, n in index[cls]):
            problems.append(f"{token}: {cls} has no {member}")
    return problems


def blocks(text: str) -> list[str]:
    """The page's paragraphs and list items, outside code blocks and tables."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    lines = [line for line in prose.splitlines() if not line.lstrip().startswith("|")]
    return re.split(r"\n\s*\n|\n(?=- |\d+\. )", "\n".join(lines))


def folder_problems(text: str) -> list[str]:
    """A bare file name after a folder in the same paragraph or item (`statistics/`: ...
    `stats.py`) is that folder's file."""
    problems = []
    for block in blocks(text):
        folder = None
        for token in ticked(block):
            if token.endswith("/") and PATH.match(token):
                found = resolve(token)
                folder = found[0] if found and found[0].is_dir() else None
            elif "<" in token:
                folder = None
            elif folder and PATH.match(token) and "/" not in token and token.endswith(".py"):
                if not (folder / token).is_file():
                    where = folder.relative_to(ROOT).as_posix()
                    problems.append(f"{token}: not in {where}/, the folder it is named under")
    return problems


def test_each_file_named_under_a_folder_is_in_that_folder():
    assert folder_problems(PAGE.read_text()) == []


def test_every_path_the_page_names_exists():
    assert path_problems(PAGE.read_text()) == []


def test_every_class_member_the_page_names_is_defined():
    assert member_problems(PAGE.read_text()) == []


# -- the checks see a page that drifted ----------------------------------------------------------


def drifted(old: str, new: str) -> str:
    text = PAGE.read_text()
    assert text.count(old) >= 1, f"{PAGE.name} no longer holds {old!r}"
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("check", "old", "new", "said"),
    [
        # a file the package holds, dropped from its row; a file it does not hold, added
        (package_problems, "`remedies.py`, `rows.py`", "`rows.py`", "does not list"),
        (package_problems, "`listing.py` |", "`listing.py`, `gone.py` |", "does not hold"),
        # a package's row dropped
        (package_problems, "| `kernels/` |", "| `kernels_gone/` |", "no row"),
        # compare said to be registered in commands.py, as the page once said
        (registration_problems, "`nanobench/cli.py` (`COMPARE`)",
         "`nanobench/commands.py` (`COMMANDS`)", "does not register"),
        (registration_problems, "| `history` |", "| `historic` |", "the CLI shows"),
        (kind_problems, "`SystemPart`, `ProbePart`", "`SystemPart`", "the tree's"),
        (kind_problems, "`StartupKind`", "`StartKind`", "not a class"),
        (harness_problems, "| `nanobench/harness/cli/` | 2 |", "| `nanobench/harness/cli/` | 3 |",
         "tests/test_layout.py"),
        (path_problems, "`compile/remedies.py`", "`compile/remedy.py`", "no such path"),
        (path_problems, "`tests/helpers.py:rounding_rtol`", "`tests/helpers.py:rtol`",
         "does not define"),
        (member_problems, "`Part.first_window`", "`Part.first_windows`", "has no"),
        # a module described under another harness sub-package than its own
        (folder_problems, "pooled over a run's systems (`pooling.py`)",
         "pooled over a run's systems (`fleet.py`)", "not in nanobench/harness/statistics/"),
    ],
)  # fmt: skip
def test_the_checks_see_a_page_that_drifted(check, old, new, said):
    problems = check(drifted(old, new))
    assert any(said in p for p in problems), problems
