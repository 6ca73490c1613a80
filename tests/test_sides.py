"""A comparison is one value: `Sides` built once from a spec's shared block, read by every piece.

What it is: `Sides.of` held to what each command's options ask for (alone, before and after,
knobs against plain: the sides in order, the pairs, the side that names the run, what a knob
side runs and borrows), a before side's bad input named by the option typed for it, and one
end-to-end `compile` per kind in its default table output through the CLI, its sweep stood in
for (members and windows as a fleet would report them), so the heading, the change table's two
columns, a change's member name, the CSV's side column and the fleet's members all come from
the one value.
What it is not: the statistics of a change (tests/test_compile_vs.py, test_compile_try.py) or
a real fleet (those files and tests/test_startup_vs.py run real workers).
Invariant: expected values are the options' own words, never read off the value under test.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.spec import CompileSpec
from nanobench.decode.roofline import PROBE
from nanobench.decode.spec import DecodeSpec
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.sides import ALONE, BEFORE_AFTER, KNOBS, Sides
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Window
from nanobench.startup.spec import StartupSpec
from tests.helpers import text_tables

runner = CliRunner()
KNOB = "cpp-wrapper"
ROOT = Path(__file__).resolve().parent.parent


def test_a_plain_run_is_one_side_named_by_nothing():
    sides = Sides.of(CompileSpec(modes=("off", "dynamic")))
    assert (sides.kind, sides.names, sides.pairs, sides.main) == (ALONE, ("",), (), "")
    assert not sides.compared
    assert sides.planned() == [Member("", "off"), Member("", "dynamic")]


def test_before_and_after_are_the_options_typed_for_each_side():
    spec = CompileSpec(target="new.py:f", vs="old.py:f", modes=("off", "dynamic"))
    sides = Sides.of(spec)
    assert (sides.kind, sides.names, sides.pairs, sides.main) == (
        BEFORE_AFTER, ("before", "after"), (("before", "after"),), "after")  # fmt: skip
    assert sides["before"].spec.target == "old.py:f" and sides["after"].spec.target == "new.py:f"
    assert sides.labels == ("before", "after")
    assert sides.change_name("after", "dynamic") == "dynamic"
    path = Sides.of(CompileSpec(vs_path="unplanned"))
    assert path["before"].spec.path == "unplanned" and path["after"].spec.path == "planned"
    dtypes = Sides.of(DecodeSpec(vs_dtype="bfloat16"))
    assert dtypes["before"].spec.dtype == "bfloat16" and dtypes["after"].spec.dtype == "auto"
    starts = Sides.of(StartupSpec(target="new.py:f", vs="old.py:f"))
    assert starts["before"].spec.target == "old.py:f" and starts.main == "after"


def test_a_knob_side_runs_what_the_knob_acts_on_and_borrows_the_rest_from_plain():
    sides = Sides.of(CompileSpec(modes=("off", "dynamic"), tries=(KNOB, "freezing")))
    assert (sides.kind, sides.names, sides.main) == (KNOBS, ("plain", KNOB, "freezing"), "plain")
    assert sides.pairs == (("plain", KNOB), ("plain", "freezing"))
    assert sides.labels == ("plain", "knob") and sides.knobs == (KNOB, "freezing")
    knob = sides[KNOB]
    assert (knob.members, knob.knob, knob.lender, knob.borrows) == (
        ("dynamic",), KNOB, "plain", ("off",))  # fmt: skip
    assert knob.spec.knob == KNOB and sides["plain"].spec.knob == ""
    assert sides.change_name(KNOB, "dynamic") == f"{KNOB} dynamic"
    assert Member(KNOB, "off") not in sides.planned()
    decode = Sides.of(DecodeSpec(systems=("engine-eager", "engine-compiled"), tries=(KNOB,)))
    assert decode[KNOB].members == ("engine-compiled",)
    assert set(decode[KNOB].borrows) == {PROBE, "engine-eager"}, "its floor and references"


def test_a_before_side_s_bad_input_names_the_option_typed_for_it():
    sides = Sides.of(DecodeSpec(vs_model="nowhere"))

    def resolve(spec):
        if spec.model == "nowhere":
            raise BadInput("--model nowhere: no such preset or directory")
        return spec.model

    with pytest.raises(BadInput, match=r"^--vs-model nowhere: no such preset"):
        sides.resolved(resolve)
    assert Sides.of(DecodeSpec()).resolved(resolve) == {"": "tiny"}


# -- one compile per kind, through the CLI, in its default table output ------------------------

BASE = dict(status="ok", builds=1, fell_back=False, guard_kind="shape", recompile_limit=8,
            unique_graphs=1, graph_breaks=0, shapes=1)  # fmt: skip


def fake_sweep(seen: dict):
    """`compile.run.interleaved_sweep` stood in for: each member's row and six rounds of
    windows, a knob or after side's dynamic 20% faster; what the run handed it kept in `seen`."""

    def sweep(workers, members, plan, **kw):
        from nanobench.compile.rows import CompileRow

        seen.update(members=list(members), workers=workers, sides=kw["sides"])
        for m in members:
            row = CompileRow(mode=m.name, side=m.side, compile_s=0.0 if m.name == "off" else 3.0,
                             **{**BASE, "builds": 0 if m.name == "off" else 1})  # fmt: skip
            kw["listener"].on_row(replace(row))
        rng = np.random.default_rng(3)
        for r in range(1, 7):
            for m in members:
                ms = {"off": 4.0, "dynamic": 2.0}[m.name]
                ms *= 0.8 if m.side not in ("", "plain", "before") and m.name != "off" else 1.0
                ms *= math.exp(0.01 * rng.standard_normal())
                kw["listener"].on_window(Window(m.name, r, "ok", (ms,) * 3, (0,) * 3,
                                                (True,) * 3, (r - 1) % 3 + 1, m.side))  # fmt: skip

    return sweep


