"""The machine's run history: what one run cannot see, lent back from the runs before it.

Simulated runs with a known true ratio (1.0, log 0) and three layers of noise: an effect every
process of a run shares, one per process, and one per round. The expected values are that
truth, never a row under test.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from nanobench.decode import history as decode_history
from nanobench.decode.derive import derive
from nanobench.decode.roofline import PROBE
from nanobench.decode.rows import SystemRow
from nanobench.harness.runs.code_identity import CodeIdentity
from nanobench.harness.runs.history_store import KeyFacts, RunHistory
from nanobench.harness.statistics.history import KEEP_RUNS, MIN_RUNS, Calibration, Past, past_of
from nanobench.harness.statistics.stats import ratio_interval
from tests.test_decode_cmd import run_spec

K, R = 2, 10  # processes, rounds: decode's default processes


def simulated_run(rng, run_sd=0.06, process_sd=0.01, round_sd=0.03, shift=0.0, k=K):
    """One run's paired window medians (numerator, denominator) and process labels."""
    run = rng.normal(shift, run_sd)
    labels = [(r % k) + 1 for r in range(R)]
    effects = {p: rng.normal(0, process_sd) for p in range(1, k + 1)}
    y = np.array([run + effects[p] + rng.normal(0, round_sd) for p in labels])
    den = np.full(R, 2.0)
    return list(den * np.exp(y)), list(den), labels


def history_of(rng, runs: int, **kw) -> Calibration:
    """`runs` simulated earlier runs, screened as the store screens them."""
    return Calibration.of(tuple(past_of(*simulated_run(rng, **kw)) for _ in range(runs)))


def at(day: int, hour: int = 0) -> str:
    return f"2026-12-{day:02d}T{hour:02d}:00:00Z"


def facts(comparison: str = "a/b") -> KeyFacts:
    code = CodeIdentity("", "m", "0.1.0", "n", "e", "5.0")
    return KeyFacts("compile", comparison, "", "tiny", code, {"cpu": "x"}, {"rows": 1})


def covers(interval) -> bool:
    return interval.low <= 1.0 <= interval.high


def test_an_effect_every_process_of_a_run_shares_is_covered_only_with_history():
    rng = np.random.default_rng(7)
    own = with_history = 0
    trials = 200
    for _ in range(trials):
        calibration = history_of(rng, 8)
        num, den, labels = simulated_run(rng)
        own += covers(ratio_interval(num, den, labels))
        found = calibration.interval(num, den, labels, 0.95)
        # a refusal (a run unlike its history) keeps its own interval, as the row would
        with_history += covers(found or ratio_interval(num, den, labels))
    print(
        f"coverage of the true ratio: own {own / trials:.0%}, with history {with_history / trials:.0%}"
    )
    assert with_history / trials >= 0.90
    assert own / trials < 0.85, "the simulation must hold an effect one run cannot see"


def test_without_a_run_effect_history_keeps_the_level_and_cuts_two_processes_wild_widths():
    rng = np.random.default_rng(11)
    hits = own_hits = 0
    ratios = []
    trials = 200
    for _ in range(trials):
        calibration = history_of(rng, 10, run_sd=0.0, process_sd=0.03)
        num, den, labels = simulated_run(rng, run_sd=0.0, process_sd=0.03)
        found = calibration.interval(num, den, labels, 0.95) or ratio_interval(num, den, labels)
        own = ratio_interval(num, den, labels)
        hits, own_hits = hits + covers(found), own_hits + covers(own)
        ratios.append((found.high / found.low) / (own.high / own.low))
    # two processes' own interval misses more than 5% here (one degree of freedom of process
    # variance, its Satterthwaite df leaning on the rounds); history holds the level
    assert hits / trials >= 0.92 and hits > own_hits
    low, high = np.percentile(ratios, [10, 90])
    assert low < 0.7, "where two processes' own interval blows up, history's is far narrower"
    assert high < 1.15, "and it is seldom wider"


def test_a_run_unlike_its_history_keeps_its_own_interval():
    rng = np.random.default_rng(3)
    calibration = history_of(rng, 8)
    num, den, labels = simulated_run(rng, run_sd=0.0, shift=0.5)  # the machine changed
    assert calibration.interval(num, den, labels, 0.95) is None
    num, den, labels = simulated_run(rng, run_sd=0.0)
    found = calibration.interval(num, den, labels, 0.95)
    assert found is not None
    assert found.variance_from.startswith("history: 8 earlier runs on this machine since 20")


