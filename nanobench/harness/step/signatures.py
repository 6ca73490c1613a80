"""What a step presented: the shapes and Python values reachable from its inputs, and what changed.

What it is: `tensors_at` and `shape_signature` (every tensor reachable from one step's inputs,
and its shape, by path), `scalar_signature` (every Python scalar and container length, named as
dynamo names its guard, and whether dynamic=True makes it symbolic), then over a run's steps
`changing_scalars` and `growing_dims` (what moved from step to step).
What it is not: the target protocol (`targets`) or a prediction of what dynamo builds
(`compile.target_session`).
Invariant: pure reads of the inputs, nothing called, nothing traced; a path or source names the
value the way the remedies quote it (`args[0]`, `L['pos']`, `len(L['keys'])`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable


def _tensors(value, path: str, depth: int, found: list) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        found.append((path, value))
    elif depth == 0:
        return
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _tensors(v, f"{path}[{i}]", depth - 1, found)
    elif isinstance(value, dict):
        for k, v in value.items():
            _tensors(v, f"{path}[{k!r}]", depth - 1, found)
    elif hasattr(value, "__dict__") and not callable(value):
        # A cache object passed in (transformers' DynamicCache) holds the growing tensors.
        for k, v in vars(value).items():
            _tensors(v, f"{path}.{k}", depth - 1, found)


def tensors_at(args: tuple, kwargs: dict) -> list:
    """[(path, tensor), ...] of every tensor reachable from one step's inputs, in order."""
    found: list = []
    for i, a in enumerate(args):
        _tensors(a, f"args[{i}]", 4, found)
    for k, v in kwargs.items():
        _tensors(v, f"kwargs[{k!r}]", 4, found)
    return found


def shape_signature(args: tuple, kwargs: dict) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """((path, shape), ...) of every tensor reachable from one step's inputs, in order."""
    return tuple((path, tuple(t.shape)) for path, t in tensors_at(args, kwargs))


def _scalars(value, source: str, depth: int, module: bool, found: list) -> None:
    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        # dynamo makes an int or float symbolic under dynamic=True unless an nn.Module holds it.
        found.append((source, value, type(value) in (int, float) and not module))
    elif isinstance(value, torch.Tensor) or depth == 0:
        return
    elif isinstance(value, (tuple, list, dict)):
        # A container's length is guarded by value in every mode: it can never be symbolic.
        found.append((f"len({source})", len(value), False))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            _scalars(v, f"{source}[{k!r}]", depth - 1, module, found)
    elif isinstance(value, torch.nn.Module) or (hasattr(value, "__dict__") and not callable(value)):
        inside = module or isinstance(value, torch.nn.Module)
        for k, v in vars(value).items():
            _scalars(v, f"{source}.{k}", depth - 1, inside, found)


def scalar_signature(forward: Callable, args: tuple, kwargs: dict) -> tuple:
    """((source, value, symbolic), ...) of every Python scalar and container length reachable
    from one step's inputs, each named as dynamo names its guard (`L['pos']`, `L['cache'].n`,
    `len(L['keys'])`); `symbolic` says whether dynamic=True makes it a SymInt or SymFloat."""
    try:
        bound = inspect.signature(forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {f"args[{i}]": a for i, a in enumerate(args)} | dict(kwargs)
    found: list = []
    for name, value in bound.items():
        _scalars(value, f"L[{name!r}]", 4, False, found)
    return tuple(found)


def changing_scalars(history: list[tuple], guarded: set[str]) -> dict[str, bool]:
    """{source: symbolic} of the scalars whose value changed over the run and that dynamo
    guards on (`guarded`: the sources of its guards; an unread attribute guards nothing)."""
    seen: dict[str, set] = {}
    symbolic: dict[str, bool] = {}
    for signature in history:
        for source, value, sym in signature:
            seen.setdefault(source, set()).add((type(value), value))
            symbolic[source] = sym
    base = {s: s[4:-1] if s.startswith("len(") else s for s in seen}
    return {s: symbolic[s] for s, v in seen.items() if len(v) > 1 and base[s] in guarded}


def growing_dims(history: list[tuple]) -> list[tuple[str, int, int, int]]:
    """(path, dim, first size, last size) of each tensor dimension that changed over the run."""
    if len(history) < 2:
        return []
    first = dict(history[0])
    last = dict(history[-1])
    grew = []
    for path, shape in first.items():
        seen = {dict(h).get(path) for h in history}
        if len(seen) < 2 or any(s is None or len(s) != len(shape) for s in seen):
            continue
        for dim in range(len(shape)):
            if len({s[dim] for s in seen}) > 1:
                grew.append((path, dim, shape[dim], last[path][dim]))
    return grew
