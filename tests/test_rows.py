"""Typed rows fail loudly: a payload with a renamed, dropped or extra field names it."""

from __future__ import annotations

import dataclasses

import pytest

from nanobench.harness.runs.rows import RowSchemaError, as_dicts, columns, rebuild


@dataclasses.dataclass(frozen=True)
class StepRow:
    mode: str
    builds: int
    fell_back: bool
    step_ms: float | None = None  # a failed row has no timing


def test_a_full_payload_rebuilds_its_row():
    row = rebuild(StepRow, {"mode": "static", "builds": 8, "fell_back": True, "step_ms": 3.5})
    assert row == StepRow("static", 8, True, 3.5)
    assert rebuild(StepRow, {"mode": "off", "builds": 0, "fell_back": False}).step_ms is None


def test_a_renamed_field_is_an_error_naming_it():
    payload = {"mode": "static", "build_count": 8, "fell_back": True}
    with pytest.raises(RowSchemaError, match="StepRow: unknown field 'build_count'"):
        rebuild(StepRow, payload)


def test_a_dropped_field_never_reads_as_zero():
    with pytest.raises(RowSchemaError, match="StepRow: payload lacks field 'fell_back'"):
        rebuild(StepRow, {"mode": "static", "builds": 8})


def test_columns_and_dicts_follow_the_fields():
    assert columns(StepRow) == ["mode", "builds", "fell_back", "step_ms"]
    row = StepRow("dynamic", 1, False, 2.0)
    assert as_dicts([row, {"x": 1}]) == [
        {"mode": "dynamic", "builds": 1, "fell_back": False, "step_ms": 2.0},
        {"x": 1},
    ]
