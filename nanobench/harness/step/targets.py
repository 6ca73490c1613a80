"""Your decode step as a target: load `module:factory` or `path/file.py:factory`, check, wrap.

What it is: the target protocol. A factory is called with keyword-only `rows, prompt_len, steps,
device, dtype` and returns an object with `forward` (the callable to compile: an nn.Module or a
function) and `step_inputs(step) -> (args, kwargs)` (decode step `step`, 0-based, built outside
the traced region). `target_named` reads a spec and its file without importing anything (no
torch: a mistyped name is said at once), `target_option` then imports and inspects the factory
without calling it (the parent's validation, `BadInput`); `make_target` calls it (in a
worker); `inputs_at` calls one step (what its inputs present: `signatures`).
The built-ins `hf-static` and `hf-dynamic` (`nanobench.harness.step.hf_targets`) also take `model`.
What it is not: a runner. Explaining a target lives in `target_bench`; compiling and timing
one in `nanobench.compile.target_session`.
Invariant: every way a target can be wrong (import, signature, factory, step) is a
`TargetError` with one line naming the spec; it is never a traceback.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nanobench.harness.errors import BadInput, MeasurementFailed

PROTOCOL = ("rows", "prompt_len", "steps", "device", "dtype")
BUILTINS = {
    "hf-static": "nanobench.harness.step.hf_targets:hf_static",
    "hf-dynamic": "nanobench.harness.step.hf_targets:hf_dynamic",
    "vllm": "nanobench.harness.step.vllm_target:vllm_decode",
}
# What a built-in takes beyond the protocol: the checkpoint (--model) and, for one that compiles
# itself (vllm), the mode its worker runs.
BUILTIN_EXTRA = ("model", "mode")


class TargetError(MeasurementFailed):
    """A target that cannot be loaded, built or stepped; the message is one line."""


# A worker's status where the user's own target failed: `TargetError`'s line, as a worker
# reports an error.
TARGET_FAILED = "error: --target "
# what its importing, its factory, its step_inputs or its forward raising reads as
# (`TargetError`'s lines; a forward's in the user's terms, `forward_raised`). A timed window's
# line starts `timed window N` and a compiler's failure `compiling forward`: neither matches.
RAISED = re.compile(
    re.escape(TARGET_FAILED)
    + r"'[^']*': (importing \S+ raised|the factory raised|step_inputs\(\d+\) raised"
    r"|forward at step \d+ raised) "
)


def raised_by_target(status: str) -> BadInput | None:
    """Where the user's own code raised in a worker (importing the target, its factory, its
    step_inputs, its forward in the first pass): their error as bad input, one line, exit 2.
    None for any other status, a contract the step broke in a timed window or a compiler's
    failure among them (a failed row, what it timed kept)."""
    if not RAISED.match(status):
        return None
    return BadInput(status.removeprefix("error: "))


@dataclass(frozen=True)
class Target:
    spec: str
    forward: Callable
    step_inputs: Callable[[int], tuple[tuple, dict]]
    # seconds it compiled for, by its own clock: a target that compiles itself (SELF_COMPILED)
    compile_s: float | None = None
    # seconds its factory spent importing what it runs on (vLLM), by its own clock
    import_s: float | None = None
    # `explained(trace, *args, **kwargs)`: the step with the module dynamo should see traced by
    # `trace` (what it returns); None: `forward` is that module (every target but one that
    # compiles itself, whose forward drives a runner)
    explained: Callable | None = None
    # `findings()`: what a target that compiles itself found of its own compile over the first
    # pass, as `Remedy` rows (vLLM's evaluated guards); None for every other target
    findings: Callable | None = None


def _load_file(path: Path, spec: str):
    name = f"nanobench_target_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    # As `python file.py` does: the file's folder first on sys.path, so a sibling import resolves.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    # Registered before running: dataclasses and pickling look the module up by name.
    sys.modules[name] = module
    try:
        loader.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[name]
        raise TargetError(f"--target {spec!r}: importing {path} raised {_one_line(e)}") from None
    return module


def path_binds(path: Path, name: str) -> bool:
    """Whether the file, read and parsed but not run, may bind `name` at its top level: a
    missing factory is refused before its imports (torch's seconds) run. True when unsure (a
    file that does not parse or read, `import *`, a module `__getattr__`, a `global`): the
    import decides."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and name in node.names:
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
    return bool({name, "__getattr__"} & _top_level_names(tree.body))


def _top_level_names(body: list) -> set[str]:
    """The names statements bind at module level, through if/try/with/for blocks, not into a
    function or class body."""
    found: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                found.add(child.id)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            found |= _top_level_names(getattr(node, field, None) or [])
    return found


