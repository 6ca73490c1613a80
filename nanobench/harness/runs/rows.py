"""Typed rows: a result crosses a process or module boundary as a frozen dataclass, never a dict.

What it is: `rebuild(Row, payload)`, which turns a worker's JSON payload back into its row type
and fails loudly, naming the row type and the key, when a key is missing or unknown;
`columns(Row)`, a CSV's columns in field order; and `as_dicts(rows)`, the JSON/CSV view.
What it is not: a schema language. A row type is a plain frozen dataclass in its command's
module; defaults on its fields are what a row may legitimately lack (a failed row's timings).
Invariant: a renamed or dropped field in a worker is an error in the parent, never a column
that silently reads as 0, None or "passes".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

R = TypeVar("R")


class RowSchemaError(RuntimeError):
    """A payload that does not match its row type: the key and the type are named."""


def rebuild(row_type: type[R], payload: Mapping[str, Any]) -> R:
    """`row_type(**payload)`, with a one-line error naming what did not match."""
    names = {f.name for f in dataclasses.fields(row_type)}
    unknown = sorted(set(payload) - names)
    if unknown:
        raise RowSchemaError(f"{row_type.__name__}: unknown field {unknown[0]!r} in a payload")
    required = {
        f.name
        for f in dataclasses.fields(row_type)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    missing = sorted(required - set(payload))
    if missing:
        raise RowSchemaError(f"{row_type.__name__}: payload lacks field {missing[0]!r}")
    return row_type(**payload)


def columns(row_type: type) -> list[str]:
    """A CSV's columns: the row type's fields, in declaration order."""
    return [f.name for f in dataclasses.fields(row_type)]


def as_dicts(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Rows as plain dicts for JSON and CSV; dataclass rows by their fields, dicts unchanged."""
    return [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(r) for r in rows]
