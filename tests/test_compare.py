"""`nanobench compare OLD NEW`: two saved runs read back whole, compared, their drift named.

Saved compile runs are written here the way `compile` writes them (`write_rows` over typed rows,
`sample_rows` over windows, `write_env`), so every figure the comparison prints has an
independent source: the rows written, and the geometric means of the samples computed by hand.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compare.runs import load
from nanobench.compile.rows import CompileRow
from nanobench.harness.runs.env_record import collect_env, write_env
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.runs.samples import SAMPLE_COLUMNS, sample_rows
from nanobench.harness.statistics.t_intervals import apart_interval
from nanobench.harness.workers.rounds import Window
from reports.csvio import write_rows

runner = CliRunner()


def saved_run(where, seed: int, scale: float, cpu: str, breaks: int, fell_back: bool = False):
    """A compile --out directory: off and dynamic over 3 processes x 4 rounds, dynamic's step
    `scale` times off's, with dynamic's graph breaks (of one call), its fall-back and the env's
    CPU as given."""
    rng = np.random.default_rng(seed)
    windows = []
    for r in range(1, 13):
        for mode, factor in (("off", 1.0), ("dynamic", scale)):
            ms = tuple(10 * factor * math.exp(0.02 * x) for x in rng.standard_normal(5))
            windows.append(Window(mode, r, "ok", ms, (0,) * 5, (True,) * 5, (r - 1) % 3 + 1))
    rows = [
        CompileRow(mode="off", status="ok", builds=0, unique_graphs=0, graph_breaks=0,
                   fell_back=False, shapes=4, compile_s=0.0, step_ms=10.0, threads=1,
                   backend="inductor", cache="cold", device="cpu",
                   recompile_reasons=[], builds_per_step=[0, 0]),
        CompileRow(mode="dynamic", status="ok", builds=1 + breaks, unique_graphs=1 + breaks,
                   graph_breaks=breaks, graphs_per_call=1 + breaks, breaks_per_call=breaks,
                   break_sites=min(breaks, 1), break_lines=["/a/step.py:7"] if breaks else [],
                   break_hits=[breaks] if breaks else [], recompiles=1, recompile_limit=8,
                   guard_kind="shape", guard_sets_checked=8 if fell_back else None,
                   remedies=["static: mark the width dynamic"] if fell_back else [],
                   fell_back=fell_back, shapes=4, compile_s=30.5,
                   step_ms=10 * scale, speedup=round(1 / scale, 4), threads=1,
                   backend="inductor", cache="cold", device="cpu", worth_compiling="no",
                   recompile_reasons=["0/1: L['x'].size()[1] == 17"], builds_per_step=[1, 0]),
    ]  # fmt: skip
    where.mkdir()
    write_rows(where / "compile.csv", as_dicts(rows), columns(CompileRow))
    write_rows(where / "compile-samples.csv", sample_rows(windows, "mode"),
               ["mode", *SAMPLE_COLUMNS])  # fmt: skip
    write_env(where / "compile-env.json", replace(collect_env(1, ["nanobench"]), cpu_model=cpu))
    return rows, windows


@pytest.fixture
def two_runs(tmp_path):
    old = saved_run(tmp_path / "old", 0, 0.9, "Xeon A", breaks=2, fell_back=True)
    new = saved_run(tmp_path / "new", 1, 0.6, "EPYC B", breaks=0)
    return tmp_path, old, new


def test_a_saved_compile_run_reads_back_as_the_rows_and_windows_written(two_runs):
    where, (rows, windows), _ = two_runs
    run = load(str(where / "old"))
    assert run.command == "compile" and run.rows == rows
    got = {(w.system, w.round, w.process): w.ms for w in run.windows}
    assert got == {(w.system, w.round, w.process): pytest.approx(w.ms, abs=1e-5) for w in windows}
    assert run.env.cpu_model == "Xeon A"


def test_compare_names_the_differing_fact_and_gives_each_timing_its_apart_interval(two_runs):
    where, (_, old_w), (_, new_w) = two_runs
    result = runner.invoke(app, ["compare", str(where / "old"), str(where / "new"), "--json",
                                 "--out", str(where / "out")])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any("cpu_model: Xeon A (old) vs EPYC B (new)" in n for n in doc["notes"])
    assert any(n.startswith("runs taken apart") for n in doc["notes"])
    found = {(c["member"], c["column"]): c for c in doc["rows"]}
    assert (found[("dynamic", "breaks")]["change"], found[("dynamic", "breaks")]["verdict"]) == (
        -2, "fewer")  # fmt: skip

    # By hand: each process's mean log window median (a window's median is its middle step).
    def units(ws, mode):
        by = {}
        for w in ws:
            if w.system == mode:
                by.setdefault(w.process, []).append(math.log(sorted(w.ms)[2]))
        return [np.mean(v) for v in by.values()]

    a, b = units(old_w, "dynamic"), units(new_w, "dynamic")
    step = found[("dynamic", "step_ms")]
    assert step["change"] == pytest.approx(math.exp(np.mean(b) - np.mean(a)), abs=1e-3)
    assert step["low"] < step["change"] < step["high"] and step["verdict"] == "faster"
    assert found[("dynamic", "speedup")]["verdict"] == "faster"  # 1/0.9 -> 1/0.6
    assert (where / "out" / "compare.png").stat().st_size > 10_000
    table = runner.invoke(app, ["compare", str(where / "old"), str(where / "new"),
                                "--out", str(where / "out")])  # fmt: skip
    assert "cpu_model: Xeon A (old) vs EPYC B (new)" in table.output.replace("\n", " ")
    assert any("│ breaks " in line and "-2 fewer" in line for line in table.output.splitlines())
    # Each side's why, as the rows written say it: counts, recompiles, the fall-back's guard.
    said = " ".join(table.output.split())
    assert (
        "old dynamic: one call: 3 graphs, 2 breaks, 1 break site (step.py:7, 2 hits); "
        "the run: 3 builds, 1 recompile (limit 8)"
    ) in said
    assert "new dynamic: one call: 1 graph, 0 breaks, 0 break sites; the run: 1 build" in said
    assert (
        "old dynamic: 1 recompile (shape guards); the failed guard: 0/1: L['x'].size()[1] == 17"
        in said
    )
    assert "old dynamic: dynamo hit recompile_limit (8)" in said
    assert "the guard that sent it there: 0/1: L['x'].size()[1] == 17" in said
    assert "old dynamic: remedy static: mark the width dynamic" in said
    assert "new dynamic: dynamo hit" not in said and "new dynamic: remedy" not in said


def test_compare_gates_hold_a_change_in_ci(two_runs):
    where = two_runs[0]
    base = ["compare", str(where / "new"), str(where / "old"), "--check",
            "--out", str(where / "out")]  # fmt: skip
    worse = runner.invoke(app, [*base, "--no-more", "breaks"])
    assert worse.exit_code == 1 and "FAIL no_more[breaks dynamic]" in worse.output
    slower = runner.invoke(app, [*base, "--no-slower", "step_ms"])
    assert slower.exit_code == 1, slower.output  # 0.6 -> 0.9 of off: decided 50% slower
    forward = ["compare", str(where / "old"), str(where / "new"), *base[3:]]
    better = runner.invoke(app, [*forward, "--no-more", "breaks,graphs", "--no-slower", "step_ms"])
    assert better.exit_code == 0, better.output


def test_the_apart_interval_holds_its_truth_at_its_level():
    # Two runs of one truth (ratio 1), 3 processes each with a process effect: Welch over the
    # processes' means claims a difference in about 5% of 200 pairs (more than 9%: p < 1%).
    rng = np.random.default_rng(7)
    claims = 0
    for _ in range(200):
        sides = [[list(10 * math.exp(0.1 * rng.standard_normal())
                       * np.exp(0.02 * rng.standard_normal(4))) for _ in range(3)]
                 for _ in range(2)]  # fmt: skip
        found = apart_interval(*sides)
        claims += not (found.low <= 1.0 <= found.high)
    assert claims <= 18, claims


@pytest.mark.parametrize(
    "args, says",
    [
        (["nope", "nope2"], "nope: no such directory or file"),
        (
            ["{old}", "{empty}"],
            "no explain.csv, compile.csv, decode.csv, profile.csv, tune.csv here",
        ),
        (["{old}", "{old}", "--no-more", "ops"], "--no-more ops: this command measures"),
    ],
)
def test_a_compare_asked_wrongly_is_one_line_and_exit_2(two_runs, args, says):
    where = two_runs[0]
    (where / "empty").mkdir()
    filled = [a.format(old=where / "old", empty=where / "empty") for a in args]
    result = runner.invoke(app, ["compare", *filled, "--out", str(where / "out")])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_two_saved_decode_runs_compare_by_system(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench
    from tests.test_decode_cmd import fake_sweep

    base = [[1, 2], [3, 4]]
    for name, engine in (("old", 8.0), ("new", 6.0)):
        # rounds drift alike on both systems; the engine's step goes 8 -> 6 ms between runs
        ms = {"engine-eager": [engine * f for f in (1.0, 1.02, 0.98, 1.01, 0.99)],
              "hf-eager": [10.0 * f for f in (1.0, 1.02, 0.98, 1.01, 0.99)]}  # fmt: skip
        monkeypatch.setattr(bench, "sweep_sides", fake_sweep(ms, base))
        args = ["decode", "--systems", "engine-eager,hf-eager", "--out", str(tmp_path / name)]
        assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["compare", str(tmp_path / "old"), str(tmp_path / "new"),
                                 "--out", str(tmp_path / "cmp"), "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    found = {(c["member"], c["column"]): c for c in doc["rows"]}
    assert found[("engine-eager", "step_ms")]["change"] == pytest.approx(0.75, abs=1e-3)
    assert found[("hf-eager", "step_ms")]["change"] == pytest.approx(1.0, abs=1e-3)
    assert found[("engine-eager", "tokens_match")]["verdict"] == "same"
    assert (tmp_path / "cmp" / "compare.png").is_file()
