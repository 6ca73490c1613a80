"""A long command's estimate: the cost model by hand, the machine's earlier runs, the line.

The model's constants are patched to round numbers here, so each expected value is a sum done
by hand, not the module's own arithmetic; the earlier runs are written into the store as a
file, not through `Durations.record`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.commands import kinds
from nanobench.compile.spec import CompileSpec
from nanobench.harness.cli import console
from nanobench.harness.cli.console import Status
from nanobench.harness.runs import eta
from nanobench.harness.runs.durations import FILE, Durations, settings_key
from nanobench.harness.runs.history_store import RunHistory
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.run_spec import MeasuredSpec
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.fleet import Fleet

ROUND_COSTS = {"START_S": 10.0, "COLD_COMPILE_S": 100.0, "WARM_COMPILE_S": 10.0,
               "LATER_S": 20.0, "OWN_S": 10.0, "WINDOW_S": 1.0, "STEP_S": 0.5,
               "TYPICAL_ROUNDS": 5}  # fmt: skip


def round_costs(monkeypatch) -> None:
    for name, value in ROUND_COSTS.items():
        monkeypatch.setattr(eta, name, value)


def test_the_cost_model_is_its_formula_done_by_hand(monkeypatch):
    round_costs(monkeypatch)
    # rounds: 3 windows x (1 + 4 x 0.5) = 9 s a round; the typical 5 of up to 30 (45 s), within
    # budget 100 + 9; the run's own 10 s
    plan = eta.Plan(starts=3, cold_compiles=2, warm_compiles=1, later=6, cores=4, windows=3,
                    steps=4, max_rounds=30, budget_s=100.0)  # fmt: skip
    assert eta.model_s(plan) == 30 + 200 + 10 + 2 * 20 + 45 + 10
    # 5 rounds would be 45 s: the budget (20 s) stops the round that passes it, 20 + 9
    budgeted = eta.Plan(1, 0, 0, windows=3, steps=4, max_rounds=30, budget_s=20.0)
    assert eta.model_s(budgeted) == 10 + 29 + 10
    # fewer rounds allowed than the stop rule typically takes: the bound
    assert eta.model_s(eta.Plan(1, 0, 0, windows=3, steps=4, max_rounds=2, budget_s=100)) == 38


def test_a_further_graph_costs_its_share_of_a_compile(monkeypatch):
    round_costs(monkeypatch)
    monkeypatch.setattr(eta, "FURTHER_GRAPH_SHARE", 0.5)
    # 2 cold x 100 + 1 warm x 10 = 210 s a graph; 1.5 graphs a compile: 210 x (1 + 0.5 x 0.5)
    plan = eta.Plan(3, 2, 1, graphs=1.5)
    assert eta.compile_model_s(plan) == 262.5
    assert "2 cold compiles x 100 s x 1.5 graphs" in eta.model_terms(plan)
    # a store line written before the field: one graph a compile
    doc = {"plan": {k: v for k, v in asdict(plan).items() if k != "graphs"}, "wall_s": 9.0,
           "compile_s": 1.0, "rounds": 0, "rounds_s": 0.0}  # fmt: skip
    assert eta.Figures.from_json(doc).plan.graphs == 1.0


def test_tunes_plan_counts_the_graph_a_batch_of_1_adds(tmp_path):
    """A trace with batches of 1 beside larger ones: dynamic builds a graph for each (dynamo's
    0/1 specialisation, held to dynamo in test_cost_compile); static's open widths pass the
    recompile limit at one size already, so the mix adds it nothing."""
    from nanobench.tune.spec import TuneSpec

    served = tmp_path / "served.csv"
    served.write_text("rows\n" + "\n".join(["1", "4", "8", "4"]) + "\n")
    mixed = TuneSpec(batch_trace=str(served))
    assert mixed.plan(3, ("dynamic", "dynamic"), cores=2).graphs == 2.0
    assert mixed.plan(3, ("dynamic", "static"), cores=2).graphs == 1.5
    assert TuneSpec().plan(3, ("dynamic", "dynamic"), cores=2).graphs == 1.0
    above_1 = tmp_path / "above_1.csv"
    above_1.write_text("rows\n2\n4\n8\n")
    assert TuneSpec(batch_trace=str(above_1)).plan(2, ("dynamic",), cores=2).graphs == 1.0
    # its windows decode --steps at each of the mix's 3 sizes
    assert mixed.plan(3, ("dynamic",), cores=2).steps == 3 * TuneSpec().steps


def write_store(root: Path, docs: list) -> None:
    """The store's file as a run leaves it: one JSON line each (a str: a line as it is)."""
    (root / FILE).parent.mkdir(parents=True, exist_ok=True)
    lines = [d if isinstance(d, str) else json.dumps(d) for d in docs]
    (root / FILE).write_text("\n".join(lines) + "\n")


