"""What a measured run measured: the code and weights a history key belongs to.

What it is: `code_identity(target, model)`, a `CodeIdentity` of hashes read from files: the
target's sources (`target_files`: the factory's file and the sibling modules it imports, followed
through the folder), the model's (`model_sha`: config.json whole, and each weight file's name,
size and first and last MiB: the safetensors header names every tensor and its offsets), and
nanobench's and the engine's own sources with nanobench's and transformers' versions. A run of
changed code gets another history key (`harness.statistics.history.history_key`), so an earlier version's
spread is never lent to it.
What it is not: the machine's facts (`history.machine_facts`) or the run's settings; it loads
nothing: no import of the user's module, torch or transformers.
Invariant: the same files give the same identity; a changed byte in any source of the
target's closure, of nanobench or of the engine gives another.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

SAMPLE_BYTES = 1 << 20  # of a weight file's head and tail: its header and its last tensor
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".json")


@dataclass(frozen=True)
class CodeIdentity:
    """Hashes (16 hex digits) of what a run measured; "" where there is nothing of that kind."""

    target_sha: str  # the target's sources ("" for the engine and the built-in targets)
    model_sha: str  # the checkpoint's config and weights ("" for a target's own model)
    nanobench: str  # nanobench's version
    nanobench_sha: str  # nanobench's own sources: its measuring code
    engine_sha: str  # engine/ and kernels/
    transformers: str  # the peer the decode ratios and hf targets run

    def short(self) -> str:
        """One 8-digit name for the whole identity, for a table."""
        return _sha(repr(self).encode())[:8]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def files_sha(paths: list[Path], root: Path | None = None) -> str:
    """sha256 over each file's name (relative to `root`) and bytes, in name order."""
    h = hashlib.sha256()
    for path in sorted(paths):
        name = str(path.relative_to(root)) if root is not None else path.name
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def imported_names(path: Path) -> set[str]:
    """The first component of every module `path` imports, relative ones by their own name."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif node.level == 1:  # `from . import x` and `from .x import y`: siblings
                names.update([node.module.split(".")[0]] if node.module else
                             [a.name for a in node.names])  # fmt: skip
    return names


def sibling_closure(start: Path) -> list[Path]:
    """`start` and every module beside it that it imports, followed through the folder, as
    Python finds a script's siblings (its folder first on sys.path)."""
    folder, seen, todo = start.parent, {start.resolve()}, [start]
    while todo:
        for name in imported_names(todo.pop()):
            for candidate in (folder / f"{name}.py", folder / name / "__init__.py"):
                if candidate.is_file() and candidate.resolve() not in seen:
                    seen.add(candidate.resolve())
                    todo.append(candidate)
    return sorted(seen)


def module_file(dotted: str) -> Path | None:
    """Where `package.module` would load from, searched without importing it: the working
    folder first (as `load_factory` resolves it), then sys.path."""
    parts = dotted.split(".")
    for base in (os.getcwd(), *sys.path):
        stem = Path(base or ".", *parts)
        for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def target_files(target: str) -> list[Path]:
    """The sources a target's factory was loaded from; none for the engine or a built-in."""
    from nanobench.harness.step.targets import BUILTINS

    where, sep, _ = target.rpartition(":")
    if not target or target in BUILTINS or not sep:
        return []
    path = Path(where) if where.endswith(".py") or "/" in where else module_file(where)
    if path is None or not path.is_file():
        return []
    return sibling_closure(path)


def weight_sample(path: Path) -> bytes:
    """A weight file's name, size, and its first and last SAMPLE_BYTES."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(SAMPLE_BYTES)
        f.seek(max(0, size - SAMPLE_BYTES))
        tail = f.read(SAMPLE_BYTES)
    return path.name.encode() + b"\0" + str(size).encode() + b"\0" + head + tail


def model_sha(model: str) -> str:
    """A checkpoint directory's (or a GGUF file's) identity; a bare name is its own."""
    if not model:
        return ""
    path = Path(model)
    if path.is_file():
        return _sha(weight_sample(path))
    if not path.is_dir():
        return _sha(model.encode())
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    return _sha(b"".join(weight_sample(p) for p in files))


def package_sha(name: str) -> str:
    """Every .py file of an installed or checked-out package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return ""
    root = Path(next(iter(spec.submodule_search_locations)))
    return files_sha(list(root.rglob("*.py")), root.parent)


def installed(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def code_identity(target: str, model: str) -> CodeIdentity:
    """What a run of `target` (or the engine, "") on `model` measures, by its files."""
    from nanobench import __version__

    sources = target_files(target)
    return CodeIdentity(
        target_sha=files_sha(sources, sources[0].parent) if sources else "",
        model_sha=model_sha(model),
        nanobench=__version__,
        nanobench_sha=package_sha("nanobench"),
        engine_sha=_sha((package_sha("engine") + package_sha("kernels")).encode()),
        transformers=installed("transformers"),
    )