def test_fewer_than_min_runs_lend_nothing():
    rng = np.random.default_rng(5)
    num, den, labels = simulated_run(rng)
    assert history_of(rng, MIN_RUNS - 1).interval(num, den, labels, 0.95) is None
    assert history_of(rng, MIN_RUNS).interval(num, den, labels, 0.95) is not None


def test_tau2_is_the_spread_of_the_estimates_less_their_within_part():
    pasts = tuple(Past(y, 0.001, 10, at(1)) for y in (0.0, 0.1, 0.2))
    # var(0, 0.1, 0.2) with ddof 1 is 0.01, by hand
    assert Calibration(pasts).tau2() == pytest.approx(0.01 - 0.001)
    assert Calibration((Past(0.0, 0.5, 10, at(1)),) * 3).tau2() == 0.0, "never below zero"


def test_the_store_keeps_the_latest_runs_and_skips_a_torn_line(tmp_path):
    store, key = RunHistory(tmp_path), facts()
    for i in range(KEEP_RUNS + 3):
        store.record(key, Past(i / 100, 0.01, 10, at(1, i % 24)))
    with open(tmp_path / f"{key.key()}.jsonl", "a") as f:
        f.write('{"log_ratio": 1.0, "within')  # a run killed mid-write
        f.write('\n{"tool": "not ours"}\n')  # a foreign line
    found = store.calibration(key.key())
    assert found.runs == KEEP_RUNS and found.pasts[0].log_ratio == 0.03
    assert found.skipped == 2 and "2 unreadable lines skipped" in found.source()
    assert store.calibration("absent").runs == 0
    assert json.loads((tmp_path / f"{key.key()}.jsonl").read_text().splitlines()[0])["rounds"] == 10
    assert store.facts(key.key()) == key, "the key's facts are kept beside its runs"


def steady_windows(rng, systems, rounds=6, run_effect=0.0):
    from nanobench.harness.workers.rounds import Window

    base = {"engine-eager": 5.0, "hf-eager": 10.0, PROBE: 1.0}
    out = []
    for r in range(1, rounds + 1):
        for s in systems:
            effect = run_effect if s != PROBE else 0.0
            ms = base[s] * math.exp(effect + rng.normal(0, 0.02))
            out.append(Window(s, r, "ok", (ms,) * 3, (0,) * 3, (True,) * 3, (r - 1) % 2 + 1))
    return out


def test_decode_records_a_finished_runs_ratios_and_the_next_runs_read_them(tmp_path):
    rng = np.random.default_rng(2)
    store, spec = RunHistory(tmp_path), run_spec(weight_bytes=8_000_000, kv_bytes=2_000_000)
    systems = ("engine-eager", "hf-eager")
    rows_in = [SystemRow(s, "ok", tokens=[[1]], deterministic=True) for s in systems]
    from nanobench.decode.rows import ProbeRow

    probe = ProbeRow("ok", PROBE, bandwidth_gbs=10.0, gemm_gflops=1e3)
    keys = decode_history.keys(spec, 2, systems)
    for _ in range(MIN_RUNS):
        windows = steady_windows(rng, (*systems, PROBE), run_effect=rng.normal(0, 0.05))
        rows = derive(rows_in, spec, probe, windows)
        # engine-eager: to hf-eager and to the floor; hf-eager: to the floor (never to itself)
        assert decode_history.record(store, keys, rows, windows) == 3
    loaded = decode_history.load(store, keys)
    assert loaded[("engine-eager", "ratio_vs_floor")].runs == MIN_RUNS
    assert ("hf-eager", "ratio_vs_hf_eager") not in loaded, "never a system against itself"
    from nanobench.decode.bench import comparisons

    named = decode_history.by_comparison(loaded)
    stop_rule = {c.name for c in comparisons([*systems, PROBE])}
    assert stop_rule <= set(named), "the stop rule finds every ratio it reads under its name"
    assert named["engine-eager/floor"] is loaded[("engine-eager", "ratio_vs_floor")]
    windows = steady_windows(rng, (*systems, PROBE))
    row = derive(rows_in, spec, probe, windows, history=loaded)[0]
    assert row.ratio_vs_floor_variance.startswith(
        f"history: {MIN_RUNS} earlier runs on this machine since 20"
    )
    assert row.history.startswith(f"{MIN_RUNS} earlier runs of this code since 20")
    assert row.ratio_vs_hf_eager_low <= row.ratio_vs_hf_eager <= row.ratio_vs_hf_eager_high

    def floor_runs(run, processes) -> int:
        found = decode_history.load(store, decode_history.keys(run, processes, systems))
        return found[("engine-eager", "ratio_vs_floor")].runs

    assert floor_runs(run_spec(rows=4), 2) == 0, "other settings, other key"
    assert floor_runs(spec, 3) == 0