def test_a_recorded_run_of_its_kind_drives_the_next_estimate(tmp_path, capsys, monkeypatch):
    """Another run of the same kind (command, model, device, ...), other counts: its wall
    seconds split into compiles, worker set-ups and rounds, each scaled to this run's counts."""
    round_costs(monkeypatch)
    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path))
    before = CompileSpec(modes=("off", "dynamic"), steps=8, max_rounds=5)
    then = plan_of(before, cores=2)  # 2 starts, 1 cold compile, 4 later workers, 2 windows
    kind = settings_key("compile", {"kind": eta.kind_of(before)})
    earlier = {"key": "its own settings", "wall_s": 200.0, "at": "x", "kind": kind,
               "plan": asdict(then), "compile_s": 60.0, "rounds": 5, "rounds_s": 20.0}  # fmt: skip
    older = {**earlier, "wall_s": 900.0, "compile_s": 800.0}  # not the latest of the kind
    another = {**earlier, "kind": "another kind", "wall_s": 5.0}
    write_store(tmp_path, [older, earlier, '{"kind": "' + kind + '", "wall_s"', another])
    now = CompileSpec(modes=("off", "dynamic", "static"), steps=16, max_rounds=5)
    eta.announce("compile", now, partial(plan_of, now), Status(None, quiet=False), cores=2)
    said = capsys.readouterr().err
    # by hand, in the round costs: compiles then 1 x 100 s, now 2 x 100 s; worker set-ups then
    # 10 + 2 x 10 + ceil(4 / 2) x 20 = 70 s, now 10 + 3 x 10 + ceil(6 / 2) x 20 = 100 s; a
    # round then 2 x (1 + 8 x 0.5) = 10 s, now 3 x (1 + 16 x 0.5) = 27 s; it ran all 5 rounds
    # it was allowed, so this run's bound, 5, at 20 / 5 s a round then
    compiles_s = 60 * 200 / 100
    setups_s = (200 - 60 - 20) * 100 / 70
    rounds_s = 5 * (20 / 5) * 27 / 10
    expected = console.span(compiles_s + setups_s + rounds_s)  # 345 s
    assert f"this run takes about {expected}, scaled" in said, said
    assert "it took 3 min 20 s: compiles 1 min 00 s" in said and "model" not in said, said


def test_a_run_its_stop_rule_ended_early_lends_its_round_count(monkeypatch):
    round_costs(monkeypatch)
    then = eta.Plan(1, 0, 0, windows=1, steps=2, max_rounds=30, budget_s=500)  # 2 s a round
    earlier = eta.Figures(then, wall_s=100.0, rounds=6, rounds_s=30.0)  # decided at round 6
    now = eta.Plan(1, 0, 0, windows=2, steps=2, max_rounds=30, budget_s=500)  # 4 s a round
    # set-ups 70 s at the same counts; 6 rounds of 5 s x 4 / 2
    assert eta.scaled_s(now, earlier) == 70 + 6 * 10
    # no compile then, one now: the model's 100 s at the machine's pace, 70 s for 10 + 10
    compiled = eta.Plan(1, 1, 0, windows=2, steps=2, max_rounds=30, budget_s=500)
    assert eta.scaled_s(compiled, earlier) == 100 * 70 / 20 + 70 + 6 * 10


