"""torch's and transformers' own warnings, raised in a command's own process, go to a log whole;
the terminal keeps nanobench's lines."""

from __future__ import annotations

import logging
import warnings

from nanobench.harness.step.third_party import to_log


def test_warnings_and_third_party_records_go_to_the_log_and_the_handlers_come_back(
    tmp_path, capsys, monkeypatch
):
    import torch  # noqa: F401  (its loggers and their stream handlers exist from here)

    dynamo = logging.getLogger("torch._dynamo")
    monkeypatch.setattr(dynamo, "level", logging.WARNING)  # an earlier test may have quieted it
    before = (logging.getLogger("torch").handlers[:], dynamo.handlers[:])
    with to_log(tmp_path / "w.log") as logged:
        warnings.warn("`past_key_values` is deprecated", FutureWarning, stacklevel=1)
        dynamo.warning("Graph break from `Tensor.item()`")
        logging.getLogger("nanobench.mine").warning("ours")  # not third-party: left alone
    text = (tmp_path / "w.log").read_text()
    assert "FutureWarning: `past_key_values` is deprecated" in text
    assert "WARNING torch._dynamo: Graph break from `Tensor.item()`" in text
    assert "ours" not in text and sum(logged.by_source.values()) == 2
    assert "Graph break" not in capsys.readouterr().err
    assert (logging.getLogger("torch").handlers, dynamo.handlers) == before


def test_explain_keeps_dynamos_graph_break_notes_off_the_terminal(tmp_path):
    import subprocess
    import sys

    # A process of its own: an earlier test in this one may have quieted dynamo's loggers.
    args = [sys.executable, "-m", "nanobench.cli", "explain", "--path", "unplanned"]
    result = subprocess.run([*args, "--out", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Graph break" not in result.stderr and "W1203" not in result.stderr
    assert "Graph break" in (tmp_path / "explain-warnings.log").read_text()
    assert "explain-warnings.log" in result.stdout
