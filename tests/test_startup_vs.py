"""`nanobench startup --vs`: both sides' starts in one run, interleaved, each over its own caches.

A fake worker (`run_fresh` replaced) stands in for the fresh processes: it sees each start's job
and environment, fills or reads the cache directory it was handed, and reports a ready row whose
seconds the test chose, so the order, the caches each start read and the change figures are
checked without torch compiling anything. The change figures are recomputed here from the rows'
own ready seconds, each start's log ratios' variance pooled over the starts by hand; one slow
test runs the corpus pair for real.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t
from typer.testing import CliRunner

import nanobench.startup.starts as startup_starts
from nanobench.cli import app
from nanobench.harness.statistics.t_intervals import t_interval
from nanobench.startup.rows import StartRow
from nanobench.startup.vs import pair_changes

PAIR = ("before", "after")

runner = CliRunner()
CORPUS = Path(__file__).parent / "corpus"
AFTER = f"{CORPUS / 'static_kv.py'}:factory"
BEFORE = f"{CORPUS / 'item_in_step.py'}:factory"
KNOB = "cpp-wrapper"


def startup(tmp_path, *args, json_mode=True):
    return runner.invoke(
        app,
        ["startup", "--threads", "1", "--out", str(tmp_path), "--quiet",
         *(["--json"] if json_mode else []), *args],
    )  # fmt: skip


def frame(hit: bool) -> dict:
    return dict(
        frame_s=0.5, aot_s=0.3, inductor_s=0.2, codegen_s=0.1, pre_grad_s=0.01,
        joint_graph_s=0.01, post_grad_s=0.01, triton_s=0.0, autotune_s=0.0,
        fx_hits=int(hit), fx_misses=int(not hit), aot_hits=0, aot_misses=1, graph="forward:1",
        compile_id="0/0", failed=False,
    )  # fmt: skip


class FakeWorker:
    """What `run_fresh` would spawn: a start that takes `seconds(side, kind, run)` to ready.

    A cold start writes a mark naming its side and run into its cache directory (and its
    artifact file); a warm or hot start records the mark it finds, so the test sees whose cache
    each start read.
    """

    def __init__(self, seconds, misses_after_warm: int = 0) -> None:
        self.seconds = seconds
        self.misses_after_warm = misses_after_warm
        self.calls: list[dict] = []

    def __call__(self, module, payload, *, timeout, env, on_progress, python=""):
        side = "after" if payload["target"] == AFTER else "before"
        kind, run, mode = payload["kind"], payload["run"], payload["mode"]
        cache = Path(env["TORCHINDUCTOR_CACHE_DIR"])
        mark = f"{side} {mode} run {run}"
        found = None
        if kind == "cold":
            (cache / "mark").write_text(mark)
            if payload["save_artifacts"]:
                Path(payload["save_artifacts"]).write_text(mark)
        elif kind == "warm":
            found = (cache / "mark").read_text() if (cache / "mark").exists() else None
        else:
            found = Path(payload["load_artifacts"]).read_text()
        self.calls.append(dict(side=side, mode=mode, kind=kind, run=run, cache=str(cache),
                               mark=mark, found=found, payload=payload))  # fmt: skip
        now = time.time()
        total = self.seconds(side, kind, run)
        misses = self.misses_after_warm if (side, kind) == ("after", "warm") else 0
        hit = kind != "cold" and not misses
        steps = [{"frames": [frame(hit)], "build_s": 0.05, "guards_s": 0.02, "cache_key_s": 0.01,
                  "kernels_built": 0, "began": now + 0.61, "ended": now + total}]  # fmt: skip
        return {
            "mode": mode, "kind": kind, "run": run,
            "stamps": {"started": now + 0.01, "imported": now + 0.5, "artifacts": now + 0.5,
                       "built": now + 0.6, "prefilled": now + 0.61},
            "steps": steps,
            "hash_details": [[]],
            "counters": {"inductor": {"fxgraph_cache_hit": int(hit),
                                      "fxgraph_cache_miss": int(not hit)},
                         "aot_autograd": {}, "frames": {}},
            "artifact_bytes_loaded": 0, "artifact_bytes_saved": 0,
            "kernels_built": 0 if hit else 2,
            "pgo_state_found": False, "step_ms": 1.0,
            "torch_version": "fake", "cpu_capability": "fake", "aten_cpu_capability": "",
            "threads": 1,
        }  # fmt: skip


def drifting(after_factor: float = 0.8):
    """Ready seconds with a drift by run that both sides share, and a little noise of their own."""
    rng = np.random.default_rng(7)
    drift = {1: 1.0, 2: 1.3, 3: 0.9, 4: 1.1}
    noise = {}

    def seconds(side: str, kind: str, run: int) -> float:
        key = (side, kind, run)
        noise.setdefault(key, math.exp(0.005 * rng.standard_normal()))
        base = 4.0 if kind == "cold" else 2.0
        return base * drift[run] * noise[key] * (after_factor if side == "after" else 1.0)

    return seconds


@pytest.fixture
def fake(monkeypatch):
    def install(seconds=None, **kw):
        worker = FakeWorker(seconds or drifting(), **kw)
        monkeypatch.setattr(startup_starts, "run_fresh", worker)
        return worker

    return install


VS = ["--target", AFTER, "--vs", BEFORE]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--vs", BEFORE], f"--vs {BEFORE}: the before side of a --target; give --target"),
        (["--no-more", "graphs"], "--no-more and --no-slower compare two sides: give --vs"),
        ([*VS, "--no-more", "breaks"], "--no-more breaks: this command measures graphs, "
                                       "fx_misses, aot_misses, kernels_built"),
        ([*VS, "--no-slower", "step_ms"], "--no-slower step_ms: this command measures ready_s, "
                                          "compile_s"),
        ([*VS, "--check"], "--check on a comparison gates the columns you name: give --no-more "
                           "and/or --no-slower"),
        ([*VS, "--max-warm-s", "5"], "--max-warm-s with --vs: a comparison gates the columns"),
        ([*VS, "--artifacts", "x.bin"], "--artifacts with --vs: each side's hot start loads"),
        (["--target", AFTER, "--vs", "/nonexistent/old.py:factory"], "--vs '/nonexistent/old.py:factory': no such file"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2_before_any_start(tmp_path, fake, args, says):
    worker = fake()
    result = startup(tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert worker.calls == []


def test_each_cell_starts_both_sides_back_to_back_the_first_alternating_by_run(tmp_path, fake):
    worker = fake()
    result = startup(tmp_path, *VS, "--modes", "off,dynamic", "--runs", "3")
    assert result.exit_code == 0, result.output
    calls = worker.calls
    assert len(calls) % 2 == 0
    cells = []
    for first, second in zip(calls[::2], calls[1::2]):
        cell = (first["mode"], first["kind"], first["run"])
        assert cell == (second["mode"], second["kind"], second["run"])  # one cell, back to back
        assert {first["side"], second["side"]} == {"before", "after"}
        assert first["side"] == ("before" if first["run"] % 2 else "after")
        cells.append(cell)
    # every cell of the plain plan, each once: off cold; dynamic cold, warm, hot; three runs
    expected = [("off", "cold", r) for r in (1, 2, 3)]
    expected += [("dynamic", k, r) for k in ("cold", "warm", "hot") for r in (1, 2, 3)]
    assert sorted(cells) == sorted(expected)
    rows = json.loads(result.stdout)["rows"]
    assert sorted((r["side"], r["mode"], r["kind"], r["run"]) for r in rows) == sorted(
        (c["side"], c["mode"], c["kind"], c["run"]) for c in calls
    )


def test_each_sides_warm_and_hot_starts_read_their_own_cold_starts_caches(tmp_path, fake):
    worker = fake()
    result = startup(tmp_path, *VS, "--modes", "dynamic", "--runs", "2")
    assert result.exit_code == 0, result.output
    by = {(c["side"], c["kind"], c["run"]): c for c in worker.calls}
    for side in ("before", "after"):
        for run in (1, 2):
            cold = by[(side, "cold", run)]
            warm, hot = by[(side, "warm", run)], by[(side, "hot", run)]
            assert warm["cache"] == cold["cache"] and warm["found"] == cold["mark"]
            # hot: its own empty directory, its own side's artifacts
            assert hot["cache"] != cold["cache"] and hot["found"] == cold["mark"]
            assert hot["payload"]["load_artifacts"] == cold["payload"]["save_artifacts"]
    caches = {c["side"]: set() for c in worker.calls}
    for c in worker.calls:
        caches[c["side"]].add(c["cache"])
    assert not caches["before"] & caches["after"]


def table_lines(text: str) -> dict[tuple[str, str], list[str]]:
    """The change table's cells: (start, quantity) -> [before, after, change]."""
    found, member = {}, ""
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 5 or cells[1] in ("", "quantity"):
            continue
        member = cells[0] or member
        found[(member, cells[1])] = cells[2:]
    return found


