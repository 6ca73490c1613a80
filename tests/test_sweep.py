"""`nanobench sweep`: grids validated up front, points run as the command, resumable, on Ray too.

The expected padding waste of each point is counted by hand from the run's shapes (a run of 8
steps after a 16-token prompt reads widths 17..24 per row: 164 cells), never read off a row.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import nanobench.sweep.launchers as launchers
from nanobench.cli import app
from nanobench.sweep.launchers import run_point
from nanobench.sweep.points import load_grid, points

BUCKETS_GRID = """
command = "buckets"
[options]
run_lengths = "8"
width_multiples = "256"
max_model_len = 1024
max_waste = 0.78
[axes]
width_multiple = [64, 512]
rows = [3, 5]
"""
OPEN_CELLS_PER_ROW = sum(range(17, 25))  # widths 17..24, one per step: 164


def bucketed_waste(rows: int, multiple: int) -> float:
    # rows pad to the ladder's 4 or 8 (powers of two up to max_batch 8), width to one bucket.
    padded_rows = 4 if rows <= 4 else 8
    return 1 - rows * OPEN_CELLS_PER_ROW / (8 * padded_rows * multiple)


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def write_grid(tmp_path: Path, text: str, name: str = "grid.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The 4-point buckets grid run for real on this machine, two points at a time."""
    base = tmp_path_factory.mktemp("local")
    grid = write_grid(base, BUCKETS_GRID)
    result = invoke(["sweep", grid, "--jobs", "2", "--out", str(base / "out"), "--json"])
    assert result.exit_code == 0, result.output
    return grid, base / "out", json.loads(result.stdout)


def by_point(rows: list[dict]) -> dict[tuple, list[dict]]:
    found: dict[tuple, list[dict]] = {}
    for r in rows:
        found.setdefault((r["axis_width_multiple"], r["axis_rows"]), []).append(r)
    return found


# --- a real local sweep -----------------------------------------------------------------------


def test_four_points_each_with_its_hand_counted_waste(local_sweep):
    _, out, doc = local_sweep
    points_seen = by_point(doc["rows"])
    assert set(points_seen) == {(64, 3), (64, 5), (512, 3), (512, 5)}
    for (multiple, rows), found in points_seen.items():
        run = [r for r in found if r["table"] == "run"]
        assert len(run) == 1 and run[0]["point_status"] == "ok"
        # Exact: both are the same ratio of small integers, computed in float64.
        assert run[0]["waste"] == pytest.approx(bucketed_waste(rows, multiple), rel=1e-12)
        assert run[0]["rows"] == rows and run[0]["width_multiple"] == multiple


def test_the_csv_is_tidy_with_axes_status_and_environment(local_sweep):
    _, out, doc = local_sweep
    frame = pd.read_csv(out / "sweep.csv")
    assert len(frame) == len(doc["rows"])
    assert (frame["table"] == "run").sum() == 4
    assert frame["point_key"].nunique() == 4
    assert set(frame["point_status"]) == {"ok"}
    assert set(zip(frame["axis_width_multiple"], frame["axis_rows"])) == {
        (64, 3),
        (64, 5),
        (512, 3),
        (512, 5),
    }
    assert set(frame["env_hostname"]) == {socket.gethostname()}
    # Every point's capture list (8192 tokens at these multiples) overruns the 64-shape budget.
    assert set(frame["point_verdict"]) == {"fail"}
    for (multiple, rows), found in by_point(doc["rows"]).items():
        gates = found[0]["point_gates"]
        assert gates[f"check_capture_budget[multiple={multiple},kernel=reference]"] == "fail"
        # Only the (64, 3) run stays under max_waste 0.78 (0.76, by hand); the rest are over it.
        over = bucketed_waste(rows, multiple) > 0.78
        assert gates["check_waste_bounded[steps=8]"] == ("fail" if over else "pass")
    assert (out / "sweep.png").stat().st_size > 0


def test_the_heatmap_holds_each_points_waste(local_sweep):
    from nanobench.sweep.points import Ledger
    from reports.sweep import FIGURES, draw_sweep, run_of

    grid, out, _ = local_sweep
    spec = load_grid(grid)
    ledger = Ledger(out)
    records = [ledger.records[p.key] for p in points(spec)]
    fig = draw_sweep(records, list(spec.axes), FIGURES["buckets"], "buckets", run_of(points(spec)))
    # buckets plans on the host with no model or device: the title says none rather than
    # inventing one; its --dtype (the dtype a --target's memory budget is priced in) is named.
    # The title wraps to the figure's width: its words, in order, are the same.
    assert " ".join(fig.axes[0].get_title().split()) == (
        "nanobench sweep buckets, worst padding waste of a run: -, - float32"
    )
    shown = fig.axes[0].images[0].get_array()
    for y, multiple in enumerate((64, 512)):
        for x, rows in enumerate((3, 5)):
            assert shown[y, x] == pytest.approx(bucketed_waste(rows, multiple), rel=1e-12)