def _named(spec: str) -> tuple[str, str]:
    """(where, factory) of a spec, read but nothing imported: its form; a file that exists and
    binds the factory."""
    where, sep, attr = BUILTINS.get(spec, spec).rpartition(":")
    if not sep or not where or not attr:
        raise TargetError(
            f"--target {spec!r}: expected package.module:factory, path/to/file.py:factory, "
            f"or one of {', '.join(BUILTINS)}"
        )
    if is_file_spec(where):
        if not Path(where).is_file():
            raise TargetError(f"--target {spec!r}: no such file {where}")
        if not path_binds(Path(where), attr):
            raise TargetError(f"--target {spec!r}: {where} has no callable {attr!r}")
    return where, attr


def is_file_spec(where: str) -> bool:
    return where.endswith(".py") or "/" in where


def target_named(spec: str) -> str:
    """--target as written, checked with nothing imported (so with no torch): BadInput at once
    for a malformed spec, a missing file or a file with no such factory. `target_option` then
    imports it and checks the factory's signature."""
    try:
        _named(spec)
    except TargetError as e:
        raise BadInput(str(e)) from None
    return spec


def load_factory(spec: str) -> Callable:
    """The factory a spec names: a built-in name, `package.module:factory` or `file.py:factory`."""
    where, attr = _named(spec)
    if is_file_spec(where):
        module = _load_file(Path(where), spec)
    else:
        # As `python -m` would: a module beside the user resolves from where they run.
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(where)
        except BaseException as e:
            raise TargetError(
                f"--target {spec!r}: importing {where} raised {_one_line(e)}"
            ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise TargetError(f"--target {spec!r}: {where} has no callable {attr!r}")
    return factory


def check_signature(spec: str, factory: Callable) -> None:
    """Every protocol name is keyword-only (or taken by **kwargs); nothing else is required."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        raise TargetError(f"--target {spec!r}: the factory has no inspectable signature") from None
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    wrong = [n for n in PROTOCOL if n in params and params[n].kind is not params[n].KEYWORD_ONLY]
    missing = [n for n in PROTOCOL if n not in params and not takes_any]
    extra = [
        n
        for n, p in params.items()
        if n not in PROTOCOL
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        and not (spec in BUILTINS and n in BUILTIN_EXTRA)
    ]
    if wrong or missing or extra:
        what = "; ".join(
            part
            for part in (
                f"not keyword-only: {', '.join(wrong)}" if wrong else "",
                f"missing: {', '.join(missing)}" if missing else "",
                f"required but not in the protocol: {', '.join(extra)}" if extra else "",
            )
            if part
        )
        raise TargetError(
            f"--target {spec!r}: expected def factory(*, {', '.join(PROTOCOL)}) ({what})"
        )


def target_option(spec: str) -> str:
    """--target validated in the parent: BadInput (one line, exit 2) before any worker starts."""
    try:
        check_signature(spec, load_factory(spec))
    except TargetError as e:
        raise BadInput(str(e)) from None
    return spec


def make_target(spec: str, *, model: str = "", mode: str = "off", **protocol) -> Target:
    """Call the factory (in the process that will step it) and check what it returned."""
    factory = load_factory(spec)
    check_signature(spec, factory)
    given = {"model": model, "mode": mode}
    takes = inspect.signature(factory).parameters
    extra = {k: v for k, v in given.items() if k in takes} if spec in BUILTINS else {}
    try:
        made = factory(**protocol, **extra)
    except BaseException as e:
        raise TargetError(f"--target {spec!r}: the factory raised {_one_line(e)}") from None
    forward, step_inputs = getattr(made, "forward", None), getattr(made, "step_inputs", None)
    if not callable(forward) or not callable(step_inputs):
        raise TargetError(
            f"--target {spec!r}: the factory returned {type(made).__name__}, expected an object "
            "with a callable forward and step_inputs(step)"
        )
    hooks = {k: getattr(made, k, None) for k in ("compile_s", "import_s", "explained", "findings")}
    return Target(spec, forward, step_inputs, **hooks)


def inputs_at(target: Target, step: int) -> tuple[tuple, dict]:
    """step_inputs(step), checked to be (args tuple, kwargs dict)."""
    try:
        got = target.step_inputs(step)
    except BaseException as e:
        raise TargetError(
            f"--target {target.spec!r}: step_inputs({step}) raised {_one_line(e)}"
        ) from None
    if not (
        isinstance(got, tuple)
        and len(got) == 2
        and isinstance(got[0], (tuple, list))
        and isinstance(got[1], dict)
    ):
        raise TargetError(
            f"--target {target.spec!r}: step_inputs({step}) returned {type(got).__name__}, "
            "expected (args tuple, kwargs dict)"
        )
    return tuple(got[0]), got[1]


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
