"""`compile --vs`: two versions of a step in one fleet, and what changed between them.

The change's figures are checked against peers: each side's builds and breaks against dynamo's
own `CompileCounter` run of the same corpus step (`tests/test_corpus.py`), each timing change
against the geometric mean of the saved samples computed here by hand, and its interval by a
null check (two identical sides decide no more often than the level allows).
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.bench import comparisons
from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import CompileSpec
from nanobench.compile.vs import changes
from nanobench.harness.runs.change import (
    CANT_TELL,
    FASTER,
    SLOWER,
    Change,
    comparison_gates,
    count_change,
    no_more_gates,
    no_slower_gates,
)
from nanobench.harness.runs.sides import Sides
from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import RoundPlan, Window, run_rounds
from tests.helpers import noisy_fleet
from tests.test_corpus import CORPUS, IDIOMS, PROMPT, ROWS, build, dynamo_compile

runner = CliRunner()
STEPS = 8
SIDES_MODES = [(s, m) for s in ("before", "after") for m in ("off", "dynamic")]
BEFORE_AFTER = Sides.of(CompileSpec(modes=("off", "dynamic"), target="new.py:f", vs="old.py:f"))


def rows_for(windows: list[Window]) -> list[CompileRow]:
    """Both sides' rows, ok, with the step ms and speedup `changes` prints beside its ratios."""
    return [CompileRow(mode=m, side=s, status="ok", builds=0, unique_graphs=1, graph_breaks=0,
                       fell_back=False, shapes=1, step_ms=1.0)
            for s, m in SIDES_MODES]  # fmt: skip


def test_a_comparison_pairs_each_mode_after_against_before_and_each_side_against_off():
    members = [Member(s, m) for s, m in SIDES_MODES]
    found = {
        (c.name, str(c.numerator), str(c.denominator)) for c in comparisons(members, BEFORE_AFTER)
    }
    assert found == {
        ("before dynamic", "before off", "before dynamic"),
        ("after dynamic", "after off", "after dynamic"),
        ("off after/before", "after off", "before off"),
        ("dynamic after/before", "after dynamic", "before dynamic"),
    }
    alone = [Member("", m) for m in ("off", "dynamic")]
    pairs = [(c.numerator, c.denominator) for c in comparisons(alone, Sides.of(CompileSpec()))]
    assert pairs == [(Member("", "off"), Member("", "dynamic"))]


def window(member: Member, r: int, ms: float, process: int = 1) -> Window:
    steps = (ms, ms * 1.01, ms * 0.99)
    return Window(member.name, r, "ok", steps, (0, 0, 0), (True,) * 3, process, member.side)


def test_the_changes_are_the_geometric_means_of_the_paired_rounds():
    rng = np.random.default_rng(3)
    ms = {(s, m): 10.0 * (0.5 if m == "dynamic" else 1.0) * (0.8 if s == "after" else 1.0)
          for s, m in SIDES_MODES}  # fmt: skip
    windows = [
        window(Member(s, m), r, ms[(s, m)] * math.exp(0.05 * rng.standard_normal()))
        for r in range(1, 9)
        for s, m in SIDES_MODES
    ]
    found = {
        (c.member, c.column): c for c in changes(rows_for(windows), windows, 0.95, BEFORE_AFTER)
    }
    # By hand: each round's median is its middle step, the window's own ms.
    med = {(str(w.member), w.round): w.ms[0] for w in windows}

    def gm(values):
        return math.exp(np.mean(np.log(values)))

    step = gm([med[("after dynamic", r)] / med[("before dynamic", r)] for r in range(1, 9)])
    assert found[("dynamic", "step_ms")].change == pytest.approx(step, abs=1e-4)
    speedup = gm(
        [(med[("after off", r)] / med[("after dynamic", r)])
         / (med[("before off", r)] / med[("before dynamic", r)]) for r in range(1, 9)]
    )  # fmt: skip
    assert found[("dynamic", "speedup")].change == pytest.approx(speedup, abs=1e-4)
    assert found[("dynamic", "step_ms")].verdict == FASTER  # 0.8 by construction, 5% noise
    assert found[("off", "step_ms")].verdict == FASTER
    assert found[("dynamic", "speedup")].verdict == CANT_TELL or speedup != pytest.approx(1.0)
    assert found[("dynamic", "builds")].verdict == "same"


def test_two_identical_sides_decide_a_change_no_more_often_than_the_level():
    # 20 seeded A/A runs through the run's own stop rule: more than 3 claims has p = 1.6%.
    names = [Member(s, m) for s, m in SIDES_MODES]
    plan = RoundPlan(12, 12, 0.03, 1e9)
    cmps = comparisons(names, BEFORE_AFTER)
    claimed = {"step_ms": 0, "speedup": 0}
    for seed in range(20):
        fleet = noisy_fleet(3, seed, {n: 0.15 for n in names}, hits=0.0)
        windows = run_rounds(fleet, plan, cmps)
        for c in changes(rows_for(windows), windows, 0.95, BEFORE_AFTER):
            if c.member == "dynamic" and c.column in claimed:
                assert c.low is not None, c
                claimed[c.column] += c.verdict != CANT_TELL
    assert claimed["step_ms"] <= 3 and claimed["speedup"] <= 3, claimed


