"""`nanobench tune` as a user runs it: a real race on the built-in model (eager backend: dynamo
traces, nothing is generated, so it is quick), read in the table and in --json, its figures
held to what its own files say computed another way; --check's gates on races whose ends are
set."""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.workers.member import Member
from nanobench.tune.bench import DROPPED, SURVIVOR, Outcome, RaceResult
from nanobench.tune.rows import ConfigRow
from nanobench.tune.run import gates

RACE = ["tune", "--backend", "eager", "--knobs", "guard-filter", "--rows", "2", "--steps", "6",
        "--max-rounds", "8", "--processes", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    with pytest.MonkeyPatch.context() as mp:
        # a module's fixture runs before conftest's own_history: its own history folder
        mp.setenv("NANOBENCH_HISTORY", str(tmp_path_factory.mktemp("history")))
        result = CliRunner().invoke(app, [*RACE, "--out", str(out), "--json", "--export-json",
                                          str(out / "records.json")])  # fmt: skip
        assert result.exit_code == 0, result.output
        listed = CliRunner().invoke(app, ["history", "--json"])
    return out, json.loads(result.stdout), json.loads(listed.stdout)


@pytest.mark.slow
def test_the_json_names_every_configuration_and_a_decision(raced):
    out, doc, _ = raced
    names = [r["config"] for r in doc["rows"]]
    assert names == ["off", "dynamic", "dynamic + guard-filter"]
    assert doc["race"]["stop"] in ("one left", "equivalent", "max rounds", "budget")
    decision = doc["decision"]
    assert decision["steps_per_start"] == 10_000
    assert decision["choice"] in names
    # the choice is the cheapest start among off and the survivors, by a plain scan
    fit = [r for r in doc["rows"] if r["outcome"] == "survivor" or r["mode"] == "off"]

    def start_s(r):
        paid = r["compile_warm_s"] if r["compile_warm_s"] is not None else r["compile_s"] or 0
        return paid + 10_000 * r["step_ms"] / 1e3

    assert decision["choice"] == min(fit, key=start_s)["config"]
    called = any(line.startswith("step = torch.compile(") for line in doc["paste"])
    assert doc["paste"] and called == (decision["choice"] != "off")


@pytest.mark.slow
def test_the_ratios_match_the_rounds_file(raced):
    """vs eager from the rounds CSV's window medians, paired by round, geometric mean."""
    out, doc, _ = raced
    by = defaultdict(dict)
    with (out / "tune-rounds.csv").open() as f:
        for row in csv.DictReader(f):
            by[row["config"]][int(row["round"])] = float(row["window_ms"])
    for r in doc["rows"]:
        if r["config"] == "off" or r["step_ms"] is None:
            continue
        rounds = sorted(set(by["off"]) & set(by[r["config"]]))
        logs = [math.log(by[r["config"]][k] / by["off"][k]) for k in rounds]
        assert r["vs_off"] == pytest.approx(math.exp(statistics.mean(logs)), rel=1e-3)
        assert r["vs_off_low"] <= r["vs_off"] <= r["vs_off_high"]
        assert r["step_ms"] == pytest.approx(statistics.median(by[r["config"]].values()), rel=1e-3)


@pytest.mark.slow
def test_the_table_says_the_horizon_the_race_and_the_paste(tmp_path):
    result = CliRunner().invoke(app, [*RACE, "--out", str(tmp_path), "--steps-per-start", "500"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "configuration" in text and "vs eager" in text
    verdict = next(line for line in text.splitlines() if "--steps-per-start" in line)
    assert verdict.startswith("at 500 steps a start (--steps-per-start): ship ")
    assert "race: " in text and "paste (" in text and "time: " in text
    assert "guard-filter: unsafe" in text
    assert (tmp_path / "tune-race.png").stat().st_size > 10_000


@pytest.mark.slow
def test_the_records_carry_each_timed_configurations_figures(raced):
    out, doc, _ = raced
    records = json.loads((out / "records.json").read_text())
    by = {(r["benchmark"]["extra_info"]["config"], r["metric"]["name"]): r for r in records}
    for row in doc["rows"]:
        if row["step_ms"] is None:
            continue
        step = by[(row["config"], "step_latency_ms")]
        assert step["metric"]["benchmark_values"] == [row["step_ms"]]
        assert step["benchmark"]["extra_info"]["outcome"] == row["outcome"]
        assert step["benchmark"]["extra_info"]["race_stop"] == doc["race"]["stop"]
        backend = step["model"]["backend"]
        assert backend == "eager" if row["mode"] == "off" else backend.startswith("eager dynamic")


@pytest.mark.slow
def test_compare_reads_two_saved_races(raced, tmp_path):
    import shutil

    out, doc, _ = raced
    old = tmp_path / "old"
    shutil.copytree(out, old)
    # the same race against itself: every step change is exactly 1, every outcome the same
    result = CliRunner().invoke(app, ["compare", str(old), str(out), "--out", str(tmp_path / "c"),
                                      "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    changes = json.loads(result.stdout)["rows"]
    steps = [c for c in changes if c["column"] == "step_ms" and c["before"] is not None]
    assert steps and all(c["change"] == 1.0 for c in steps)
    assert all(c["verdict"] == "same" for c in changes if c["column"] == "outcome")
    # a configuration one race lacks is said, not dropped silently
    lines = (old / "tune.csv").read_text().splitlines()
    (old / "tune.csv").write_text("\n".join(ln for ln in lines if not ln.startswith("dynamic +"))
                                  + "\n")  # fmt: skip
    result = CliRunner().invoke(app, ["compare", str(old), str(out), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "only in new: dynamic + guard-filter" in result.stdout


@pytest.mark.slow
def test_a_factory_that_raises_is_one_line_exit_2(tmp_path):
    step = tmp_path / "boom.py"
    step.write_text("def factory(*, rows, prompt_len, steps, device, dtype):\n"
                    "    raise ValueError('no weights here')\n")  # fmt: skip
    result = CliRunner().invoke(app, ["tune", "--target", f"{step}:factory", "--backend", "eager",
                                      "--knobs", "guard-filter", "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("nanobench: error:")]
    assert errors == [f"nanobench: error: --target '{step}:factory': the factory raised "
                      "ValueError: no weights here"]  # fmt: skip
    assert "Traceback" not in result.output and not (tmp_path / "o" / "tune.csv").exists()


@pytest.mark.slow
def test_a_race_is_recorded_in_the_machines_history(raced):
    out, doc, listed = raced
    timed = {r["config"] for r in doc["rows"] if r["mode"] != "off" and r["step_ms"] is not None}
    keys = [k for k in listed["keys"] if k["command"] == "tune"]
    assert {k["comparison"] for k in keys} == {f"{c} over off" for c in timed}
    assert all(k["runs"] == 1 for k in keys)
    assert any(line.startswith("history: 0 earlier races' figures read, "
                               f"{len(timed)} configurations recorded") for line in doc["lines"])  # fmt: skip


def race_ended(stop: str, dynamic: str) -> tuple[RaceResult, list[ConfigRow]]:
    found = RaceResult(stop=stop, outcomes={Member("plain", "dynamic"): Outcome(dynamic)})
    rows = [ConfigRow("dynamic", "dynamic", "", dynamic, "1.30x the best's step" if dynamic ==
                      DROPPED else "")]  # fmt: skip
    return found, rows


@pytest.mark.parametrize(
    "stop, dynamic, verdicts",
    [
        ("one left", DROPPED, ["fail", "pass"]),
        ("equivalent", SURVIVOR, ["pass", "pass"]),
        ("budget", SURVIVOR, ["pass", "inconclusive"]),
        ("max rounds", DROPPED, ["fail", "inconclusive"]),
    ],
)
def test_check_fails_a_dropped_dynamic_and_cannot_tell_an_undecided_race(stop, dynamic, verdicts):
    found, rows = race_ended(stop, dynamic)
    assert [g.verdict for g in gates(found, rows, 0.02)] == verdicts


@pytest.mark.slow
def test_a_cold_compile_past_its_budget_is_stopped_while_it_compiles(tmp_path):
    # Inductor's cold compile of the built-in model takes seconds; a 1 s budget must stop it
    # then, not once it has finished and been timed ("took N s, past ..."), and with nothing to
    # race no figure is drawn
    result = CliRunner().invoke(app, ["tune", "--knobs", "guard-filter", "--rows", "2", "--steps",
                                      "6", "--compile-budget-s", "1", "--budget-s", "30",
                                      "--max-rounds", "5", "--out", str(tmp_path), "--json"])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    rows = {r["config"]: r for r in json.loads(result.stdout)["rows"]}
    for name in ("dynamic", "dynamic + guard-filter"):
        assert rows[name]["outcome"] == "disqualified", rows[name]
        assert rows[name]["reason"].startswith(
            "its cold compile passed --compile-budget-s 1: stopped while compiling"
        ), rows[name]["reason"]
        assert rows[name]["compile_s"] is None  # killed before it could say
    assert not (tmp_path / "tune-race.png").exists()
    assert "No artists" not in result.output
