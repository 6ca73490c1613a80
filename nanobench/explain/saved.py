"""A saved `explain.csv` read back into the `ExplainRow`s that wrote it.

What it is: `read_explain_csv(path)`, the inverse of explain's CSV (`reports.csvio.write_rows`
over `as_dicts(rows)` in the order of `columns(ExplainRow)`): each cell converted by its field's
type (an int, a bool, `int | None`, a JSON list or dict; an empty cell is None, or "" for a
text field), each row rebuilt with `nanobench.harness.rows.rebuild`.
What it is not: a comparison of two runs (`compare` reads two of these) or a reader of any
other command's CSV.
Invariant: a row comes back equal to the row written; a file lacking a column of `ExplainRow`
is refused by name (`BadInput`, one line), never read as a default.
"""

from __future__ import annotations

import csv
import json
import types
import typing
from pathlib import Path

from nanobench.harness.dynamo_explain import ExplainRow
from nanobench.harness.errors import BadInput
from nanobench.harness.rows import columns, rebuild


def read_explain_csv(path: str | Path) -> list[ExplainRow]:
    """The rows of an explain.csv, as explain built them (the `side` column included)."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            header, cells = list(reader.fieldnames or ()), list(reader)
    except OSError as e:
        raise BadInput(f"{path}: cannot read an explain.csv ({e.strerror or e})") from None
    missing = [c for c in columns(ExplainRow) if c not in header]
    if missing:
        raise BadInput(f"{path}: not an explain.csv of this version: no column {missing[0]!r}")
    types_of = typing.get_type_hints(ExplainRow)
    rows = []
    for n, cell_row in enumerate(cells, 2):  # line 1 is the header
        try:
            payload = {k: _value(types_of.get(k, str), v) for k, v in cell_row.items()}
        except ValueError as e:
            raise BadInput(f"{path}:{n}: {e}") from None
        rows.append(rebuild(ExplainRow, payload))
    return rows


def _value(kind, text: str | None):
    """One cell as its field's type; pandas writes None as an empty cell."""
    args = typing.get_args(kind)
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args
    base = next((a for a in args if a is not type(None)), kind) if optional else kind
    if text is None or text == "":
        return "" if base is str else None
    origin = typing.get_origin(base) or base
    if origin in (list, dict, tuple):
        return json.loads(text)
    if base is bool:
        if text not in ("True", "False"):
            raise ValueError(f"{text!r}: expected True or False")
        return text == "True"
    if base is int:
        return int(text)
    if base is float:
        return float(text)
    return text
