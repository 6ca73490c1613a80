"""Every output path a run writes is tried before any process starts: a bad one is one line and
exit 2 at once, never found out after the run has been measured."""

from __future__ import annotations

import pytest

from nanobench.cli import app
from tests.test_decode_cmd import runner


@pytest.fixture
def no_worker(monkeypatch):
    from nanobench.harness.workers import fresh

    def refuse(*args, **kwargs):
        raise AssertionError("a worker was started before the output paths were tried")

    monkeypatch.setattr(fresh.LiveWorker, "__init__", refuse)


@pytest.mark.parametrize("command", ["compile", "decode", "startup"])
def test_an_export_path_that_cannot_be_written_is_exit_2_before_any_worker(
    command, tmp_path, no_worker
):
    bad = "/proc/nanobench-nope/records.json"  # /proc takes no new folder, even for root
    args = [command, "--out", str(tmp_path / "o"), "--export-json", bad]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--export-json {bad}: cannot write there" in lines[0], lines


def test_a_writable_export_path_is_left_as_it_was_found(tmp_path):
    from nanobench.harness.cli.validate import out_file

    path = tmp_path / "deeper" / "records.json"
    out_file(str(path), "--export-json")
    assert not path.exists(), "tried, not left behind"
    path.write_text("kept")
    out_file(str(path), "--export-json")
    assert path.read_text() == "kept"