def log_ratios(rows: list[dict], mode: str, kind: str, column: str = "ready_s") -> list[float]:
    """log(after / before) of one start, run by run."""
    side = {
        (r["side"], r["run"]): r[column] for r in rows if (r["mode"], r["kind"]) == (mode, kind)
    }
    runs = sorted({run for _, run in side})
    return [math.log(side[("after", n)] / side[("before", n)]) for n in runs]


def by_hand(rows: list[dict], mode: str, kind: str, level: float = 0.95, column: str = "ready_s"):
    """Geometric mean of after / before over runs paired by number, and its t interval over
    that start's own runs alone."""
    logs = log_ratios(rows, mode, kind, column)
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    half = t.ppf(0.5 + level / 2, len(logs) - 1) * sd / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def pooled_by_hand(rows: list[dict], starts: list[tuple[str, str]], level: float,
                   column: str = "ready_s") -> dict:  # fmt: skip
    """Each start's geometric mean and t interval, the log ratios' variance pooled over
    `starts` (the mean squared deviation from each start's own mean, G (R - 1) df) at
    Satterthwaite's df for the drift by run the starts share (MS_run / G + (G - 1) MS_int / G)."""
    y = np.array([log_ratios(rows, mode, kind, column) for mode, kind in starts])  # [G, R]
    g, r = y.shape
    pooled = ((y - y.mean(axis=1, keepdims=True)) ** 2).sum() / (g * (r - 1))
    ms_run = g * ((y.mean(axis=0) - y.mean()) ** 2).sum() / (r - 1)
    inter = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    ms_int = (inter**2).sum() / ((g - 1) * (r - 1))
    a, b = ms_run / g, (g - 1) * ms_int / g
    df = np.clip((a + b) ** 2 / (a**2 / (r - 1) + b**2 / ((g - 1) * (r - 1))), r - 1, g * (r - 1))
    half = t.ppf(0.5 + level / 2, df) * math.sqrt(pooled / r)
    return {start: (math.exp(m), math.exp(m - half), math.exp(m + half), df)
            for start, m in zip(starts, y.mean(axis=1))}  # fmt: skip


