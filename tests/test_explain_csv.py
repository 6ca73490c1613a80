"""explain.csv read back: `harness.runs.saved.read_rows` returns the rows explain wrote, field for field.

The rows written are built here by hand, with every kind of cell explain writes (ints, bools,
None in an `int | None`, empty and full JSON lists of strings and of dicts, an empty text), and
one written by the command itself is checked against its own --json rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.runs.saved import read_rows
from nanobench.harness.step.dynamo_explain import ExplainRow
from reports.csvio import write_rows

CORPUS = Path(__file__).parent / "corpus"
BREAK = {"hits": 2, "reason": 'Unsupported "x, y"', "frame": "a.py:3", "source": "n = x.item()"}
ROWS = [
    ExplainRow(layers=2, path="unplanned", attention="reference", graphs=3, graph_breaks=2,
               break_sites=1, ops=40, guards=17, value_guards=1,
               value_guard_text=["L['view'].n == 13"], break_reasons=[BREAK],
               remedies=["plan outside"], graph_dtypes=["float32"], dtype="float32", threads=4,
               side="before"),
    ExplainRow(layers=None, path="target step 0", attention="", graphs=1, graph_breaks=0,
               break_sites=0, ops=0, guards=0, value_guards=0,
               value_guard_text=[], break_reasons=[], target="x.py:factory"),
]  # fmt: skip


def test_rows_come_back_as_written(tmp_path):
    path = write_rows(tmp_path / "explain.csv", as_dicts(ROWS), columns(ExplainRow))
    assert read_rows(path, ExplainRow) == ROWS


def test_the_commands_csv_reads_back_as_its_json_rows(tmp_path):
    spec = f"{CORPUS / 'item_in_step.py'}:factory"
    args = ["explain", "--target", spec, "--vs", spec, "--rows", "2", "--prompt-len", "4"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    back = read_rows(tmp_path / "explain.csv", ExplainRow)
    assert as_dicts(back) == rows and [r.side for r in back] == ["before", "after"]
    assert back[0].break_reasons and back[0].threads is not None


def test_a_missing_column_is_refused_by_name(tmp_path):
    keep = [c for c in columns(ExplainRow) if c != "graph_breaks"]
    written = [{k: v for k, v in r.items() if k != "graph_breaks"} for r in as_dicts(ROWS)]
    path = write_rows(tmp_path / "explain.csv", written, keep)
    with pytest.raises(BadInput, match="no column 'graph_breaks'"):
        read_rows(path, ExplainRow)


def test_explain_writes_what_its_help_promises_and_compare_reads_its_env(tmp_path):
    """--out's help promises the CSV, the diagram and the env record; `compare` of two explain
    runs on one machine then names no missing record and no interval spread (explain has none)."""
    runner = CliRunner()
    for name, path in (("old", "planned"), ("new", "unplanned")):
        result = runner.invoke(app, ["explain", "--layers", "2", "--path", path, "--out",
                                     str(tmp_path / name)])  # fmt: skip
        assert result.exit_code == 0, result.output
        written = {p.name for p in (tmp_path / name).iterdir()}
        assert {"explain-env.json", "explain.csv", "explain.png"} <= written, written
    env = json.loads((tmp_path / "old" / "explain-env.json").read_text())
    assert env["threads"] >= 1 and env["torch_version"]
    compared = runner.invoke(app, ["compare", str(tmp_path / "old"), str(tmp_path / "new"),
                                   "--out", str(tmp_path / "cmp")])  # fmt: skip
    assert compared.exit_code == 0, compared.output
    assert "no env record" not in compared.stdout and "runs taken apart" not in compared.stdout
    assert "load (1 min average" not in compared.stdout, "explain times nothing"
