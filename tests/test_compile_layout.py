"""compile's layout: the worker's spec travels as a frozen dataclass's fields, the first pass is
one typed row, and the sweep does not import the command.

No cycle through compile and no harness import of a command are the whole tree's promises, in
`tests/test_layout.py`, whose import graph (read from the source) this file reuses.
"""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest

from nanobench.compile.rows import FIRST_PASS, CompileRow
from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.harness.runs.rows import RowSchemaError
from tests.test_layout import graph


def test_the_sweep_does_not_import_the_command():
    assert "nanobench.compile.command" not in graph()["nanobench.compile.bench"]


def test_a_worker_spec_carries_every_option_it_shares_with_the_command():
    """Every WorkerSpec field set from a CompileSpec whose values are all off their defaults."""
    asked = CompileSpec(
        rows=3,
        max_batch=5,
        prompt_len=7,
        steps=9,
        bucketed=True,
        width_multiple=64,
        max_model_len=96,
        block_size=8,
        cache="warm",
        backend="eager",
        path="unplanned",
        device="cuda",
        threads=2,
        target="pkg.mod:factory",
        knob="cpp-wrapper",  # a --try side's, as `sides()` sets it
    )
    got = asked.worker("/models/m", "bfloat16", "/traces")
    expected = {
        "model": "/models/m", "mode": "off", "rows": 3, "max_batch": 5, "prompt_len": 7,
        "steps": 9, "bucketed": True, "width_multiple": 64, "max_model_len": 96,
        "block_size": 8, "cache": "warm", "backend": "eager", "device": "cuda",
        "dtype": "bfloat16", "seed": 0, "decode_path": "unplanned", "threads": 2,
        "target": "pkg.mod:factory", "trace": "/traces", "process": 1, "knob": "cpp-wrapper",
        "probe": True,  # compile's rows report the probe; only tune's race turns it off
        "batch_mix": (), "capture_sizes": (),  # tune's workload and capture list: none
    }  # fmt: skip
    assert asdict(got) == expected


def test_a_worker_spec_defaults_are_the_commands():
    """A worker spec left at its defaults asks for what `nanobench compile` with none does."""
    spec = WorkerSpec(model="tiny")
    assert (spec.rows, spec.max_batch, spec.prompt_len, spec.steps) == (4, 8, 16, 16)
    assert (spec.block_size, spec.width_multiple, spec.max_model_len) == (16, 128, 2048)
    assert (spec.cache, spec.backend, spec.decode_path, spec.device) == (
        "cold", "inductor", "planned", "cpu",
    )  # fmt: skip


def test_the_worker_refuses_a_spec_field_it_does_not_know():
    """A payload is rebuilt as WorkerSpec(**payload): a renamed key fails before any build."""
    from nanobench.compile.session import open_session

    payload = {**asdict(WorkerSpec(model="tiny")), "block": 16}
    with pytest.raises(RowSchemaError, match="unknown field 'block'"):
        open_session(payload)


def test_a_first_pass_is_a_part_of_the_row_under_the_rows_names():
    row = {f.name for f in fields(CompileRow)}
    assert set(FIRST_PASS) <= row, sorted(set(FIRST_PASS) - row)
    assert {"builds", "compile_s", "fell_back", "recompile_reasons", "step_ms"} <= set(FIRST_PASS)
