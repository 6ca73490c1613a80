"""The README's factory, as a user copies it: beside a module of their own, run from its folder.

The target is `entry.py:factory`, which imports the README's `my_step.py` as a sibling module,
as a script imports one; `explain` and `compile` run it in their default table output, and
what they report is held against what `torch._dynamo` says of the same step.
"""

from __future__ import annotations

import sys

import pytest

from nanobench.cli import app
from tests.helpers import text_tables
from tests.test_as_used import README, page_blocks
from tests.test_decode_cmd import runner


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (body,) = page_blocks(README, "python")
    (tmp_path / "my_step.py").write_text(body)
    (tmp_path / "entry.py").write_text("from my_step import factory  # a module beside it\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the target's folder is put first
    sys.modules.pop("my_step", None)  # another page's my_step, imported by an earlier test
    yield tmp_path
    sys.modules.pop("my_step", None)


def test_the_readmes_factory_beside_a_module_of_its_own_explains_as_dynamo_does(folder):
    import torch

    from nanobench.harness.step.targets import make_target

    result = runner.invoke(app, ["explain", "--target", "entry.py:factory", "--step", "3"])
    assert result.exit_code == 0, result.output
    table = next(t for t in text_tables(result.stdout) if "graphs" in t.header)
    made = make_target("entry.py:factory", rows=4, prompt_len=16, steps=5, device="cpu",
                       dtype="float32")  # fmt: skip
    args, kwargs = made.step_inputs(3)
    torch._dynamo.reset()
    truth = torch._dynamo.explain(made.forward)(*args, **kwargs)
    assert table.column("graphs") == [str(truth.graph_count)]
    assert table.column("breaks") == [str(truth.graph_break_count)]


@pytest.mark.slow
def test_the_readmes_factory_compiles_from_its_folder(folder):
    args = ["compile", "--target", "entry.py:factory", "--modes", "off,dynamic", "--steps", "3",
            "--backend", "eager", "--threads", "1", "--processes", "1", "--rounds", "1",
            "--max-rounds", "1", "--budget-s", "1", "--out", str(folder / "out")]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    table = next(t for t in text_tables(result.stdout) if "mode" in t.header)
    # a cell wrapped onto a second line ("can't tell at / this noise") reads as a row of its own
    modes = [(m, s) for m, s in zip(table.column("mode"), table.column("status")) if m]
    assert modes == [("off", "ok"), ("dynamic", "ok")], result.stdout