def test_no_more_fails_on_more_and_no_slower_needs_the_interval_inside_the_margin():
    more = count_change("dynamic", "breaks", 0, 2)
    fewer = count_change("dynamic", "breaks", 2, 0)
    assert [g.verdict for g in no_more_gates([more, fewer], ("breaks",))] == [FAIL, PASS]
    assert no_more_gates([more], ("graphs",)) == []

    def timing(column, est, low, high):
        return Change("dynamic", column, "timing", 1.0, est, est, low, high, rounds=8)

    verdicts = [g.verdict for g in no_slower_gates([
        timing("step_ms", 0.9, 0.85, 0.97),   # decided faster
        timing("step_ms", 1.02, 0.98, 1.04),  # within 5% slower, known
        timing("step_ms", 1.2, 1.1, 1.3),     # decided more than 5% slower
        timing("step_ms", 1.0, 0.8, 1.25),    # can't tell
        timing("speedup", 0.8, 0.75, 0.85),   # the speedup fell by 20%: slower
        timing("speedup", 1.3, 1.2, 1.4),     # the speedup grew
    ], ("step_ms", "speedup"), 0.05)]  # fmt: skip
    assert verdicts == [PASS, PASS, FAIL, INCONCLUSIVE, FAIL, PASS]


def test_a_comparisons_gates_fail_each_member_that_failed_then_the_named_columns():
    from nanobench.compile.spec import CompileSpec

    spec = CompileSpec(vs_path="unplanned", no_more=("breaks",))
    more = count_change("dynamic", "breaks", 0, 2)
    found = comparison_gates({"after static": "timeout"}, spec, [more])
    assert [(g.name, g.verdict, g.detail) for g in found][0] == (
        "measured[after static]", FAIL, "timeout",
    )  # fmt: skip
    assert [g.verdict for g in found[1:]] == [FAIL] and len(found) == 2
    assert comparison_gates({}, CompileSpec(vs_path="unplanned"), [more]) == []