def test_the_change_is_the_geometric_mean_of_after_over_before_paired_by_run(tmp_path, fake):
    fake()
    result = startup(tmp_path, *VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "3")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows, changes = doc["rows"], doc["changes"]
    found = {(c["member"], c["column"]): c for c in changes}
    # every timing with an interval, of both members, held together at 95%: 1 - 0.05 / m each
    timed = [c for c in changes if c["kind"] == "timing" and c["low"] is not None]
    level = 1 - 0.05 / len(timed)
    assert len(timed) >= 6 and all(c["level"] == pytest.approx(level, abs=1e-4) for c in timed)
    starts = [("dynamic", "cold"), ("dynamic", "warm")]
    pooled = pooled_by_hand(rows, starts, level)
    for kind in ("cold", "warm"):
        c = found[(f"dynamic {kind}", "ready_s")]
        estimate, low, high, df = pooled[("dynamic", kind)]
        # the two starts' log ratios spread alike: pooled, more df than a start's own 2
        assert c["variance"] == "pooled over 2 starts" and c["df"] == pytest.approx(df, abs=0.01)
        assert 2 < df <= 4
        assert c["change"] == pytest.approx(estimate, abs=1e-4)
        assert (c["low"], c["high"]) == (
            pytest.approx(low, abs=1e-4),
            pytest.approx(high, abs=1e-4),
        )
        assert c["verdict"] == "faster" and c["rounds"] == 3  # 0.8x under a 30% drift by run
        mine = [
            r["ready_s"]
            for r in rows
            if (r["mode"], r["kind"], r["side"]) == ("dynamic", kind, "before")
        ]
        assert c["before"] == pytest.approx(sum(mine) / len(mine), abs=1e-4)
    # the warm starts built nothing, the cold ones two kernels a side: exact counts, no interval
    assert found[("dynamic warm", "kernels_built")]["verdict"] == "same"
    assert found[("dynamic cold", "graphs")]["change"] == 0
    # the CSV holds the same changes; startup.csv both sides' rows, a side column
    saved = pd.read_csv(tmp_path / "startup-changes.csv")
    assert len(saved) == len(changes) and set(pd.read_csv(tmp_path / "startup.csv")["side"]) == {
        "before", "after"}  # fmt: skip
    table = startup(tmp_path, *VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "3",
                    json_mode=False)  # fmt: skip
    words = " ".join(table.output.split())  # the title, wrapped at spaces, read back whole
    assert f"startup of target {AFTER} (after) vs {BEFORE} (before)" in words, table.output
    cells = table_lines(table.output)
    new = pd.read_csv(tmp_path / "startup.csv")
    level = pd.read_csv(tmp_path / "startup-changes.csv")["level"].max()
    pooled = pooled_by_hand(new.to_dict("records"), starts, level)
    for kind in ("cold", "warm"):
        before, after, change = cells[(f"dynamic {kind}", "ready s")]
        mine = new[(new["kind"] == kind)].groupby("side")["ready_s"].mean()
        assert before == f"{mine['before']:.2f}" and after == f"{mine['after']:.2f}"
        estimate, low, high, _ = pooled[("dynamic", kind)]
        assert change == f"{estimate:.2f}x [{low:.2f}, {high:.2f}] faster"
    assert "change intervals: variance pooled over 2 starts" in words
    assert cells[("dynamic cold", "FX misses")] == ["1", "1", "same"]