def compile_windows(rng, rounds=6, run_effect=0.0):
    from nanobench.harness.workers.rounds import Window

    out = []
    for r in range(1, rounds + 1):
        for mode, ms in (("off", 10.0), ("dynamic", 4.0)):
            ms *= math.exp((run_effect if mode == "dynamic" else 0.0) + rng.normal(0, 0.02))
            out.append(Window(mode, r, "ok", (ms,) * 3, (0,) * 3, (True,) * 3, (r - 1) % 2 + 1))
    return out


def test_compile_records_each_speedup_and_its_rows_and_stop_rule_read_them(tmp_path):
    from nanobench.compile import history as compile_history
    from nanobench.compile.rows import CompileRow
    from nanobench.compile.rows import derive as compile_derive
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.workers.rounds import Comparison, intervals

    rng = np.random.default_rng(4)
    store, worker = RunHistory(tmp_path), WorkerSpec(model="tiny")
    made = [
        CompileRow(mode="off", status="ok", compile_s=0.0),
        CompileRow(mode="dynamic", status="ok", compile_s=3.0),
    ]
    keys = compile_history.keys(worker, 2, ("off", "dynamic"))
    for _ in range(MIN_RUNS):
        windows = compile_windows(rng, run_effect=rng.normal(0, 0.05))
        rows = compile_derive(made, 10_000, windows)
        assert compile_history.record(store, keys, rows, windows) == 1, "off has no speedup"
    loaded = compile_history.load(store, keys)
    assert set(loaded) == {"dynamic"} and loaded["dynamic"].runs == MIN_RUNS
    windows = compile_windows(rng)
    dynamic = compile_derive(made, 10_000, windows, history=loaded)[1]
    assert dynamic.speedup_variance.startswith(f"history: {MIN_RUNS} earlier runs on this machine")
    assert dynamic.speedup_low < 2.5 < dynamic.speedup_high
    # the saving's interval has the speedup's sign: both from the same lent interval
    assert (dynamic.saving_per_step_ms_low > 0) == (dynamic.speedup_low > 1)
    stop_rule = intervals(windows, [Comparison("dynamic", "off", "dynamic")], 0.95, loaded)
    assert stop_rule["dynamic"].variance_from == dynamic.speedup_variance

    def dynamic_runs(worker, processes) -> int:
        found = compile_history.load(store, compile_history.keys(worker, processes, ("dynamic",)))
        return found["dynamic"].runs

    assert dynamic_runs(worker, 3) == 0
    assert dynamic_runs(WorkerSpec(model="tiny", trace="/tmp/x", process=2), 2) == MIN_RUNS