def test_the_compile_plan_counts_the_default_run():
    # off, dynamic, static: three first workers, two of them compiling cold with Inductor; two
    # later workers each (--processes 3), set up two at a time on two cores
    plan = plan_of(CompileSpec(), cores=2)
    assert plan == eta.Plan(3, 2, 0, 6, 2, 3, 16, 30, 120.0)
    warm = plan_of(CompileSpec(cache="warm", backend="inductor"), cores=2)
    assert (warm.cold_compiles, warm.warm_compiles) == (0, 2)


def plan_of(spec, cores: int) -> eta.Plan:
    return spec.plan(Sides.of(spec), cores)


def test_every_measured_command_has_its_own_estimate():
    """A measured command whose spec brings no plan of its own fails here, never silently at
    run time: its kind's spec type overrides `MeasuredSpec.plan`, and the plan reads."""
    measured = {n: k for n, k in kinds().items() if issubclass(k, RunKind)}
    assert set(measured) == {"compile", "decode", "startup", "profile"}
    for name, kind in measured.items():
        assert kind.spec_type.plan is not MeasuredSpec.plan, name
        assert isinstance(plan_of(kind.spec_type(), cores=2), eta.Plan), name


def test_three_earlier_runs_give_their_median_and_a_torn_line_is_skipped(tmp_path):
    key = settings_key("compile", {"steps": 2})
    lines = [json.dumps({"key": key, "wall_s": 200.0, "at": "x"}),
             '{"key": "' + key + '", "wall_s": 99',  # cut short by a killed run
             json.dumps({"key": "another", "wall_s": 5.0, "at": "x"}),
             json.dumps({"key": key, "wall_s": 290.0, "at": "x"}),
             "not json at all",
             json.dumps({"key": key, "wall_s": 230.0, "at": "x"})]  # fmt: skip
    (tmp_path / FILE).parent.mkdir()
    (tmp_path / FILE).write_text("\n".join(lines) + "\n")
    walls = Durations(tmp_path).walls(key)
    assert walls == [200.0, 290.0, 230.0]  # median 230 s, mean 240 s
    line = eta.Estimate.of(walls, None).line(len(walls))
    assert "about 3 min 50 s" in line and "from 3 earlier runs" in line, line
    assert "3 min 20 s to 4 min 50 s" in line and "model" not in line, line


def test_a_missing_or_unreadable_store_is_the_model_and_quiet_says_nothing(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path))
    (tmp_path / FILE).mkdir(parents=True)  # a folder where the file is: unreadable, not fatal
    status = Status(None, quiet=False)
    eta.announce("compile", CompileSpec(), partial(plan_of, CompileSpec()), status, cores=2)
    said = capsys.readouterr()
    assert said.out == "" and "by a model (3 starts x" in said.err, said
    assert "no earlier run of this kind on this machine" in said.err
    model = eta.model_s(plan_of(CompileSpec(), 2))
    assert abs(status.expected - model) <= 5, (status.expected, model)  # to 10 s, no finer
    eta.announce("compile", CompileSpec(), partial(plan_of, CompileSpec()), Status(None, quiet=True),
                 cores=2)  # fmt: skip
    assert capsys.readouterr().err == ""


def test_a_finished_run_is_recorded_and_a_failed_one_is_not(tmp_path, monkeypatch):
    timer = eta.Timer("k", time.monotonic() - 5)
    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path))
    timer.done(ok=False)
    assert not (tmp_path / FILE).exists()
    timer.done(ok=True)
    (wall,) = Durations(tmp_path).walls("k")
    assert 5 <= wall < 60
    assert RunHistory(tmp_path).keys() == []  # beside the history, never one of its keys
    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path / FILE / "under-a-file"))
    timer.done(ok=True)  # not writable: the run is not recorded, and goes on


def test_the_progress_line_ends_with_the_time_elapsed_and_left():
    assert console.progress_note(65, 200) == "1 min 05 s elapsed, ~2 min 15 s left"
    assert console.progress_note(300, 200) == "5 min 00 s elapsed, past the ~3 min 20 s estimated"
    status = Status(None, quiet=False)
    status("round 2: [red] dynamic/off 0.80x")
    assert status.__rich__().plain == "round 2: [red] dynamic/off 0.80x"  # text, not markup
    status.expect(200)
    assert status.__rich__().plain == (
        "round 2: [red] dynamic/off 0.80x (0 s elapsed, ~3 min 20 s left)"
    )