def test_a_plain_run_keeps_its_columns_and_has_no_changes(tmp_path, fake):
    fake()
    result = startup(tmp_path, "--target", AFTER, "--modes", "dynamic", "--starts", "cold,warm",
                     "--runs", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "changes" not in doc and all("side" not in r for r in doc["rows"])
    assert "side" not in pd.read_csv(tmp_path / "startup.csv").columns
    assert "side" not in pd.read_csv(tmp_path / "startup-graphs.csv").columns
    assert not (tmp_path / "startup-changes.csv").exists()


def test_the_gates_are_the_columns_named_and_without_check_a_worse_change_exits_0(tmp_path, fake):
    fake(misses_after_warm=1)  # the after side's warm start misses its cache
    base = [*VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "4"]
    plain = startup(tmp_path, *base, "--no-more", "fx_misses")
    assert plain.exit_code == 0, plain.output
    checked = startup(tmp_path, *base, "--check", "--no-more", "fx_misses,graphs")
    assert checked.exit_code == 1, checked.output
    gates = {g["name"]: g for g in json.loads(checked.stdout)["gates"]}
    assert gates["no_more[fx_misses dynamic warm]"]["verdict"] == "fail"
    assert gates["no_more[fx_misses dynamic cold]"]["verdict"] == "pass"
    assert gates["no_more[graphs dynamic warm]"]["verdict"] == "pass"
    # 0.8x, the same drift on both sides: known faster, so no more than 5% slower
    faster = startup(tmp_path, *base, "--check", "--no-slower", "ready_s")
    assert faster.exit_code == 0, faster.output
    assert all(g["verdict"] == "pass" for g in json.loads(faster.stdout)["gates"])


def test_a_slower_after_side_fails_no_slower(tmp_path, fake):
    fake(seconds=drifting(after_factor=1.5))
    result = startup(tmp_path, *VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "4",
                     "--check", "--no-slower", "ready_s")  # fmt: skip
    assert result.exit_code == 1, result.output
    gates = json.loads(result.stdout)["gates"]
    assert {g["verdict"] for g in gates} == {"fail"}


def test_an_a_a_comparison_decides_no_more_often_than_its_level():
    """20 seeded A/A comparisons of 5 paired runs, a drift by run both sides share: the interval
    excludes 1 at most 3 times (1 expected at 95%)."""
    rng = np.random.default_rng(2024)
    decided = 0
    for _ in range(20):
        drift = np.exp(0.3 * rng.standard_normal(5))
        before = 3.0 * drift * np.exp(0.05 * rng.standard_normal(5))
        after = 3.0 * drift * np.exp(0.05 * rng.standard_normal(5))
        interval = t_interval(list(np.log(after / before)), log=True)
        decided += interval.low > 1 or interval.high < 1
    assert decided <= 3


def aa_rows(rng, runs: int = 5) -> list[StartRow]:
    """Both sides the same program: a drift by run they share, noise of their own per start."""
    rows = []
    for run in range(1, runs + 1):
        drift = math.exp(0.3 * rng.standard_normal())
        for side in ("before", "after"):
            for kind, base in (("cold", 6.0), ("warm", 3.0)):

                def noisy(s, drift=drift):
                    return round(s * drift * math.exp(0.05 * rng.standard_normal()), 4)

                rows.append(StartRow(mode="dynamic", kind=kind, run=run, side=side,
                                     ready_s=noisy(base), compile_s=noisy(base / 2),
                                     aot_s=noisy(2.0), trace_s=noisy(base / 4),
                                     graphs=1))  # fmt: skip
    return rows


def test_an_a_a_run_says_faster_or_slower_anywhere_in_it_at_most_3_times_in_20():
    """Eight timing changes a run (two kinds, four seconds each), held together: 20 seeded A/A
    runs, at most 3 with any decided (1 expected at 95%; at 95% each, about 6 would)."""
    rng = np.random.default_rng(11)
    decided = 0
    for _ in range(20):
        found = [
            c for c in pair_changes(aa_rows(rng), PAIR) if c.kind == "timing" and c.low is not None
        ]
        assert len(found) == 8
        decided += any(c.verdict in ("faster", "slower") for c in found)
    assert decided <= 3


def test_one_start_alone_over_two_runs_has_an_interval_one_degree_of_freedom_wide():
    interval = t_interval([math.log(2.0 / 2.0), math.log(2.2 / 2.0)], log=True)
    logs = [0.0, math.log(1.1)]
    half = t.ppf(0.975, 1) * abs(logs[1] - logs[0]) / math.sqrt(2) / math.sqrt(2)
    assert interval.estimate == pytest.approx(math.sqrt(1.1))
    assert interval.low == pytest.approx(math.exp(sum(logs) / 2 - half))
    assert interval.high == pytest.approx(math.exp(sum(logs) / 2 + half))
    assert interval.low < 0.6 and interval.high > 1.8  # a 10% spread over 2 runs: wide, honest


def test_two_runs_a_start_pool_their_log_ratios_over_the_starts():
    """The default two runs: each start's own interval has 1 df (t = 12.7 at 95%); the ready
    ratios of four starts (two modes, cold and warm) that spread alike pool to more."""
    rng = np.random.default_rng(3)
    rows = [replace(r, mode=mode) for mode in ("dynamic", "static") for r in aa_rows(rng, runs=2)]
    timed = [c for c in pair_changes(rows, PAIR) if c.kind == "timing"]
    found = {(c.member, c.column): c for c in timed}
    ready = [
        found[(f"{m} {k}", "ready_s")] for m in ("dynamic", "static") for k in ("cold", "warm")
    ]
    assert {c.variance for c in ready} == {"pooled over 4 starts"}
    assert all(1 <= c.df <= 4 for c in ready) and any(c.df > 1.5 for c in ready)
    records = [dict(r.__dict__) for r in rows]
    starts = [(m, k) for m in ("dynamic", "static") for k in ("cold", "warm")]
    level = 1 - 0.05 / sum(c.low is not None for c in timed)  # held together, as a run's
    assert ready[0].level == pytest.approx(level, abs=1e-4)
    expected = pooled_by_hand(records, starts, level)
    for c, start in zip(ready, starts):
        estimate, low, high, _ = expected[start]
        assert (c.change, c.low, c.high) == pytest.approx((estimate, low, high), abs=1e-4)


@pytest.mark.slow
def test_the_corpus_pair_for_real(tmp_path):
    """static_kv (one graph) after item_in_step (a graph break: two graphs) before, eager."""
    args = [*VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "2", "--steps", "2",
            "--backend", "eager"]  # fmt: skip
    result = startup(tmp_path, *args, "--check", "--no-more", "graphs", json_mode=False)
    assert result.exit_code == 0, result.output
    cells = table_lines(result.output)
    assert cells[("dynamic cold", "graphs")][2] == "-1 fewer"
    assert cells[("dynamic warm", "ready s")][2].endswith(("faster", "slower", "can't tell"))
    assert "pass no_more[graphs dynamic warm]" in result.output
    frame = pd.read_csv(tmp_path / "startup.csv")
    assert sorted(zip(frame["side"], frame["kind"], frame["run"])) == sorted(
        (s, k, r) for s in ("before", "after") for k in ("cold", "warm") for r in (1, 2))  # fmt: skip
    assert (frame["status"] == "ok").all()
    changes = pd.read_csv(tmp_path / "startup-changes.csv")
    ready = changes[(changes["member"] == "dynamic warm") & (changes["column"] == "ready_s")]
    estimate, _, _ = by_hand(frame.to_dict("records"), "dynamic", "warm")
    assert ready["change"].iloc[0] == pytest.approx(estimate, abs=1e-4)
    # the after side has more graphs nowhere, so --no-more graphs passes; the reverse fails
    # (one run, one kind: the count needs no interval, and the test stays under a minute)
    swapped = startup(tmp_path, "--target", BEFORE, "--vs", AFTER, "--modes", "dynamic",
                      "--starts", "cold", "--runs", "1", "--steps", "2", "--backend", "eager",
                      "--check", "--no-more", "graphs")  # fmt: skip
    assert swapped.exit_code == 1, swapped.output


def test_export_json_gives_each_cell_its_runs_as_one_records_values(tmp_path, fake):
    fake()
    records = tmp_path / "records.json"
    result = startup(tmp_path, *VS, "--modes", "dynamic", "--starts", "cold,warm", "--runs", "3",
                     "--export-json", str(records))  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    found = {(r["benchmark"]["extra_info"]["side"], r["benchmark"]["extra_info"]["start"],
              r["metric"]["name"]): r for r in json.loads(records.read_text())}  # fmt: skip
    for side in ("before", "after"):
        for kind in ("cold", "warm"):
            runs = sorted((r for r in rows if (r["side"], r["kind"]) == (side, kind)),
                          key=lambda r: r["run"])  # fmt: skip
            ready = found[(side, kind, "time_to_ready_s")]
            assert ready["metric"]["benchmark_values"] == [r["ready_s"] for r in runs]
            assert ready["benchmark"]["extra_info"]["mode"] == "dynamic"
            model = ready["model"]["name"]
            assert model == (BEFORE if side == "before" else AFTER)


class KnobWorker(FakeWorker):
    """The fake start, its side told by the knob its payload carries: a knob's starts are the
    after side's (20% faster by `drifting`), plain's the before side's."""

    def __call__(self, module, payload, **kw):
        side_of = AFTER if payload["knob"] else BEFORE
        return super().__call__(module, {**payload, "target": side_of}, **kw)


def test_a_knob_is_a_side_whose_compiled_modes_start_beside_plain_s(tmp_path, fake, monkeypatch):
    worker = KnobWorker(drifting())
    monkeypatch.setattr(startup_starts, "run_fresh", worker)
    args = ["--modes", "off,dynamic", "--runs", "2", "--starts", "cold,warm", "--try", KNOB]
    result = startup(tmp_path, *args)
    assert result.exit_code == 0, result.output
    started = sorted((c["payload"]["knob"], c["mode"], c["kind"], c["run"]) for c in worker.calls)
    # by hand: plain starts off once a run and dynamic cold and warm; the knob only dynamic's
    plain = [("", "off", "cold", r) for r in (1, 2)]
    plain += [("", "dynamic", k, r) for k in ("cold", "warm") for r in (1, 2)]
    knob = [(KNOB, "dynamic", k, r) for k in ("cold", "warm") for r in (1, 2)]
    assert started == sorted(plain + knob)
    doc = json.loads(result.stdout)
    assert {r["side"] for r in doc["rows"]} == {"plain", KNOB}
    ready = [c for c in doc["changes"] if c["column"] == "ready_s"]
    assert {c["member"] for c in ready} == {f"{KNOB} dynamic cold", f"{KNOB} dynamic warm"}
    table = startup(tmp_path, *args, json_mode=False)
    assert table.exit_code == 0, table.output
    words = " ".join(table.output.split())
    assert f"knobs {KNOB} against plain torch.compile" in words
    assert f"change ({'knob'} / plain)" in words and "(after / before)" not in words


def test_a_startup_try_asked_wrongly_is_one_line_and_exit_2(tmp_path, fake):
    worker = fake()
    (tmp_path / "a.bin").write_bytes(b"saved artifacts")
    for args, says in (
        (["--try", KNOB, "--modes", "off"], "--try: knobs act on a compiled mode"),
        (["--try", KNOB, *VS], "--try with --vs: one comparison a run"),
        (
            ["--try", KNOB, "--artifacts", str(tmp_path / "a.bin")],
            "--artifacts with --try: each side's hot start",
        ),
        (["--try", "no-such-knob"], "no-such-knob"),
    ):
        result = startup(tmp_path, *args)
        assert result.exit_code == 2, (args, result.output)
        assert says in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert worker.calls == [], "refused before any start"