def test_a_decode_run_reads_its_earlier_runs_and_says_so_in_the_table(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench
    from nanobench.cli import app
    from tests.test_decode_cmd import fake_sweep, runner

    around = {"engine-eager": [9.0, 11.0, 9.5, 10.5, 10.0], "hf-eager": [10.0] * 5}
    monkeypatch.setattr(bench, "sweep_sides", fake_sweep(around, [[1, 2], [3, 4]]))
    args = ["decode", "--systems", "engine-eager,hf-eager", "--out", str(tmp_path)]
    for i in range(MIN_RUNS):
        first = runner.invoke(app, args)
        assert first.exit_code == 0, first.output
        assert "process variance history" not in first.stdout
        # hf-eager's one ratio is to the floor, which this sweep (no probe) never measures
        said = ", hf-eager: none yet for this code" if i == 0 else f": {i} earlier run"
        assert f"history of engine-eager{said}" in first.stdout
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"ratio intervals: process variance history: {MIN_RUNS} earlier runs" in result.stdout
    alone = runner.invoke(app, [*args, "--no-history"])
    assert "history" not in alone.stdout, "--no-history reads none"
    again = runner.invoke(app, args)
    assert f"history: {MIN_RUNS + 1} earlier runs" in again.stdout, "--no-history records none"


def fake_compile_sweep(rng):
    """`compile.run.interleaved_sweep` stood in for: an off and a dynamic row, six rounds."""
    from dataclasses import replace

    from nanobench.compile.rows import CompileRow

    base = dict(status="ok", builds=1, fell_back=False, guard_kind="shape", recompile_limit=8)

    def sweep(workers, modes, plan, **kw):
        rows = [
            CompileRow(mode="off", compile_s=0.0, **{**base, "builds": 0}),
            CompileRow(mode="dynamic", compile_s=3.0, **base),
        ]
        for row in rows:
            kw["listener"].on_row(replace(row))
        for w in compile_windows(rng, run_effect=rng.normal(0, 0.05)):
            kw["listener"].on_window(w)

    return sweep


def test_a_compile_run_reads_its_earlier_runs_and_no_history_neither_reads_nor_records(
    tmp_path, monkeypatch
):
    import nanobench.compile.run as compile_run
    from nanobench.cli import app
    from tests.test_decode_cmd import runner

    monkeypatch.setattr(
        compile_run, "interleaved_sweep", fake_compile_sweep(np.random.default_rng(9))
    )
    args = ["compile", "--modes", "off,dynamic", "--out", str(tmp_path)]
    for i in range(MIN_RUNS):
        first = runner.invoke(app, args)
        assert first.exit_code in (0, 1), first.output
        assert "process variance history" not in first.stdout
        said = "none yet for this code" if i == 0 else f"{i} earlier run"
        assert f"history of dynamic: {said}" in first.stdout
    alone = runner.invoke(app, [*args, "--no-history"])
    assert "history" not in alone.stdout, "--no-history reads none"
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    said = f"speedup intervals: process variance history: {MIN_RUNS} earlier runs on this machine since"
    assert said in result.stdout, "--no-history recorded none, the three before it did"


def test_history_lends_only_where_it_has_more_degrees_of_freedom_than_the_run():
    """Three earlier runs (2 df) beat two processes' own variance (1 df), not a pool of six
    systems in three processes (10 df); twelve earlier runs (11 df) beat the pool too."""
    from nanobench.harness.workers.rounds import Comparison, RoundPlan, intervals, run_rounds
    from tests.helpers import noisy_fleet

    cmp = [Comparison("a/b", "a", "b")]
    plan = RoundPlan(12, 12, 0.03, 1e9)
    rng = np.random.default_rng(11)
    quiet = dict(run_sd=0.0, process_sd=0.02, round_sd=0.03)
    few, many = history_of(rng, MIN_RUNS, **quiet), history_of(rng, 12, **quiet)
    six = run_rounds(noisy_fleet(3, 0, {n: 0.02 for n in "abcdef"}), plan, cmp)
    own = intervals(six, cmp)["a/b"]
    assert own.variance_from.startswith("pooled: 6 systems") and own.process_df == 10
    kept = intervals(six, cmp, history={"a/b": few})["a/b"]
    assert kept == own  # a history that would lend (its 2 df) is not better informed
    lent = intervals(six, cmp, history={"a/b": many})["a/b"]
    assert lent.variance_from.startswith("history: 12") and lent.process_df == 11
    two = run_rounds(noisy_fleet(2, 0, {"a": 0.02, "b": 0.02}), plan, cmp)
    assert intervals(two, cmp)["a/b"].process_df == 1
    assert intervals(two, cmp, history={"a/b": few})["a/b"].variance_from.startswith("history: 3")


def test_where_the_pool_refuses_a_comparison_history_weighs_against_its_own_processes():
    """A system whose processes disagree past the pool keeps its own interval (K - 1 = 2 df):
    five earlier runs (4 df), fewer than the pool's 10, are then the better informed."""
    from nanobench.harness.workers.rounds import Comparison, RoundPlan, intervals, run_rounds
    from tests.helpers import noisy_fleet

    cmp = [Comparison("a/b", "a", "b")]
    plan = RoundPlan(12, 12, 0.03, 1e9)
    wild = {"a": 0.5, **{n: 0.02 for n in "bcdef"}}
    windows = run_rounds(noisy_fleet(3, 2, wild), plan, cmp)  # a seed whose F test refuses
    own = intervals(windows, cmp)["a/b"]
    assert own.variance_from == "own: 3 processes" and own.process_df == 2
    rng = np.random.default_rng(5)
    # as recorded, unscreened: this seed's five runs hold one the screen would keep out (1%)
    noisy = dict(run_sd=0.0, process_sd=0.5, round_sd=0.03)
    spread = Calibration(tuple(past_of(*simulated_run(rng, **noisy)) for _ in range(5)))
    lent = intervals(windows, cmp, history={"a/b": spread})["a/b"]
    assert lent.variance_from.startswith("history: 5") and lent.process_df == 4


def test_earlier_runs_that_vary_more_than_the_run_admits_are_lent_with_fewer_degrees_of_freedom():
    """Three earlier runs (2 df) against a pool's 10: lent where the runs spread 0.15 in log
    (an effect the run's processes all share), not where they agree (the test above)."""
    from nanobench.harness.workers.rounds import Comparison, RoundPlan, intervals, run_rounds
    from tests.helpers import noisy_fleet

    cmp = [Comparison("a/b", "a", "b")]
    plan = RoundPlan(12, 12, 0.03, 1e9)
    six = run_rounds(noisy_fleet(3, 0, {n: 0.02 for n in "abcdef"}), plan, cmp)
    own = intervals(six, cmp)["a/b"]
    assert own.process_df == 10
    rng = np.random.default_rng(2)
    varied = history_of(rng, MIN_RUNS, run_sd=0.15, process_sd=0.02, round_sd=0.03)
    lent = intervals(six, cmp, history={"a/b": varied})["a/b"]
    assert lent.variance_from.startswith(f"history: {MIN_RUNS} earlier runs on this machine")
    assert lent.variance_from.endswith(", spread wider than this run's own")
    assert lent.process_df == MIN_RUNS - 1 and lent.high / lent.low > own.high / own.low


def test_a_run_effect_three_processes_cannot_see_is_covered_once_three_runs_are_history():
    """Three processes (2 df) and three earlier runs (2 df): neither has more degrees of
    freedom, so only the runs' spread against the run's own interval can lend the history.
    An F test on 2 df misses some run effects, so coverage is short of 95%, and far above own."""
    rng = np.random.default_rng(13)
    own = lent = 0
    trials = 200
    for _ in range(trials):
        calibration = history_of(rng, MIN_RUNS, k=3)
        num, den, labels = simulated_run(rng, k=3)
        own += covers(ratio_interval(num, den, labels))
        lent += covers(ratio_interval(num, den, labels, history=calibration))
    print(f"coverage of the true ratio: own {own / trials:.0%}, lent {lent / trials:.0%}")
    assert own / trials < 0.60, "the simulation must hold an effect one run cannot see"
    assert lent / trials >= 0.85


def test_two_keys_that_read_alike_show_the_backend_and_setting_that_tell_them_apart(
    tmp_path, monkeypatch
):
    """A user saw two "static speedup" keys of one target and hash with ratios 0.967 and 2.217,
    one eager-backend and one Inductor, and nothing on either line told them apart."""
    from typer.testing import CliRunner

    from nanobench.cli import app

    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path))
    store = RunHistory(tmp_path)
    base = facts("static speedup")
    for backend, y in (("eager", -0.034), ("inductor", 0.796)):
        settings = {"rows": 1, "backend": backend, "threads": 1}
        store.record(replace(base, settings=settings), Past(y, 0.001, 10, at(1)))
    store.record(replace(facts("dynamic speedup"), settings={"backend": "inductor"}),
                 Past(0.1, 0.001, 10, at(2)))  # fmt: skip
    result = CliRunner().invoke(app, ["history", "--json"])
    assert result.exit_code == 0, result.output
    shown = {(r["comparison"], r["settings"]) for r in json.loads(result.stdout)["keys"]}
    assert shown == {("static speedup", "backend eager"), ("static speedup", "backend inductor"),
                     ("dynamic speedup", "backend inductor")}  # fmt: skip
    table = CliRunner().invoke(app, ["history"], env={"COLUMNS": "200"})
    lines = [ln for ln in table.output.splitlines() if "static speedup" in ln]
    assert len(lines) == 2 and {"eager" in ln for ln in lines} == {True, False}