def run_table(tmp_path, monkeypatch, *extra):
    import nanobench.compile.run as compile_run

    seen: dict = {}
    monkeypatch.setattr(compile_run, "interleaved_sweep", fake_sweep(seen))
    args = ["compile", "--modes", "off,dynamic", "--no-history", "--out", str(tmp_path), *extra]
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    with open(tmp_path / "compile.csv") as f:
        written = [(r["side"], r["mode"]) for r in csv.DictReader(f)]
    return result.stdout, written, seen


def test_a_plain_compile_run_tables_its_modes_with_no_change_table(tmp_path, monkeypatch):
    out, written, seen = run_table(tmp_path, monkeypatch)
    assert seen["members"] == [Member("", "off"), Member("", "dynamic")]
    assert written == [("", "off"), ("", "dynamic")]
    assert "compiled decode" in out and "(after)" not in out and "knobs" not in out
    assert not (tmp_path / "compile-changes.csv").exists()


def test_a_before_and_after_compile_run_tables_each_mode_before_against_after(
    tmp_path, monkeypatch
):
    before, after = (
        f"{ROOT / 'tests' / 'corpus' / n}.py:factory" for n in ("item_in_step", "static_kv")
    )
    out, written, seen = run_table(tmp_path, monkeypatch, "--target", after, "--vs", before)
    assert [m.side for m in seen["members"]] == ["before", "before", "after", "after"]
    assert sorted(written) == sorted(
        (s, m) for s in ("before", "after") for m in ("off", "dynamic")
    )
    assert "(after) vs " in out.replace("\n", " ")
    table = next(t for t in text_tables(out) if "before" in t.header and "after" in t.header)
    members = {r[0] for r in table.rows if r[0]}
    assert members == {"off", "dynamic"}, "a before-and-after change is named by its mode"
    assert "faster" in out, "the after side's dynamic is 20% faster, paired by round"


def test_a_knob_compile_run_tables_each_knob_against_plain(tmp_path, monkeypatch):
    out, written, seen = run_table(tmp_path, monkeypatch, "--try", KNOB)
    assert seen["members"] == [Member("plain", "off"), Member("plain", "dynamic"),
                               Member(KNOB, "dynamic")]  # fmt: skip
    assert seen["workers"][KNOB].knob == KNOB and seen["workers"]["plain"].knob == ""
    assert sorted(written) == sorted([("plain", "off"), ("plain", "dynamic"), (KNOB, "dynamic")])
    assert f"knobs {KNOB} against plain torch.compile" in out.replace("\n", " ")
    table = next(t for t in text_tables(out) if "plain" in t.header and "knob" in t.header)
    members = {r[0] for r in table.rows if r[0]}
    assert members == {f"{KNOB} dynamic"}, "a knob's change is named by the knob and the mode"
    assert "off borrowed from plain: eager off reads no knob" in " ".join(out.split())
