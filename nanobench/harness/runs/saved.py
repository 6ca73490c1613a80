"""A saved run read back: a command's CSV as the typed rows that wrote it, its samples as windows.

What it is: `read_rows(path, Row)` (the inverse of `reports.csvio.write_rows` over
`as_dicts(rows)`: each cell converted by its field's type, an int, a bool, `int | None`, a JSON
list or dict; an empty cell is None, or "" for a text field; each row rebuilt with
`rows.rebuild`), `read_windows(path, label)` (a `<command>-samples.csv` back into the
`rounds.Window`s it was written from, by side, system and round) and `read_document(path)`
(a `--json` document: its command, rows and env record).
What it is not: a comparison (`nanobench.compare` reads two saved runs) or a schema.
Invariant: a row comes back equal to the row written; a file lacking a column of its row type is
refused by name (`BadInput`, one line), never read as a default.
"""

from __future__ import annotations

import csv
import json
import types
import typing
from pathlib import Path

from nanobench.harness.errors import BadInput
from nanobench.harness.runs.rows import RowSchemaError, columns, rebuild
from nanobench.harness.workers.rounds import Window


def _cells(path: Path, what: str) -> tuple[list[str], list[dict]]:
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            return list(reader.fieldnames or ()), list(reader)
    except OSError as e:
        raise BadInput(f"{path}: cannot read {what} ({e.strerror or e})") from None


def read_rows(path: str | Path, row_type: type, what: str = "", unwritten=()) -> list:
    """The rows of a command's CSV, as the command built them; `unwritten` names the fields
    the command never writes (decode's token lists: their digest is written)."""
    path = Path(path)
    what = what or path.name
    header, cells = _cells(path, what)
    required = [c for c in columns(row_type) if c not in header and c not in unwritten]
    if required:
        raise BadInput(f"{path}: not a {what} of this version: no column {required[0]!r}")
    kinds = typing.get_type_hints(row_type)
    rows = []
    for n, cell_row in enumerate(cells, 2):  # line 1 is the header
        try:
            payload = {k: value(kinds.get(k, str), v) for k, v in cell_row.items()}
            rows.append(rebuild(row_type, payload))
        except (ValueError, RowSchemaError) as e:
            raise BadInput(f"{path}:{n}: {e}") from None
    return rows


def value(kind, text: str | None):
    """One cell as its field's type; pandas writes None as an empty cell."""
    args = typing.get_args(kind)
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args
    base = next((a for a in args if a is not type(None)), kind) if optional else kind
    if text is None or text == "":
        return "" if base is str and not optional else None
    origin = typing.get_origin(base) or base
    if origin in (list, dict, tuple):
        return json.loads(text)
    if base is bool:
        if text not in ("True", "False"):
            raise ValueError(f"{text!r}: expected True or False")
        return text == "True"
    if base is int:
        return int(float(text)) if text.endswith(".0") else int(text)
    if base is float:
        return float(text)
    return text


def read_windows(path: str | Path, label: str) -> list[Window]:
    """A samples CSV's timed steps as windows: system `label` ("side mode" where a side is
    named), one per (system, process, round) in the file's order, round 0 (a first pass) out."""
    path = Path(path)
    header, cells = _cells(path, path.name)
    for needed in (label, "process", "round", "ms", "built", "steady"):
        if needed not in header:
            raise BadInput(f"{path}: not a samples CSV: no column {needed!r}")
    grouped: dict[tuple[str, int, int], list[dict]] = {}
    for c in cells:
        system = f"{c['side']} {c[label]}" if c.get("side") else c[label]
        key = (system, int(c["process"]), int(c["round"]))
        if key[2] >= 1:
            grouped.setdefault(key, []).append(c)
    return [
        Window(
            system,
            r,
            "ok",
            tuple(float(c["ms"]) for c in steps),
            tuple(int(c["built"]) for c in steps),
            tuple(c["steady"] == "True" for c in steps),
            process,
        )  # fmt: skip
        for (system, process, r), steps in grouped.items()
    ]


def read_document(path: str | Path) -> dict:
    """A `--json` document (command, rows, gates, outputs, env), refused in one line if not."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: not a nanobench --json document ({e})") from None
    if not isinstance(doc, dict) or not {"command", "rows"} <= set(doc):
        raise BadInput(f"{path}: not a nanobench --json document: no command and rows")
    return doc


NO_SAMPLES = "a --json document carries no samples"


def per_process(windows: list[Window], system: str) -> list[list[float]]:
    """A system's window medians, one list per process: the units of `apart_interval`."""
    by: dict[int, list[float]] = {}
    for w in sorted(windows, key=lambda w: (w.process, w.round)):
        median = w.median_ms() if w.system == system else None
        if median:
            by.setdefault(w.process, []).append(median)
    return list(by.values())


def speedups(windows: list[Window], mode: str, off_name: str = "off") -> list[list[float]]:
    """Each round's off / mode ratio (paired within its run), one list per process."""
    medians = {(w.system, w.round): (w.median_ms(), w.process) for w in windows}
    by: dict[int, list[float]] = {}
    for (system, r), (ms, process) in sorted(medians.items(), key=lambda kv: kv[0][1]):
        off = medians.get((off_name, r), (None, None))[0]
        if system == mode and ms and off:
            by.setdefault(process, []).append(off / ms)
    return list(by.values())
