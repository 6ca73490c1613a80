"""`nanobench buckets` end to end: Day 52's tables from real plans, outputs, gates, bad input.

The command is registered on a local Typer app (cli.py is not this module's to edit) with a
second command so Typer stays in subcommand mode, the way the real CLI runs it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from engine.buckets import DecodeBuckets
from nanobench.buckets.bench import (
    PriceMismatch,
    check_plans_match_arithmetic,
    measure_run,
)
from nanobench.buckets.command import buckets
from nanobench.buckets.spec import CSV_NAME, PNG_NAME, BucketsSpec
from nanobench.cli import app as cli_app
from nanobench.cost.buckets import bucket_run
from tests.helpers import shown_rows

EXAMPLE = "Example: nanobench buckets --width-multiple 2048"

DAY52 = ["--rows", "3", "--max-batch", "8", "--prompt-len", "16", "--width-multiple", "128"]
DAY52 += ["--run-lengths", "8,64,128,512", "--width-multiples", "128,512,2048,8192"]
# steps: (cells open, cells bucketed, bucketed shapes, waste as printed)
DAY52_RUNS = {
    8: (492, 768, 1, "35.9%"),
    64: (9_312, 20_480, 1, "54.5%"),
    128: (30_912, 66_560, 2, "53.6%"),
    512: (418_560, 680_960, 5, "38.5%"),
}
DAY52_CAPTURE = {128: 576, 512: 144, 2048: 36, 8192: 9}
# vLLM's log in vllm-project/vllm#11349: 35 CUDA graphs of Llama-3.2-1B captured in 14 s.
VLLM_S_PER_GRAPH = 14 / 35


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


def invoke(app, args: list[str]):
    # A wide terminal so rich never wraps a number across two lines.
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def day52_json(app, tmp_path_factory):
    out = tmp_path_factory.mktemp("day52")
    result = invoke(app, ["buckets", *DAY52, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out, result.stdout


def _runs(doc: dict) -> dict[int, dict]:
    return {r["steps"]: r for r in doc["rows"] if r["table"] == "run"}


def _capture(doc: dict) -> dict[int, dict]:
    return {r["width_multiple"]: r for r in doc["rows"] if r["table"] == "capture"}


# --- Day 52's two tables ----------------------------------------------------------------------


def test_json_is_one_document_with_the_contract_keys(day52_json):
    _, stdout = day52_json
    doc = json.loads(stdout)
    assert set(doc) == {"command", "rows", "gates", "outputs"}
    assert doc["command"] == "buckets"
    assert all({"name", "passed", "detail", "verdict"} <= set(g) for g in doc["gates"])


def test_table_one_reproduces_day_52(day52_json):
    runs = _runs(json.loads(day52_json[1]))
    assert sorted(runs) == sorted(DAY52_RUNS)
    for steps, (cells_open, cells_bucketed, shapes, waste) in DAY52_RUNS.items():
        r = runs[steps]
        assert r["shapes_open"] == steps
        assert r["cells_open"] == cells_open
        assert r["cells_bucketed"] == cells_bucketed
        assert r["shapes_bucketed"] == shapes
        assert f"{r['waste']:.1%}" == waste
        assert r["pad_rows"] == 1  # 3 rows pad to the row bucket 4


def test_plan_times_are_measured(day52_json):
    for r in _runs(json.loads(day52_json[1])).values():
        assert r["plan_ms_open"] > 0 and r["plan_ms_bucketed"] > 0
        assert r["plan_us_open_median"] > 0 and r["plan_us_bucketed_median"] > 0


def test_table_two_reproduces_day_52(day52_json):
    capture = _capture(json.loads(day52_json[1]))
    assert {m: c["shapes"] for m, c in capture.items()} == DAY52_CAPTURE
    for m, c in capture.items():
        assert (c["row_buckets"], c["shapes_triton"]) == (9, 9)
        assert c["row_buckets"] * c["width_buckets"] == DAY52_CAPTURE[m]
        # [256, 32, 1, 8192] fp32 scores for the reference kernel; none for Triton.
        assert c["workspace_bytes"] == 256 * 32 * 8192 * 4
        assert c["workspace_bytes_triton"] == 0
        assert 0 < c["waste"] < 1
    assert capture[128]["chosen"] and not capture[2048]["chosen"]
    assert [c["fits_budget"] for c in capture.values()] == [False, False, True, True]


def test_gates_run_and_the_576_shape_list_fails_the_budget(day52_json):
    gates = {g["name"]: g for g in json.loads(day52_json[1])["gates"]}
    for steps in DAY52_RUNS:
        assert gates[f"check_run_closed[steps={steps}]"]["passed"]
        assert gates[f"check_plans_match_arithmetic[steps={steps}]"]["passed"]
        assert gates[f"check_waste_bounded[steps={steps}]"]["passed"]
    budget = gates["check_capture_budget[multiple=128,kernel=reference]"]
    assert not budget["passed"] and "576 shapes" in budget["detail"]


def test_csv_and_png_are_written(day52_json):
    out, stdout = day52_json
    outputs = json.loads(stdout)["outputs"]
    assert outputs == {"csv": str(out / CSV_NAME), "png": str(out / PNG_NAME)}
    frame = pd.read_csv(out / CSV_NAME)
    assert list(frame.columns[:3]) == ["table", "kernel", "steps"]
    runs = frame[frame["table"] == "run"]
    assert runs["cells_bucketed"].astype(int).tolist() == [768, 20_480, 66_560, 680_960]
    assert frame[frame["table"] == "capture"]["shapes"].astype(int).tolist() == [576, 144, 36, 9]
    assert (out / PNG_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left


def test_each_list_prices_its_startup_seconds_from_the_named_cuda_model(day52_json):
    out, stdout = day52_json
    capture = _capture(json.loads(stdout))
    for multiple, shapes in DAY52_CAPTURE.items():
        r = capture[multiple]
        assert r["startup_s"] == pytest.approx(shapes * VLLM_S_PER_GRAPH)
        # Triton's list is rows only: the 9 row buckets 1, 2, 4, ..., 256.
        assert r["startup_s_triton"] == pytest.approx(9 * VLLM_S_PER_GRAPH)
        assert r["record_s_per_graph"] == pytest.approx(VLLM_S_PER_GRAPH)
        assert "vllm-project/vllm#11349" in r["record_s_source"]
        assert r["record_s_source"].startswith("model: ")
    frame = pd.read_csv(out / CSV_NAME)
    rows = frame[frame["table"] == "capture"]
    assert rows["startup_s"].astype(float).round(1).tolist() == [230.4, 57.6, 14.4, 3.6]


def test_a_measured_record_time_prices_the_startup_in_the_table_and_json(app, tmp_path):
    args = ["buckets", *DAY52, "--record-s-per-graph", "0.05", "--out", str(tmp_path)]
    table = invoke(app, args)
    assert table.exit_code == 0, table.output
    shown = shown_rows(table.stdout, "width multiple")
    # 576 x 0.05 = 28.8 s, 144 x 0.05 = 7.2 s, 36 x 0.05 = 1.8 s, 9 x 0.05 = 0.45 s.
    assert {m: row["startup s reference"] for m, row in shown.items()} == {
        "*128": "28.8",
        "512": "7.2",
        "2048": "1.8",
        "8192": "0.45",
    }
    assert {row["startup s triton"] for row in shown.values()} == {"0.45"}
    assert "measured: --record-s-per-graph" in table.stdout
    doc = json.loads(invoke(app, [*args, "--json"]).stdout)
    for multiple, shapes in DAY52_CAPTURE.items():
        r = _capture(doc)[multiple]
        assert r["startup_s"] == pytest.approx(shapes * 0.05)
        assert r["record_s_source"] == "measured: --record-s-per-graph"


def test_the_short_answer_prices_the_lists_startup(app, tmp_path):
    args = ["buckets", "--width-multiple", "2048", "--out", str(tmp_path)]
    result = invoke(app, args)
    assert result.exit_code == 0, result.output
    # 9 row buckets x 4 width buckets = 36 shapes, 0.4 s each by vLLM's log: 14.4 s.
    assert "startup       36 shapes x 0.4 s = 14.4 s recording them up front (model:" in (
        result.stdout
    )


def test_terminal_tables_show_day_52(app, tmp_path):
    result = invoke(app, ["buckets", *DAY52, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    for cells_open, cells_bucketed, _, waste in DAY52_RUNS.values():
        assert f"{cells_open:,}" in text and f"{cells_bucketed:,}" in text and waste in text
    for shapes in DAY52_CAPTURE.values():
        assert f" {shapes} " in text
    assert "[rows, heads, 1, width]" in text  # the caption survives rich markup
    assert "FAIL check_capture_budget" in text


def test_plans_agree_with_the_arithmetic():
    cases = [
        BucketsSpec(),
        BucketsSpec(rows=5, max_batch=6, prompt_len=7, max_model_len=300, width_multiple=64),
        BucketsSpec(rows=2, max_batch=8, kernel="triton"),
        BucketsSpec(rows=8, max_batch=8, prompt_len=1, width_multiple=1),
    ]
    for spec in cases:
        for steps in (1, 9, 150):
            row, trace = measure_run(spec, steps)
            check_plans_match_arithmetic(row)
            buckets = DecodeBuckets(
                spec.max_batch, spec.run_len(steps), spec.multiple, spec.width_free
            )
            arith = bucket_run(spec.rows, spec.prompt_len, steps, buckets)
            assert row.cells_open == arith.open_cells
            assert row.cells_bucketed == arith.padded_cells
            assert row.shapes_bucketed == arith.bucketed_count
            assert [tuple(s) for s in row.bucket_shapes] == list(arith.bucketed)
            assert row.waste == pytest.approx(arith.waste)
            assert len(trace.bucketed_shapes) == steps


def test_a_price_mismatch_is_a_gate_failure():
    row, _ = measure_run(BucketsSpec(), 8)
    with pytest.raises(PriceMismatch, match="cells_bucketed"):
        check_plans_match_arithmetic(replace(row, cells_bucketed=row.cells_bucketed + 1))


# --- the short answer and the kernels ---------------------------------------------------------


def test_width_multiple_alone_gives_the_short_answer(app, tmp_path):
    result = invoke(app, ["buckets", "--width-multiple", "2048", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "width multiple 2048 at 256 rows x 8192 tokens" in text
    assert "9 row buckets x 4 width buckets = 36 shapes" in text
    assert "fits" in text and "padding" in text
    assert "pass check_capture_budget[multiple=2048,kernel=reference]" in text
    assert "decode runs" not in text  # not the full tables
    assert len(text.splitlines()) <= 20
    assert (tmp_path / CSV_NAME).exists() and (tmp_path / PNG_NAME).exists()


def test_width_multiple_with_multiples_gives_the_full_tables(app, tmp_path):
    args = [
        "buckets",
        "--width-multiple",
        "2048",
        "--width-multiples",
        "128,8192",
        "--out",
        str(tmp_path),
    ]
    result = invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert sorted(_capture(json.loads(result.stdout))) == [128, 2048, 8192]
    assert "decode runs" in invoke(app, args).stdout


def test_triton_kernel_has_no_width_axis(app, tmp_path):
    args = ["--kernel", "triton", "--run-lengths", "8,200", "--out", str(tmp_path), "--json"]
    result = invoke(app, ["buckets", *args])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    row_ladder = DecodeBuckets(256, 8192, 128).rows
    for c in _capture(doc).values():
        assert c["shapes_triton"] == len(row_ladder) == 9
        assert c["fits_budget"]
    for r in _runs(doc).values():
        assert r["shapes_bucketed"] == 1
        assert r["bucket_shapes"] == [[4, r["max_model_len"]]]
    gates = {g["name"]: g["passed"] for g in doc["gates"]}
    assert gates["check_capture_budget[multiple=128,kernel=triton]"]


# --- exit codes -------------------------------------------------------------------------------


def test_check_exits_1_on_a_gate_failure_never_2(app, tmp_path):
    result = invoke(app, ["buckets", "--run-lengths", "8,64", "--out", str(tmp_path), "--check"])
    assert result.exit_code == 1, result.output
    assert result.stderr == ""


def test_check_exits_0_when_every_gate_passes(app, tmp_path):
    args = ["--width-multiple", "8192", "--max-waste", "1", "--check", "--run-lengths", "8,64"]
    args += ["--out", str(tmp_path)]
    result = invoke(app, ["buckets", *args])
    assert result.exit_code == 0, result.output


def test_alias_runs_the_same_command(app, tmp_path):
    result = invoke(app, ["bucketbench", "--run-lengths", "8", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert _runs(json.loads(result.stdout))[8]["cells_bucketed"] == 768


def test_help_carries_the_example(app):
    result = invoke(app, ["buckets", "--help"])
    assert result.exit_code == 0
    assert EXAMPLE in " ".join(result.stdout.split())
    assert EXAMPLE in buckets.__doc__


@pytest.mark.parametrize(
    "args, names",
    [
        (["--rows", "0"], "--rows"),
        (["--rows", "-1"], "--rows"),
        (["--run-lengths", "0"], "--run-lengths"),
        (["--run-lengths", "8,-4"], "--run-lengths"),
        (["--run-lengths", "eight"], "--run-lengths"),
        (["--width-multiple", "0"], "--width-multiple"),
        (["--max-batch", "0"], "--max-batch"),
        (["--prompt-len", "-3"], "--prompt-len"),
        (["--rows", "9"], "--max-batch"),
        (["--max-model-len", "100"], "--max-model-len"),
        (["--kernel", "cuda"], "--kernel"),
        (["--width-multiples", "128,0"], "--width-multiples"),
        (["--max-waste", "1.5"], "--max-waste"),
        (["--record-s-per-graph", "0"], "--record-s-per-graph 0: expected positive seconds"),
        (["--record-s-per-graph", "-0.5"], "--record-s-per-graph -0.5: expected positive"),
        (["--record-s-per-graph", "soon"], "--record-s-per-graph"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(app, tmp_path, args, names):
    out = tmp_path / "out"
    result = invoke(app, ["buckets", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nanobench: error:") and names in lines[0]
    assert "Traceback" not in result.output
    assert not out.exists()  # nothing written, not even the directory


def test_unwritable_out_is_bad_input(app, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = invoke(app, ["buckets", "--run-lengths", "8", "--out", str(blocker / "out")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0]
    assert blocker.read_text() == "not a directory"
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["a-file"]


@pytest.mark.parametrize(("max_waste", "passed"), [(0.35, False), (0.37, True)])
def test_the_waste_gate_reads_the_spec_limit(max_waste, passed):
    from nanobench.buckets.bench import measure
    from nanobench.buckets.gates import gates

    # 8 steps after a 16-token prompt, 3 rows, multiple 128: 492 real cells of 768 computed,
    # a waste of 1 - 492/768 = 0.359 (DAY52_RUNS), so the limit lands on either side of it.
    spec = BucketsSpec(run_lengths=(8,), max_waste=max_waste).validate()
    found = {g.name: g.passed for g in gates(spec, measure(spec))}
    assert found["check_waste_bounded[steps=8]"] is passed


def test_reports_name_bytes_in_binary_units_and_the_figure_names_its_run():
    from dataclasses import asdict

    from rich.console import Console

    from nanobench.buckets.bench import measure
    from nanobench.harness.runs.rows import as_dicts
    from reports.buckets import draw_buckets, render_short_answer

    spec = BucketsSpec(run_lengths=(8,), width_multiple=128).validate()
    result = measure(spec)
    console = Console(record=True, width=200)
    chosen = asdict(result.chosen)
    render_short_answer(console, chosen, [], {}, kernel="reference", max_shapes=spec.max_shapes)
    # 256 rows x 32 heads x 8192 width x 4 bytes (fp32) = 2**28 bytes: 256 MiB, not "268.4 MB".
    assert "256.0 MiB of fp32 scores" in console.export_text()
    traces = [asdict(t) for t in result.traces]
    runs, capture = as_dicts(result.runs), as_dicts(result.capture)
    fig = draw_buckets(runs, capture, traces, spec.max_shapes, spec.max_waste)
    assert fig._suptitle.get_text() == (
        "bucketed decode shapes: no weights (host plans), cpu float32, kernel reference, "
        "rows 3, max batch 8, prompt len 16"
    )