def test_a_compile_says_its_estimate_before_its_first_worker_and_records_its_time(
    tmp_path, monkeypatch
):
    spawn = Fleet.spawn

    def marked(self, name, process, *args, **kwargs):
        import sys

        sys.stderr.write(f"SPAWN {name} {process}\n")
        return spawn(self, name, process, *args, **kwargs)

    monkeypatch.setattr(Fleet, "spawn", marked)
    args = ["compile", "--modes", "off,dynamic", "--backend", "eager", "--steps", "2",
            "--rounds", "1", "--max-rounds", "1", "--processes", "1", "--no-history",
            "--threads", "1", "--json", "--out", str(tmp_path / "o")]  # fmt: skip
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout stays one JSON document
    lines = result.stderr.splitlines()
    said = [i for i, ln in enumerate(lines) if ln.startswith("nanobench: this run takes about")]
    spawned = [i for i, ln in enumerate(lines) if ln.startswith("SPAWN ")]
    assert len(said) == 1 and spawned and said[0] < spawned[0], result.stderr
    assert "by a model" in lines[said[0]], lines[said[0]]
    stored = Path(os.environ["NANOBENCH_HISTORY"]) / FILE
    (doc,) = [json.loads(ln) for ln in stored.read_text().splitlines()]
    assert 0 < doc["wall_s"] <= took
    assert doc["kind"] and doc["plan"] == asdict(eta.Plan(2, 0, 1, 0, eta.usable_cores(), 2, 2, 1,
                                                          120.0))  # fmt: skip
    assert doc["rounds"] == 1 and 0 < doc["rounds_s"] < doc["wall_s"], doc
    assert doc["compile_s"] > 0, doc  # eager's dynamo seconds: the warm compile a plan counts


RAISES = "def factory(*, rows, prompt_len, steps, device, dtype):\n    raise ValueError('no')\n"


def test_bad_input_prints_no_estimate(tmp_path):
    """A run refused as bad input says no estimate: a rule across options (in the parent), and
    a `--target` whose factory raises at once (in its first worker), in each command that
    takes one; the error is said, the estimate never."""
    step = tmp_path / "boom.py"
    step.write_text(RAISES)
    refused = [["compile", "--rounds", "3", "--max-rounds", "2"],
               *[[c, "--target", f"{step}:factory", "--backend", "eager", "--steps", "2"]
                 for c in ("compile", "startup", "tune")]]  # fmt: skip
    for args in refused:
        result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
        assert result.exit_code == 2, (args, result.output)
        assert "nanobench: error:" in result.stderr, (args, result.stderr)
        assert "takes about" not in result.stderr, (args, result.stderr)


def test_a_targets_estimate_waits_for_its_first_worker(tmp_path, monkeypatch):
    """A `--target`'s factory first runs in a worker: the estimate is said once the first
    worker has reported (its factory ran), before the next one starts."""
    spawn = Fleet.spawn

    def marked(self, name, process, *args, **kwargs):
        import sys

        sys.stderr.write(f"SPAWN {name} {process}\n")
        return spawn(self, name, process, *args, **kwargs)

    monkeypatch.setattr(Fleet, "spawn", marked)
    args = ["compile", "--target", "tests/corpus/static_kv.py:factory", "--modes", "off,dynamic",
            "--backend", "eager", "--steps", "2", "--rounds", "1", "--max-rounds", "1",
            "--processes", "1", "--threads", "1", "--json", "--out", str(tmp_path / "o")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    said = [i for i, ln in enumerate(lines) if ln.startswith("nanobench: this run takes about")]
    spawned = [i for i, ln in enumerate(lines) if ln.startswith("SPAWN ")]
    assert len(said) == 1 and len(spawned) == 2 and spawned[0] < said[0] < spawned[1], lines
