"""Diagrams reach disk whole and leave no figure open: `reports.csvio.save_figure` and a command.

A process that draws many diagrams (a sweep runs a command per point) must not accumulate
pyplot figures; pyplot's own figure registry (`plt.get_fignums`) is the witness.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from reports.csvio import save_figure


@pytest.fixture(autouse=True)
def headless():
    """Agg, as every report selects it, and no figure left from another test."""
    matplotlib.use("Agg")
    plt.close("all")


def test_a_saved_figure_is_a_png_and_is_closed(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    path = save_figure(fig, tmp_path / "d.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.png"]


def test_a_failed_save_leaves_no_partial_file_and_closes_the_figure(tmp_path, monkeypatch):
    fig, _ = plt.subplots()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(fig, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig, tmp_path / "d.png")
    assert list(tmp_path.iterdir()) == []
    assert plt.get_fignums() == []


def test_a_command_leaves_no_figure_open(tmp_path):
    """pool-budget draws through pyplot and returns with its figure closed."""
    result = CliRunner().invoke(app, ["pool-budget", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pool-budget.png").is_file()
    assert plt.get_fignums() == []
