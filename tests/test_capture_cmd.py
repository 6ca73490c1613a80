"""`nanobench capture` end to end: Day 54's counts and pool table, outputs, gates, bad input.

The command is registered on a local Typer app (cli.py is not this module's to edit) with a
second command so Typer stays in subcommand mode. The model is a small checkpoint with Day 54's
32 heads, so the pool table comes out at the seed's numbers without materialising a 1B preset.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch
import typer
from typer.testing import CliRunner

from nanobench.cli import app as cli_app
from tests.helpers import HEADS32, TINY_MHA, text_tables, write_model

# Day 54: steps -> captures closed, at 2 rows, a 16-token prompt, width multiple 128.
DAY54_RUNS = {8: 1, 32: 1, 64: 1, 128: 2}
# width multiple -> (shapes, shared MB, private MB, ratio), at 256 rows x 8192 tokens, 32 heads.
DAY54_POOL = {
    128: (576, "268.4", "17,414.2", "64.9"),
    512: (144, "268.4", "4,554.5", "17.0"),
    2048: (36, "268.4", "1,339.6", "5.0"),
    8192: (9, "268.4", "535.8", "2.0"),
}
DAY54_HELD = [268_435_456, 16_777_216, 8_192]
# Two timed rounds: enough to see the order rotate and every step kept, cheap on 2 cores.
FEW_ROUNDS = ["--rounds", "2", "--max-rounds", "2"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("heads32"), HEADS32)


def invoke(app, args: list[str]):
    # A wide terminal so rich never wraps a number across two lines.
    return CliRunner().invoke(app, args, env={"COLUMNS": "220"})


@pytest.fixture(scope="module")
def day54(app, model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("day54")
    args = ["capture", "--model", str(model_dir), "--out", str(out), "--json", "--check"]
    args += FEW_ROUNDS
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def rows_of(doc: dict, table: str) -> list[dict]:
    return [r for r in doc["rows"] if r["table"] == table]


def test_day54_captures_open_to_closed(day54):
    _, doc = day54
    runs = {r["steps"]: r for r in rows_of(doc, "run")}
    assert sorted(runs) == sorted(DAY54_RUNS)
    for steps, closed in DAY54_RUNS.items():
        r = runs[steps]
        assert r["captures_open"] == steps, "an unbucketed run presents one shape per step"
        assert r["captures_closed"] == closed == r["predicted_closed"] == r["recorded_mid_run"]
        assert r["replays"] == steps
        assert r["max_abs_diff"] == 0.0, "replayed logits must equal eager logits exactly"
        assert r["run_ms_eager"] > 0 and r["run_ms_replayed"] > 0
        assert r["step_ms_eager"] > 0 and r["step_ms_replayed_iqr"] >= 0 and r["rounds"] == 2
        # Two rounds give a ratio but no interval: the verdict can only be can't tell.
        assert r["ratio_vs_eager"] > 0 and r["ratio_vs_eager_low"] is None
        assert r["replay_not_slower"] == "inconclusive"
        assert r["max_model_len"] == 16 + 128
    assert f"{runs[8]['reuse']:.0%}" == "88%" and f"{runs[128]['reuse']:.0%}" == "98%"


def test_day54_pool_table_exactly(day54):
    _, doc = day54
    pools = {r["width_multiple"]: r for r in rows_of(doc, "pool") if r["kernel"] == "reference"}
    for multiple, (shapes, shared, private, ratio) in DAY54_POOL.items():
        r = pools[multiple]
        assert r["shapes"] == shapes
        assert r["shared_pool_bytes"] == 268_435_456
        assert f"{r['shared_pool_bytes'] / 1e6:,.1f}" == shared
        assert f"{r['private_pools_bytes'] / 1e6:,.1f}" == private
        assert f"{r['sharing_ratio']:.1f}" == ratio
    triton = [r for r in rows_of(doc, "pool") if r["kernel"] == "triton"]
    assert [(r["shapes"], r["shared_pool_bytes"]) for r in triton] == [(9, 0)]


def test_day54_what_a_step_holds(day54):
    _, doc = day54
    held = rows_of(doc, "held")
    assert [r["reference_bytes"] for r in held] == DAY54_HELD
    assert [r["triton_bytes"] for r in held] == [0, *DAY54_HELD[1:]], "triton: no rectangle"


def test_gates_and_outputs(day54):
    out, doc = day54
    names = [g["name"] for g in doc["gates"]]
    for steps in DAY54_RUNS:
        for gate in ("replay_equals_eager", "check_replays_dominate", "check_output_not_held"):
            assert f"{gate}[{steps}]" in names
    assert all(g["passed"] for g in doc["gates"]), doc["gates"]
    frame = pd.read_csv(out / "capture.csv")
    assert set(frame["table"]) == {"run", "record", "pool", "workspace", "held"}
    assert list(frame[frame["table"] == "run"]["captures_closed"]) == list(DAY54_RUNS.values())
    png = out / "captured-decode-replay.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert doc["outputs"]["png"] == str(png)
    # On a CPU the replay ratio is informational: in the rows, never a gate (--check exits 0).
    assert not [n for n in names if n.startswith("replay_not_slower")]


def test_each_graph_a_run_recorded_is_a_row_with_its_seconds_and_recorder(day54):
    out, doc = day54
    records = rows_of(doc, "record")
    # Lazy runs at 2 rows, a 16-token prompt, multiple 128, max_model_len 16 + 128 = 144: the
    # widths 24..144 a run reaches bucket to 128, and past 128 to 144 (clamped), by hand.
    assert [(r["steps"], r["rows"], r["width"]) for r in records] == [
        (8, 2, 128), (32, 2, 128), (64, 2, 128), (128, 2, 128), (128, 2, 144),
    ]  # fmt: skip
    assert {(r["mode"], r["recorder"], r["device"]) for r in records} == {
        ("lazy", "eager_recorder", "cpu")
    }
    assert all(r["record_s"] > 0 and r["pool_growth_bytes"] is None for r in records)
    for run in rows_of(doc, "run"):
        own = [r["record_s"] for r in records if r["steps"] == run["steps"]]
        assert run["graphs_recorded"] == len(own) == run["captures_closed"]
        assert run["record_s_total"] == pytest.approx(sum(own))
        assert run["record_s_per_graph"] == pytest.approx(sum(own) / len(own))
        assert run["recorder"] == "eager_recorder"
    frame = pd.read_csv(out / "capture.csv")
    assert frame[frame["table"] == "record"]["record_s"].tolist() == pytest.approx(
        [r["record_s"] for r in records]
    )


def test_the_record_table_and_notes_show_each_graph_and_the_whole_list(app, model_dir, tmp_path):
    args = ["capture", "--model", str(model_dir), "--up-front", "--run-lengths", "8"]
    args += ["--width-multiple", "16", "--rounds", "1", "--max-rounds", "1", "--out", str(tmp_path)]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    (table,) = [t for t in text_tables(result.stdout) if t.header[:2] == ("steps", "mode")]
    assert table.header == ("steps", "mode", "graph (rows x width)", "record s", "recorder")
    # max_model_len 16 + 8 = 24: widths 16 and 24 x rows 1 and 2, largest (rows x width) first.
    assert [row[2] for row in table.rows] == ["2 x 24", "2 x 16", "1 x 24", "1 x 16"]
    assert {(row[0], row[1], row[4]) for row in table.rows} == {("8", "up-front", "eager_recorder")}
    shown = [float(row[3]) for row in table.rows]
    (note,) = [ln for ln in result.stdout.splitlines() if ln.startswith("8 steps: 4 graphs")]
    found = re.fullmatch(
        r"8 steps: 4 graphs recorded \(up-front\) in (\S+) s, (\S+) s per graph "
        r"\(eager_recorder on cpu\)",
        note,
    )
    assert found, note
    total, per_graph = float(found[1]), float(found[2])
    assert total == pytest.approx(sum(shown), abs=0.001)  # four cells rounded to 0.1 ms
    assert per_graph == pytest.approx(total / 4, abs=0.001)


def test_every_timed_step_is_on_disk_with_the_env(day54):
    from nanobench.harness.runs.env_record import read_env

    out, doc = day54
    samples = pd.read_csv(out / "capture-samples.csv")
    assert list(samples.columns) == ["run_length", "system", "process", "round", "step", "ms"] + [
        "built",
        "steady",
    ]
    assert samples["run_length"].dtype.kind == "i" and samples["ms"].dtype.kind == "f"
    assert samples["steady"].dtype == bool and set(samples["system"]) == {"eager", "replayed"}
    # Every step of every window: run length x 2 rounds x 2 systems.
    counts = samples.groupby("run_length").size().to_dict()
    assert counts == {n: n * 2 * 2 for n in DAY54_RUNS}
    # Rotating: round 1 eager first, round 2 replayed first (the file keeps the order timed).
    first = samples[samples["run_length"] == 8].drop_duplicates(["round", "system"])
    assert list(zip(first["round"], first["system"])) == [
        (1, "eager"), (1, "replayed"), (2, "replayed"), (2, "eager"),
    ]  # fmt: skip
    assert doc["outputs"]["samples"] == str(out / "capture-samples.csv")
    record = read_env(out / "capture-env.json")
    assert doc["env"]["torch_version"] == record.torch_version == torch.__version__
    frame = pd.read_csv(out / "capture.csv")
    runs = frame[frame["table"] == "run"]
    for column in ("step_ms_eager_iqr", "ratio_vs_eager_low", "replay_not_slower", "rounds"):
        assert column in runs.columns, column


def test_the_alias_prints_the_tables_with_a_heads_override(app, tmp_path):
    # The tiny preset has 8 heads; --heads 32 prices Day 54's pool table without a 32-head model.
    args = ["capturebench", "--run-lengths", "8", "--heads", "32", "--out", str(tmp_path)]
    args += ["--rounds", "5", "--max-rounds", "5"]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    # By hand, in binary units: the shared pool is 256 rows x 32 heads x 8192 x 4 B = 256 MiB;
    # private at multiple 128: rows 1+2+...+256 = 511, widths 128+256+...+8192 = 266,240, so
    # 511 x 32 x 266,240 x 4 B = 17,414,225,920 B = 16.2 GiB; at 8192: 511 x 32 x 8192 x 4 B
    # = 511 MiB.
    for text in ("captures open", "256.0 MiB", "16.2 GiB", "64.9x", "511.0 MiB", "2.0x"):
        assert text in result.stdout, text
    # The pool table's row for multiple 128 names both pools in binary units on one line.
    (line,) = [ln for ln in result.stdout.splitlines() if "64.9x" in ln]
    assert "256.0 MiB" in line and "16.2 GiB" in line, line
    assert "268,435,456" in result.stdout and "16,777,216" in result.stdout
    assert "pass replay_equals_eager[8]" in result.stdout
    # The run table gives each side's median (IQR) and the ratio with its 95% interval.
    assert "[95% CI]" in result.stdout and "(IQR)" in result.stdout
    (note,) = [ln for ln in result.stdout.splitlines() if ln.startswith("8 steps: replayed")]
    assert re.search(r"\d\.\d{3}x \[\d\.\d{3}, \d\.\d{3}\] over 5 rounds", note), note
    assert "informational on cpu" in note


def test_up_front_capture_then_every_step_replays(app, model_dir, tmp_path):
    args = ["capture", "--model", str(model_dir), "--up-front", "--run-lengths", "8,40"]
    args += ["--width-multiple", "16", "--out", str(tmp_path), "--json", "--check", *FEW_ROUNDS]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for r in rows_of(doc, "run"):
        # max_model_len 16 + 40 = 56: widths 16, 32, 48, 56 x rows 1, 2.
        assert r["captured_up_front"] == 8 and r["capture_s"] > 0
        assert r["recorded_mid_run"] == 0 and r["reuse"] == 1.0
        assert r["replays"] == r["steps"] and r["max_abs_diff"] == 0.0
    assert {r["steps"]: r["captures_closed"] for r in rows_of(doc, "run")} == {8: 1, 40: 3}
    names = {g["name"] for g in doc["gates"]}
    assert {"check_all_shapes_captured[40]", "first_decode_replayed[40]"} <= names
    # Two walks of the 8 shapes, largest rows x width first, more rows first on a tie (2 x 16
    # and 1 x 32 are both 32 cells): 112, 96, 64, 56, 48, 32, 32, 16 cells.
    walk = [(2, 56), (2, 48), (2, 32), (1, 56), (1, 48), (2, 16), (1, 32), (1, 16)]
    records = rows_of(doc, "record")
    assert [(r["steps"], r["rows"], r["width"]) for r in records] == [
        (n, rows, width) for n in (8, 40) for rows, width in walk
    ]
    assert all(r["mode"] == "up-front" and r["record_s"] > 0 for r in records)
    for r in rows_of(doc, "run"):
        # The recorder calls are a part of the walk, which also runs each shape's gates.
        assert r["graphs_recorded"] == 8 and r["record_s_total"] < r["capture_s"]


@pytest.mark.interpreter
def test_triton_kernel_replays_under_the_interpreter(app, tmp_path_factory, tmp_path):
    # The Triton kernel takes head_dim 32..256: TINY_MHA, not the 32-head model (head_dim 8).
    mha = write_model(tmp_path_factory.mktemp("mha"), TINY_MHA)
    args = ["capture", "--model", str(mha), "--kernel", "triton", "--rows", "1"]
    args += ["--prompt-len", "4", "--run-lengths", "3", "--out", str(tmp_path), "--json", "--check"]
    args += ["--rounds", "1", "--max-rounds", "1"]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    (run,) = rows_of(json.loads(result.stdout), "run")
    assert run["kernel"] == "triton" and run["captures_closed"] == 1
    assert run["max_abs_diff"] == 0.0


def test_a_model_the_kernel_cannot_take_is_bad_input(app, model_dir, tmp_path):
    args = ["capture", "--model", str(model_dir), "--kernel", "triton", "--run-lengths", "2"]
    result = invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "head_dim 8" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel", "flash"], "'--kernel': Value error, 'flash' is not one of 'reference'"),
        (["--run-lengths", "8,x"], "'--run-lengths': '8,x': expected comma-separated positive"),
        (["--rows", "0"], "'--rows': Input should be greater than or equal to 1"),
        (["--width-multiples", ""], "'--width-multiples': '': expected comma-separated positive"),
        (["--model", "/no/such/dir"], "--model '/no/such/dir'"),
        (["--dtype", "int8"], "'--dtype': Value error, 'int8' is not one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(app, tmp_path, args, message):
    result = invoke(app, ["capture", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nanobench: error: "), result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_cuda_without_a_device_is_bad_input(app, tmp_path):
    result = invoke(app, ["capture", "--device", "cuda", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--device cuda: no CUDA device here" in result.stderr


@pytest.mark.gpu
def test_cuda_capture_measures_the_pool(app, model_dir, tmp_path):
    args = ["capture", "--model", str(model_dir), "--device", "cuda", "--up-front"]
    args += ["--run-lengths", "8,24", "--capture-rows", "8", "--capture-tokens", "512"]
    args += ["--width-multiples", "128,512", "--out", str(tmp_path), "--json", "--check"]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for r in rows_of(doc, "run"):
        assert r["capture_pool_bytes"] is not None and r["recorded_mid_run"] == 0
    pool = [r for r in rows_of(doc, "pool") if r["kernel"] == "reference"]
    assert sorted(r["width_multiple"] for r in pool) == [128, 512]
    for r in pool:
        # nanobench's prediction, by hand: the largest score rectangle of the list,
        # 8 rows x 32 heads x 512 wide x fp32, whatever the width multiple.
        assert r["shared_pool_bytes"] == 8 * 32 * 512 * 4
        # The measured pool must hold that rectangle, and the row says by how much it differs.
        measured = r["shared_pool_measured_bytes"]
        assert measured >= 8 * 32 * 512 * 4, r
        assert r["shared_pool_diff_pct"] == pytest.approx(100 * (measured / 524288 - 1))
        # Every private pool holds at least its own rectangle: the sum over the list, by hand.
        rows_sum = 1 + 2 + 4 + 8
        widths_sum = sum(range(r["width_multiple"], 513, r["width_multiple"]))
        assert r["private_pools_measured_bytes"] >= rows_sum * 32 * widths_sum * 4, r


def test_the_held_output_gate_sees_what_the_bench_keeps(monkeypatch):
    """The gate checks the logits the bench keeps across steps: copies pass, views fail."""
    import nanobench.capture.bench as bench
    from engine.weights import synthesize_weights
    from nanobench.capture.gates import gates
    from nanobench.capture.spec import CaptureSpec
    from nanobench.harness.workers.rounds import RoundPlan

    tensors = synthesize_weights(TINY_MHA, 1, torch.float32)
    options = dict(rows=2, prompt_len=8, steps=[4], width_multiple=16, up_front=False)
    options["plan"] = RoundPlan(1, 1, 0.5, 60.0)

    def held_gate() -> tuple[bool, str]:
        runs, _ = bench.run_rows(TINY_MHA, tensors, **options)
        found_gates = gates(CaptureSpec(up_front=False), runs)
        (found,) = [g for g in found_gates if g.name == "check_output_not_held[4]"]
        return found.passed, found.detail

    assert held_gate()[0] is True
    monkeypatch.setattr(bench, "copy_out", lambda logits: logits)  # keep the replay's view
    passed, detail = held_gate()
    assert passed is False and "view on a replay's output" in detail