def test_a_rerun_runs_nothing_and_a_lost_point_runs_alone(local_sweep, monkeypatch):
    grid, out, doc = local_sweep
    ran: list[str] = []

    def spy(task, started=None):
        ran.append(task.key)
        return run_point(task, started)

    monkeypatch.setattr(launchers, "run_point", spy)
    again = invoke(["sweep", grid, "--out", str(out), "--json"])
    assert again.exit_code == 0, again.output
    assert ran == []
    assert json.loads(again.stdout)["rows"] == doc["rows"]

    lost = doc["rows"][0]["point_key"]
    (out / "points" / lost / "point.json").unlink()
    resumed = invoke(["sweep", grid, "--out", str(out), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert ran == [lost]
    frame = pd.read_csv(out / "sweep.csv")
    assert frame["point_key"].nunique() == 4 and len(frame) == len(doc["rows"])


def test_dry_run_lists_the_points_and_writes_nothing(tmp_path):
    grid = write_grid(tmp_path, BUCKETS_GRID)
    result = invoke(["sweep", grid, "--dry-run", "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    # First axis slowest, as the grid is written.
    assert [(r["axis_width_multiple"], r["axis_rows"]) for r in rows] == [
        (64, 3),
        (64, 5),
        (512, 3),
        (512, 5),
    ]
    assert len({r["point_key"] for r in rows}) == 4
    assert not (tmp_path / "o").exists()


# --- bad grids --------------------------------------------------------------------------------

GOOD_HEAD = 'command = "buckets"\n'


@pytest.mark.parametrize(
    "text,needle",
    [
        (GOOD_HEAD + "[axes]\nwidth_multiplier = [1, 2]\n", "no option --width-multiplier"),
        (GOOD_HEAD + '[axes]\nrows = [1, "four"]\n', "axes.rows = 'four': expected int"),
        (GOOD_HEAD + "[options]\nrows = true\n", "options.rows = True: expected int"),
        (GOOD_HEAD + "[options]\nmax_waste = 'high'\n", "expected float"),
        (GOOD_HEAD + "[axes]\nrows = []\n", "axes.rows: expected a non-empty list"),
        (GOOD_HEAD + "[axes]\nrows = 4\n", "axes.rows: expected a non-empty list"),
        (GOOD_HEAD + "[axes]\nrows = [1, 1]\n", "expected distinct values"),
        (GOOD_HEAD + "[options]\nout = 'x'\n", "set by the sweep itself"),
        (GOOD_HEAD + "[options]\nrows = 2\n[axes]\nrows = [1]\n", "also in [options]"),
        ('command = "bucket"\n', "GRID command 'bucket': expected one of"),
        ('command = "explain"\n', "GRID command 'explain'"),
        (GOOD_HEAD + "axis = 3\n", "unknown key 'axis'"),
        ("command = \n", "not valid TOML"),
    ],
)
def test_a_bad_grid_is_one_line_exit_2_and_nothing_runs(text, needle, tmp_path, monkeypatch):
    def running(*args, **kwargs):
        raise AssertionError("a point ran from a bad grid")

    monkeypatch.setattr(launchers, "run_point", running)
    grid = write_grid(tmp_path, text)
    result = invoke(["sweep", grid, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_a_missing_grid_file_is_one_line_exit_2(tmp_path):
    result = invoke(["sweep", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "cannot read it" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_point_command_line_uses_the_commands_own_flags(tmp_path):
    grid = write_grid(tmp_path, 'command = "compile"\n[axes]\nbucketed = [true, false]\n')
    argvs = [p.argv() for p in points(load_grid(grid))]
    # compile declares --bucketed/--open; False is its default, so it is left to the command.
    assert argvs == [["compile", "--bucketed"], ["compile"]]


def test_a_point_key_hashes_the_full_options(tmp_path):
    keys = {}
    for name, options in {
        "bare": "",
        "default spelled out": "max_batch = 8\n",  # buckets' default
        "another max_batch": "max_batch = 16\n",
    }.items():
        grid = write_grid(tmp_path, f'command = "buckets"\n[options]\n{options}', f"{len(keys)}")
        keys[name] = points(load_grid(grid))[0].key
    assert keys["bare"] == keys["default spelled out"]
    assert keys["another max_batch"] != keys["bare"]


# --- a real timed sweep -----------------------------------------------------------------------

TIMED_GRID = """
command = "capture"
[options]
run_lengths = "1"
width_multiples = "16"
capture_rows = 2
capture_tokens = 32
[axes]
rows = [1, 2]
"""


def test_a_two_point_timed_sweep(tmp_path):
    grid = write_grid(tmp_path, TIMED_GRID)
    result = invoke(["sweep", grid, "--jobs", "2", "--out", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    runs = [r for r in doc["rows"] if r.get("table") == "run"]
    assert sorted((r["axis_rows"], r["rows"], r["point_status"]) for r in runs) == [
        (1, 1, "ok"),
        (2, 2, "ok"),
    ]
    # The replayed logits equal eager ones bitwise: the same kernels on the same shapes.
    assert all(r["max_abs_diff"] == 0.0 for r in runs)


# --- the same grid on a local Ray cluster -----------------------------------------------------

# Plan timings are measured, so they differ run to run; every other column is arithmetic.
MEASURED = ("plan_ms_", "plan_us_", "point_s")


def arithmetic(rows: list[dict]) -> list[dict]:
    return sorted(
        ({k: v for k, v in r.items() if not k.startswith(MEASURED)} for r in rows),
        key=lambda r: (r["point_key"], r["table"]),
    )


@pytest.mark.slow
def test_the_same_grid_on_a_local_ray_cluster_gives_the_same_rows(local_sweep, tmp_path):
    ray = pytest.importorskip("ray")
    grid, _, local_doc = local_sweep
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = invoke(["sweep", grid, "--launcher", "ray", "--out", str(tmp_path), "--json"])
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output
    ray_rows = json.loads(result.stdout)["rows"]
    assert len(ray_rows) == len(local_doc["rows"])
    assert arithmetic(ray_rows) == arithmetic(local_doc["rows"])


def test_a_sweep_figure_names_the_model_device_and_dtype_its_points_ran(tmp_path):
    from reports.sweep import run_of

    text = 'command = "compile"\n[options]\nmodel = "tiny"\ndevice = "cpu"\n'
    grid = write_grid(tmp_path, text + '[axes]\ndtype = ["float32", "bfloat16"]\n')
    assert run_of(points(load_grid(grid))) == {"model": "tiny", "device": "cpu", "dtype": "varies"}
