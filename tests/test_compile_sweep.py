"""The compile sweep against what dynamo itself reports, one fresh process per mode.

These compile for real. The dynamo backend is `eager` (dynamo's guards, counters and recompile
limit are the same; Inductor codegen is not what is under test) except in the one Inductor test.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace

import pandas as pd
import pytest
from typer.testing import CliRunner

from engine.config import PRESETS
from nanobench.cli import app
from tests.helpers import write_model

pytestmark = pytest.mark.slow
runner = CliRunner()


def sweep(tmp_path, *args):
    result = runner.invoke(
        app,
        [
            "compile",
            "--backend",
            "eager",
            "--threads",
            "1",
            # one timed round: these tests check what dynamo did, never a timing
            "--rounds",
            "1",
            "--max-rounds",
            "1",
            "--out",
            str(tmp_path),
            "--json",
            *args,
        ],
    )
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    return {r["mode"]: r for r in doc["rows"]}, doc


@pytest.fixture(scope="module")
def one_layer(tmp_path_factory) -> str:
    """The tiny preset's model in one layer: the same ops, shapes and guards a layer, a quarter
    of the graph to trace (and for Inductor, to lower)."""
    config = replace(PRESETS["tiny"].config, num_layers=1)
    return str(write_model(tmp_path_factory.mktemp("tiny-1-layer"), config))


@pytest.fixture(scope="module")
def open_sweep(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("open"), "--steps", "12")


def test_open_sweep_reproduces_the_recompile_limit(open_sweep):
    rows, doc = open_sweep
    off, dynamic, static = rows["off"], rows["dynamic"], rows["static"]
    assert all(r["status"] == "ok" for r in rows.values())
    assert off["builds"] == 0
    assert static["builds"] == static["recompile_limit"] == 8
    assert static["fell_back"] and static["predicted_fall_back"]
    assert static["guard_kind"] == "shape"
    assert all("size mismatch" in r for r in static["recompile_reasons"])
    assert (
        dynamic["builds"] <= 2 and not dynamic["fell_back"] and not dynamic["predicted_fall_back"]
    )
    for r in (dynamic, static):
        assert r["compile_s"] > 0
        assert r["unique_graphs"] >= 1
    assert off["step_ms"] > 0 and off["speedup"] == 1.0
    assert static["shapes"] == 12
    # past the limit the static arm runs eagerly: never quoted as a compiled speed
    assert static["step_kind"] == "eager-after-fall-back"
    assert static["guard_sets_checked"] == 8 and dynamic["step_kind"] == "compiled"
    # one round: no interval, so whether compiling pays cannot be told
    assert dynamic["worth_compiling"] == "can't tell at this noise"
    assert dynamic["speedup_low"] is None and dynamic["rounds"] == 1
    gates = {g["name"]: g["passed"] for g in doc["gates"]}
    assert gates["check_no_fallback[static]"] is False
    assert gates["check_no_fallback[dynamic]"] is True


def test_open_sweep_writes_csv_and_diagram(open_sweep, tmp_path):
    _, doc = open_sweep
    import pandas as pd

    frame = pd.read_csv(doc["outputs"]["csv"])
    assert list(frame["mode"]) == ["off", "dynamic", "static"]
    for column in (
        "speedup",
        "abs_latency",
        "compilation_latency",
        "unique_graphs",
        "graph_breaks",
        "fallbacks_to_eager",
        "builds",
        "reuse",
        "fell_back",
        "predicted_fall_back",
        "guard_kind",
        "recompile_reasons",
        "breakeven_steps",
    ):
        assert column in frame.columns
    from pathlib import Path

    assert Path(doc["outputs"]["png"]).stat().st_size > 10_000
    # every timed step of every mode: the first pass (round 0, builds shown) and the round
    samples = pd.read_csv(doc["outputs"]["samples"])
    assert list(samples.columns) == ["mode", "process", "round", "step", "ms", "built", "steady"]
    for mode in ("off", "dynamic", "static"):
        mine = samples[samples["mode"] == mode]
        assert sorted(set(mine["round"])) == [0, 1] and len(mine) == 2 * 12
    first = samples[(samples["mode"] == "static") & (samples["round"] == 0)]
    assert list(first["built"])[:8] == [1] * 8 and not first["steady"].iloc[0]
    env = doc["env"]
    assert env["threads"] == 1 and env["torch_version"] and env["schema_version"] == 3
    assert env["argv"] == sys.argv  # the process's own command line (here, pytest's)


def test_bucketed_static_builds_once_per_bucket_and_keeps_its_graph(tmp_path):
    rows, doc = sweep(
        tmp_path,
        "--steps",
        "12",
        "--bucketed",
        "--width-multiple",
        "8",
        "--modes",
        "static",
        "--max-model-len",
        "40",
        "--check",
    )
    static = rows["static"]
    # widths 17..28 at a multiple of 8 cross the buckets 24 and 32: two shapes, two builds.
    assert static["shapes"] == 2 and static["predicted_shapes"] == 2
    assert static["builds"] == 2
    assert not static["fell_back"] and not static["predicted_fall_back"]


def test_a_host_integer_in_the_traced_region_is_a_value_guard_in_both_modes(tmp_path, one_layer):
    rows, _ = sweep(
        tmp_path,
        *("--model", one_layer, "--steps", "10", "--path", "unplanned"),
        *("--modes", "dynamic,static"),
    )
    for mode in ("dynamic", "static"):
        r = rows[mode]
        assert r["guard_kind"] == "value", r["recompile_reasons"]
        assert r["predicted_guard_kind"] == "value"
        assert any("num_tokens" in g for g in r["expected_value_guards"])
        assert any("num_tokens" in reason for reason in r["recompile_reasons"])
        assert r["fell_back"] and r["predicted_fall_back"], f"{mode} must walk past the limit"


def test_one_process_sweep_is_contaminated_and_fresh_processes_are_not():
    """Day 49: a mode run after another in the same process inherits its exhausted budget."""
    import torch
    from torch._dynamo.utils import counters

    from engine.compiled import CompiledDecode
    from engine.engine import Engine
    from engine.sources import materialize_preset
    from nanobench.compile.bench import sweep as fresh_sweep
    from nanobench.compile.dynamo import compiler_for, quiet_dynamo
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.step.dynamo_explain import seeded_prompts

    quiet_dynamo()
    torch._dynamo.reset()
    counters.clear()
    engine = Engine.from_checkpoint("tiny", max_model_len=40)
    builds = {}
    for mode in ("static", "dynamic"):
        engine.compiled = CompiledDecode(
            engine.planned_forward, mode, compiler=compiler_for("eager")
        )
        tokens = engine.prefill(seeded_prompts(4, 16, 4096)).argmax(-1).tolist()
        for _ in range(10):
            tokens = engine.decode_step(tokens).argmax(-1).tolist()
        engine.release_all()
        builds[mode] = engine.compiled.builds
    torch._dynamo.reset()
    spec = WorkerSpec(model=str(materialize_preset("tiny")), steps=10, backend="eager", threads=1)
    fresh = fresh_sweep(spec, ["dynamic"], timeout=300)[0]
    assert builds["static"] == 8
    # Same code object, same engine: dynamic finds the budget spent and never compiles.
    assert builds["dynamic"] == 0
    assert fresh.builds >= 1 and not fresh.fell_back


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    for args, needle in (
        (["--modes", "off,fast"], "--modes"),
        (["--rows", "0"], "--rows"),
        (["--rows", "9", "--max-batch", "8"], "--rows"),
        (["--steps", "-1"], "--steps"),
        (["--processes", "0"], "--processes"),
        (["--device", "cuda"], "--device"),
        (["--model", str(tmp_path / "nope")], "--model"),
        (["--prompt-len", "16", "--steps", "20", "--max-model-len", "30"], "--max-model-len"),
    ):
        result = runner.invoke(app, ["compile", "--out", str(tmp_path / "o"), *args])
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, result.stderr)
        assert "Traceback" not in result.output


@pytest.mark.slow
def test_inductor_dynamic_builds_once_and_reports_inductor_seconds(tmp_path, one_layer):
    result = runner.invoke(
        app,
        [
            "compile",
            "--model",
            one_layer,
            "--modes",
            "dynamic",
            "--steps",
            "4",
            "--threads",
            "1",
            # process 2 is the warm start this test prices; a third and more rounds add nothing
            "--processes",
            "2",
            "--rounds",
            "1",
            "--max-rounds",
            "2",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code in (0, 1), result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["status"] == "ok"
    assert row["builds"] == 1
    assert row["inductor_s"] > 0 and row["compile_s"] >= row["inductor_s"]
    assert row["cache"] == "cold"
    # the second process starts over the caches the first filled: a warm start, priced too
    assert 0 < row["compile_warm_s"] < row["compile_s"]
    # no off row in this sweep: nothing is compared, so no warm verdict is made up either
    assert row["worth_compiling_warm"] is None and row["saving_needed_warm_ms"] is None


def test_two_processes_deal_the_rounds_and_the_samples_name_each_ones_process(tmp_path):
    # 4 rounds over 2 workers per mode: rounds 1, 3 in process 1 and 2, 4 in process 2
    rows, doc = sweep(
        tmp_path,
        *("--modes", "off,dynamic", "--steps", "3", "--processes", "2"),
        *("--rounds", "4", "--max-rounds", "4"),
    )
    assert all(r["status"] == "ok" and r["rounds"] == 4 for r in rows.values())
    samples = pd.read_csv(doc["outputs"]["samples"])
    by_round = samples.groupby(["mode", "round"])["process"].unique()
    assert {k: list(v) for k, v in by_round.items()} == {
        (mode, r): [p]
        for mode in ("off", "dynamic")
        for r, p in ((0, 1), (1, 1), (2, 2), (3, 1), (4, 2))
    }
    # the first pass (round 0) is process 1's: its builds are the row's
    first = samples[(samples["mode"] == "dynamic") & (samples["round"] == 0)]
    assert int(first["built"].sum()) == rows["dynamic"]["builds"] >= 1
    # nothing built while timed, in either worker
    assert rows["dynamic"]["builds_in_windows"] == 0
    # --backend eager keeps no cache for process 2 to read: its compile is no warm start
    assert rows["dynamic"]["compile_warm_s"] is None and rows["off"]["compile_warm_s"] is None


def test_rounds_stop_at_the_first_look_once_every_gate_is_decided(tmp_path):
    # A horizon of 1 step must repay the whole compile in one step: hundreds of ms a step
    # against a saving of well under one, so worth_compiling is "no" from the first look (round
    # 5), while --rel-ci 1e-6 would never call the intervals tight before --max-rounds 30; the
    # run stops at the first look where the speedup is also known to +-9.5%, or at the cap.
    rows, doc = sweep(
        tmp_path,
        *("--modes", "off,dynamic", "--steps", "3", "--processes", "1", "--horizon", "1"),
        *("--rounds", "1", "--max-rounds", "30", "--rel-ci", "0.000001", "--budget-s", "600"),
    )
    dynamic = rows["dynamic"]
    schedule = (5, 8, 12, 18, 30)
    assert dynamic["worth_compiling"] == "no" and dynamic["rounds"] in schedule
    low, high, estimate = dynamic["speedup_low"], dynamic["speedup_high"], dynamic["speedup"]
    if dynamic["rounds"] < 30:
        assert (high - low) / 2 / estimate <= 0.095
    # one process: no later worker, so no warm start is priced, and none is made up
    assert dynamic["compile_warm_s"] is None and dynamic["worth_compiling_warm"] is None
    # look j spends alpha(t_j) - alpha(t_j-1), alpha(t) = 0.05 ln(1 + (e - 1) t), t = round / 30
    j = schedule.index(dynamic["rounds"])

    def spent(r: int) -> float:
        return 0.05 * math.log(1 + (math.e - 1) * r / 30)

    level = 1 - (spent(schedule[j]) - (spent(schedule[j - 1]) if j else 0.0))
    assert dynamic["ci_level"] == pytest.approx(level, abs=1e-4)
    gate = next(g for g in doc["gates"] if g["name"] == "check_compile_amortised[dynamic]")
    assert gate["verdict"] == "fail"
