"""`nanobench startup` as a user runs it: bad input in one line, real starts in fresh processes.

The eager-backend run checks the command's contract cheaply (kinds, phases adding up to the
clock, the table as printed); the Inductor runs check what torch itself did on a warm and a hot
start: the caches hit, the hot start rebuilt its C++ kernels on CPU, the saving is the clock's,
and a constant baked per process makes a warm start miss, with the key component that changed.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.startup.phases import START_PHASES
from tests.helpers import shown_rows

runner = CliRunner()
CORPUS = Path(__file__).parent / "corpus"
STATIC_KV = f"{CORPUS / 'static_kv.py'}:factory"


def startup(tmp_path, *args, json_mode=True):
    result = runner.invoke(
        app,
        ["startup", "--threads", "1", "--out", str(tmp_path), *(["--json"] if json_mode else []),
         *args],
    )  # fmt: skip
    return result


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--starts", "warm"], "--starts: a warm start reads the caches"),
        (["--starts", "hot"], "--starts hot without cold"),
        (["--artifacts", "/nonexistent/a.bin"], "--artifacts /nonexistent/a.bin: cannot read it"),
        (["--starts", "cold,lukewarm"], "'lukewarm': expected some of cold, warm, hot"),
        (["--runs", "0"], "--runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    result = startup(tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_a_truncated_or_foreign_artifact_file_is_refused_before_any_start(tmp_path):
    for name, blob in (
        ("truncated.bin", b"\x00\x01"),
        ("empty.bin", b""),
        ("foreign.bin", b"PK\x03\x04zipdata"),
    ):
        path = tmp_path / name
        path.write_bytes(blob)
        result = startup(tmp_path, "--artifacts", str(path), "--starts", "hot")
        assert result.exit_code == 2, result.output
        assert f"--artifacts {path}" in result.output and "Traceback" not in result.output
        assert not (tmp_path / "startup.csv").exists()  # nothing started


def test_a_cache_dir_that_cannot_be_written_or_is_in_use_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = startup(tmp_path, "--cache-dir", str(blocker / "sub"))
    assert (
        result.exit_code == 2 and "--cache-dir" in result.output and "cannot write" in result.output
    )
    busy = tmp_path / "busy"
    busy.mkdir()
    with open(busy / ".nanobench-startup.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        result = startup(tmp_path, "--cache-dir", str(busy))
    assert result.exit_code == 2, result.output
    assert "another nanobench startup (pid 4242) is filling caches there" in result.output


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("eager")
    result = startup(out, "--target", STATIC_KV, "--backend", "eager", "--modes", "off,static",
                     "--runs", "2", "--steps", "2", json_mode=False)  # fmt: skip
    return out, result


def test_every_start_is_a_row_of_its_kind_and_its_phases_add_up_to_the_clock(eager_run):
    out, result = eager_run
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out / "startup.csv")
    seen = sorted(zip(frame["mode"], frame["kind"], frame["run"]))
    # off compiles nothing: one start a run; static cold and warm (eager leaves no artifacts
    # for a hot start to load)
    assert seen == sorted([("off", "cold", 1), ("off", "cold", 2)] + [
        ("static", k, r) for k in ("cold", "warm") for r in (1, 2)])  # fmt: skip
    phases = frame[[f"{p}_s" for p in START_PHASES]].sum(axis=1)
    assert (abs(phases - frame["ready_s"]) < 1e-3 * len(START_PHASES)).all()
    # ready is inside the process's own life, as the parent's clock saw it
    assert (frame["ready_s"] <= frame["wall_s"]).all()
    assert (frame["first_token_s"] <= frame["ready_s"] + 1e-6).all()
    assert (frame["import_s"] > 0.1).all()  # importing torch is a phase, never zero
    assert set(frame["pgo"]) == {"off"}
    # the eager backend saves nothing to Inductor's caches: no hit, no miss, nothing missed
    assert frame["fx_hits"].sum() == 0 and frame["missed"].isna().all()


def test_the_default_table_shows_each_mode_and_kind_and_the_phases(eager_run):
    out, result = eager_run
    phases = shown_rows(result.output, "phase")
    assert "unattr." in phases and "build" in phases, result.output
    frame = pd.read_csv(out / "startup.csv")
    for (mode, kind), starts in frame.groupby(["mode", "kind"]):
        # the table's ready cell is the CSV's mean over runs, as printed
        assert phases["ready"][f"{mode} {kind}"] == f"{starts['ready_s'].mean():.2f}"
    assert set(phases["ready"]) == {"phase", "off cold", "static cold", "static warm"}
    assert "pass warm and hot starts hit their caches" in result.output
    assert (out / "startup.png").stat().st_size > 0
    env = json.loads((out / "startup-env.json").read_text())
    assert env["threads"] == 1


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the C++ rebuild inside a hit is CPU's")
def test_warm_hits_hot_rebuilds_its_kernel_on_cpu_and_saved_is_the_clocks(tmp_path):
    result = startup(tmp_path, "--target", STATIC_KV, "--modes", "static", "--runs", "1",
                     "--steps", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["kind"]: r for r in json.loads(result.stdout)["rows"]}
    cold, warm, hot = rows["cold"], rows["warm"], rows["hot"]
    assert cold["fx_misses"] >= 1 and cold["kernels_built"] > 0 and cold["artifact_bytes"] > 0
    assert warm["fx_hits"] >= 1 and warm["fx_misses"] == 0 and warm["kernels_built"] == 0
    assert hot["fx_hits"] >= 1 and hot["artifact_bytes"] == cold["artifact_bytes"]
    # torch's mega-cache carries the C++ source on CPU: the hit compiles the kernels again
    assert hot["kernels_built"] > 0 and hot["rebuilt"] is True
    for r in (warm, hot):
        assert r["saved_s"] == pytest.approx(cold["ready_s"] - r["ready_s"], abs=1e-3)
    # the cold start spends most of its time compiling, and the ledger explains nearly all of it
    assert cold["unattributed_s"] < 0.05 * cold["ready_s"]
    graphs = pd.read_csv(tmp_path / "startup-graphs.csv")
    assert len(graphs[graphs["kind"] == "cold"]) == cold["graphs"] >= 1


@pytest.mark.slow
def test_a_constant_baked_per_process_makes_the_warm_start_miss_and_says_what_changed(tmp_path):
    target = f"{CORPUS / 'per_process_constant.py'}:factory"
    result = startup(tmp_path, "--target", target, "--modes", "static", "--starts", "cold,warm",
                     "--runs", "1", "--steps", "1", "--check")  # fmt: skip
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    warm = next(r for r in doc["rows"] if r["kind"] == "warm")
    assert warm["fx_misses"] >= 1 and warm["fx_hits"] == 0
    assert "FX graph cache (key changed: gm (" in warm["missed"]  # the baked constant's line
    gate = next(g for g in doc["gates"] if g["name"] == "warm and hot starts hit their caches")
    assert gate["verdict"] == "fail" and "static warm (run 1) graph 1" in gate["detail"]
