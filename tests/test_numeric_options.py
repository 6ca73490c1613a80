"""Every numeric option of every command is validated: a negative value is one line, exit 2.

The options are read off the commands' own signatures, so an option added later is covered
without editing this file.
"""

from __future__ import annotations

import inspect
import typing

import pytest
from typer.testing import CliRunner

from nanobench.cli import app

ALIASES = {"compilebench", "bucketbench", "capturebench"}


def numeric_options() -> list[tuple[str, str]]:
    found = []
    for info in app.registered_commands:
        if info.name in ALIASES:
            continue
        hints = typing.get_type_hints(info.callback)
        for name in inspect.signature(info.callback).parameters:
            kinds = {hints[name], *typing.get_args(hints[name])}
            if kinds & {int, float}:
                found.append((info.name, "--" + name.replace("_", "-")))
    return found


def test_the_walk_finds_the_options_it_must():
    found = set(numeric_options())
    assert {("compile", "--threads"), ("decode", "--threads"), ("buckets", "--max-waste")} <= found
    assert len(found) >= 40


@pytest.mark.parametrize("command,option", numeric_options())
def test_a_negative_number_is_one_line_exit_2(command, option, tmp_path, monkeypatch):
    def measuring(*args, **kwargs):
        raise AssertionError(f"{command} {option} -3 started measuring")

    # A value that slips through validation must fail here, not start a minutes-long sweep.
    monkeypatch.setattr("nanobench.harness.workers.fresh.run_fresh", measuring)
    monkeypatch.setattr("nanobench.harness.workers.fresh.LiveWorker", measuring)
    outputs = [] if command == "explain" else ["--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, [command, option, "-3", *outputs])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and option in lines[0], result.output
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