@pytest.mark.parametrize(
    "args, says",
    [
        (["--vs", "x.py:factory"], "--vs x.py:factory: the before side of a --target"),
        (["--no-more", "breaks"], "--no-more and --no-slower compare two sides"),
        (["--vs-path", "unplanned", "--no-more", "ops"], "--no-more ops: this command measures"),
        (["--vs-path", "unplanned", "--check"], "--check on a comparison gates the columns"),
        (["--vs-path", "unplanned", "--no-more", "bogus"], "'bogus': expected some of"),
        (["--vs-path", "unplanned", "--no-slower", "ready_s"], "--no-slower ready_s: this command"),
        (["--target", f"{CORPUS / 'static_kv'}.py:factory", "--vs", "nope.py:factory"],
         "nanobench: error: --vs 'nope.py:factory': no such file nope.py"),
    ],
)  # fmt: skip
def test_a_comparison_asked_wrongly_is_one_line_and_exit_2(args, says, tmp_path):
    result = runner.invoke(app, ["compile", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def spec_of(name: str) -> str:
    return f"{CORPUS / name}.py:factory"


def vs_run(tmp_path, after: str, before: str, *extra: str):
    # --max-rounds bounds the run; a short --budget-s could stop it below 5 rounds (no interval)
    # on a loaded box.
    return runner.invoke(app, [
        "compile", "--target", spec_of(after), "--vs", spec_of(before), "--modes", "off,dynamic",
        "--rows", str(ROWS), "--prompt-len", str(PROMPT), "--steps", str(STEPS),
        "--backend", "eager", "--threads", "1", "--processes", "2", "--rounds", "5",
        "--max-rounds", "5", "--budget-s", "600", "--out", str(tmp_path), *extra,
    ])  # fmt: skip


@pytest.fixture(scope="module")
def item_gone(tmp_path_factory):
    out = tmp_path_factory.mktemp("vs")
    result = vs_run(out, "static_kv", "item_in_step", "--json", "--export-json",
                    str(out / "records.json"))  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def idiom(name: str):
    return next(i for i in IDIOMS if i.name == name)


def explained_first_call(name: str):
    """torch._dynamo.explain of the step's first call: what compile's probe traces."""
    made = build(idiom(name), STEPS)
    args, kwargs = made.step_inputs(0)
    with torch.no_grad():
        return torch._dynamo.explain(made.forward)(*args, **kwargs)


@pytest.mark.slow
def test_the_item_break_gone_is_fewer_builds_and_breaks_as_dynamo_counts_them(item_gone):
    out, doc = item_gone
    before = dynamo_compile(idiom("item_in_step"), "dynamic")
    after = dynamo_compile(idiom("static_kv"), "dynamic")
    assert before["graph_breaks"] > after["graph_breaks"] == 0
    rows = {(r["side"], r["mode"]): r for r in doc["rows"]}
    for side, dynamo in (("before", before), ("after", after)):
        assert rows[(side, "dynamic")]["builds"] == dynamo["builds"]
        assert rows[(side, "dynamic")]["graph_breaks"] == dynamo["graph_breaks"]
    # Each side's one-call counts are dynamo's, under the names explain gives them.
    for side, name in (("before", "item_in_step"), ("after", "static_kv")):
        traced, row = explained_first_call(name), rows[(side, "dynamic")]
        counts = (traced.graph_count, traced.graph_break_count)
        assert (row["graphs_per_call"], row["breaks_per_call"]) == counts
    found = {(c["member"], c["column"]): c for c in doc["changes"]}
    assert found[("dynamic", "graphs")]["change"] < 0
    assert found[("dynamic", "builds")]["change"] == after["builds"] - before["builds"] < 0
    assert found[("dynamic", "breaks")]["verdict"] == "fewer"
    speedup = found[("dynamic", "speedup")]
    assert speedup["low"] is not None and speedup["low"] <= speedup["change"] <= speedup["high"]
    assert speedup["verdict"] in (FASTER, SLOWER, CANT_TELL)
    # Every output is on disk: both sides' rows, their samples by side, the changes, the figure.
    with open(out / "compile.csv") as f:
        assert sorted((r["side"], r["mode"]) for r in csv.DictReader(f)) == sorted(rows)
    with open(out / "compile-samples.csv") as f:
        assert {(r["side"], r["mode"]) for r in csv.DictReader(f)} == set(rows)
    with open(out / "compile-changes.csv") as f:
        assert len(list(csv.DictReader(f))) == len(doc["changes"])
    assert (out / "compare.png").stat().st_size > 10_000


@pytest.mark.slow
def test_the_comparison_gates_hold_a_change_in_ci_and_the_table_says_it(tmp_path):
    # count gates are decided by the first pass: one worker a member and one round each
    once = ("--processes", "1", "--rounds", "1", "--max-rounds", "1")
    gone = vs_run(tmp_path / "a", "static_kv", "item_in_step", "--check", "--no-more",
                  "breaks,builds", *once)  # fmt: skip
    assert gone.exit_code == 0, gone.output
    assert "pass no_more[breaks dynamic]: breaks 1 -> 0 (fewer)" in gone.output
    cells = [line for line in gone.output.splitlines() if "│ breaks " in line]
    assert any("-1 fewer" in line for line in cells), gone.output
    assert "static_kv.py:factory (after) vs" in " ".join(gone.output.split())
    back = vs_run(tmp_path / "b", "item_in_step", "static_kv", "--check", "--no-more", "breaks",
                  *once)  # fmt: skip
    assert back.exit_code == 1, back.output
    assert "FAIL no_more[breaks dynamic]: breaks 0 -> 1 (more)" in back.output


@pytest.mark.slow
def test_the_exported_records_read_back_as_the_rows_in_the_oss_benchmark_format(item_gone):
    out, doc = item_gone
    records = json.loads((out / "records.json").read_text())
    assert records and all(
        set(r) == {"benchmark", "model", "metric"}
        and {"name", "mode", "dtype", "extra_info"} <= set(r["benchmark"])
        and {"name", "type", "backend", "origins"} <= set(r["model"])
        and {"name", "benchmark_values"} <= set(r["metric"])
        for r in records
    )
    by = {
        (r["benchmark"]["extra_info"]["side"], r["benchmark"]["extra_info"]["mode"],
         r["metric"]["name"]): r
        for r in records
    }  # fmt: skip
    for row in doc["rows"]:
        key = (row["side"], row["mode"])
        assert by[(*key, "step_latency_ms")]["metric"]["benchmark_values"] == [row["step_ms"]]
        assert by[(*key, "graph_breaks")]["metric"]["benchmark_values"] == [row["graph_breaks"]]
        model = by[(*key, "builds")]["model"]["name"]
        assert model.endswith("item_in_step.py:factory" if row["side"] == "before"
                               else "static_kv.py:factory")  # fmt: skip
    dynamic = by[("after", "dynamic", "speedup")]["metric"]
    row = next(r for r in doc["rows"] if (r["side"], r["mode"]) == ("after", "dynamic"))
    assert (dynamic["extra_info"]["low"], dynamic["extra_info"]["high"]) == (
        row["speedup_low"],
        row["speedup_high"],
    )


def test_a_side_with_no_figure_is_not_measured_and_a_figure_without_interval_cant_tell():
    from nanobench.harness.runs.change import NOT_MEASURED, count_change, timing_change
    from reports.change import changed

    # --processes 1 measures no warm seconds on either side: nothing to tell about
    warm = timing_change("dynamic", "compile_warm_s", None, None, None)
    assert warm.verdict == NOT_MEASURED and changed(warm) == "not measured"
    assert count_change("dynamic", "builds", 3, None).verdict == NOT_MEASURED
    undecided = timing_change("dynamic", "step_ms", 2.0, 1.9, None)
    assert undecided.verdict == CANT_TELL and changed(undecided) == "0.95x (no CI)"
