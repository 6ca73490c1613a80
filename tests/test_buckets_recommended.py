"""`buckets --batch-trace FILE --max-graphs K`: the capture list chosen for a served trace.

The acceptance case of issue 25 item 6: on a skewed trace (most steps at 1-8 rows, a tail to
64) the recommended list of 8 graphs pads no more than any list of 8 sizes, found here by
brute force, and vLLM's list for 64 sequences is priced on the same trace beside it. Expected
padding is counted step by step here; vLLM's and SGLang's lists are written out by hand from
their sources (engine/capture_sizes.py cites them); the pad share is checked against
engine.capture_sizes.mix_pad_share, an independent implementation.
"""

from __future__ import annotations

import itertools
import json
import random

import pandas as pd
import pytest
from typer.testing import CliRunner

from engine.capture_sizes import mix_pad_share
from nanobench.cli import app

# Steps per batch size: most at 1-8 rows, a thin tail to 64.
SKEWED = {1: 400, 2: 300, 3: 200, 4: 150, 5: 100, 6: 80, 7: 60, 8: 50}
SKEWED |= {12: 20, 16: 15, 24: 10, 32: 8, 48: 4, 64: 2}
# vLLM v1 at max_num_seqs 64: 1, 2, 4, then 8..128 by 8 (its top is 2 x max_num_seqs).
VLLM_64 = [1, 2, 4, *range(8, 129, 8)]
# SGLang at cuda_graph_max_bs 64: 1, 2, 4, 8, 12, then 16..64 by 8.
SGLANG_64 = [1, 2, 4, 8, 12, *range(16, 65, 8)]


def write_trace(path, counts: dict[int, int], seed: int = 0) -> list[int]:
    """A served trace in arrival order (shuffled), with a column besides `rows`."""
    batches = [b for b, n in counts.items() for _ in range(n)]
    random.Random(seed).shuffle(batches)
    lines = ["step,rows"] + [f"{i},{b}" for i, b in enumerate(batches)]
    path.write_text("\n".join(lines) + "\n")
    return batches


def step_padding(sizes, batches) -> int:
    """Each step run at the smallest listed size at or above it, counted one step at a time."""
    return sum(min(s for s in sizes if s >= b) - b for b in batches)


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skewed")
    batches = write_trace(tmp / "served.csv", SKEWED)
    args = ["buckets", "--batch-trace", str(tmp / "served.csv"), "--max-graphs", "8"]
    args += ["--max-batch", "64", "--run-lengths", "8", "--out", str(tmp / "out")]
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(result.stdout)["rows"] if r["table"] == "recommended"]
    return tmp, args, batches, {r["list_name"]: r for r in rows}


def test_the_recommended_eight_pad_no_more_than_any_eight_sizes(skewed):
    _, _, batches, rows = skewed
    best = rows["recommended"]
    sizes = best["capture_sizes"]
    assert best["graphs"] == len(sizes) <= 8 and sizes[-1] == 64 == best["trace_max_rows"]
    assert best["padded_rows"] == step_padding(sizes, batches)
    # Any list's sizes can be lowered to the largest batch each serves without padding more
    # (test_capture_list.py checks that over every size), so brute force over the trace's
    # 14 batch sizes covers every list of 8 sizes in 1..64: 1,716 lists holding 64.
    values = sorted(SKEWED)
    least = min(
        step_padding((*rest, 64), batches)
        for k in range(8)
        for rest in itertools.combinations(values[:-1], k)
    )
    assert best["padded_rows"] == least
    assert best["mix_pad_share"] == pytest.approx(mix_pad_share(tuple(sizes), batches))
    assert best["trace_steps"] == len(batches) and best["uncovered_steps"] == 0
    assert best["mean_pad_rows"] == pytest.approx(least / len(batches))


def test_vllm_and_sglang_lists_are_priced_on_the_same_trace(skewed):
    _, _, batches, rows = skewed
    for name, sizes in (("vllm", VLLM_64), ("sglang", SGLANG_64)):
        row = rows[name]
        assert row["capture_sizes"] == sizes and row["graphs"] == len(sizes)
        assert row["padded_rows"] == step_padding(sizes, batches)
        assert row["mix_pad_share"] == pytest.approx(mix_pad_share(tuple(sizes), batches))
        assert row["trace_steps"] == len(batches) and row["uncovered_steps"] == 0


def test_each_list_prices_its_startup_as_graphs_times_a_graphs_record_seconds(skewed):
    tmp, args, _, rows = skewed
    # vLLM's 19 sizes for 64 sequences, SGLang's 12: 0.4 s a graph (vLLM's log in
    # vllm-project/vllm#11349: 35 graphs in 14 s).
    assert rows["vllm"]["startup_s"] == pytest.approx(len(VLLM_64) * 14 / 35)
    assert rows["sglang"]["startup_s"] == pytest.approx(len(SGLANG_64) * 14 / 35)
    best = rows["recommended"]
    assert best["startup_s"] == pytest.approx(best["graphs"] * 14 / 35)
    measured = invoke([*args, "--record-s-per-graph", "0.25"])
    assert measured.exit_code == 0, measured.output
    line = next(ln for ln in measured.stdout.splitlines() if " vllm " in ln)
    assert line.rstrip(" │").endswith(f"{len(VLLM_64) * 0.25:.3g}"), line  # 19 x 0.25 = 4.75
    assert "measured: --record-s-per-graph" in measured.stdout
    frame = pd.read_csv(tmp / "out" / "buckets.csv")
    table = frame[frame["table"] == "recommended"]
    assert table["startup_s"].astype(float).tolist() == pytest.approx(
        [best["graphs"] * 0.25, len(VLLM_64) * 0.25, len(SGLANG_64) * 0.25]
    )


def test_the_table_and_the_csv_show_the_three_lists(skewed):
    tmp, args, _, rows = skewed
    result = invoke(args)
    assert result.exit_code == 0, result.output
    assert "Capture list for the trace: 1,399 steps, batches up to 64, at most 8 graphs" in (
        result.stdout
    )
    for name, row in rows.items():
        line = next(line for line in result.stdout.splitlines() if f" {name} " in line)
        assert f"{row['mix_pad_share']:.1%}" in line and f" {row['graphs']} " in line
    assert "1,2,4,8,16,24,32,40,...,112,120,128" in result.stdout
    frame = pd.read_csv(tmp / "out" / "buckets.csv")
    table = frame[frame["table"] == "recommended"]
    assert list(table["list_name"]) == ["recommended", "vllm", "sglang"]
    assert json.loads(table["capture_sizes"].iloc[0]) == rows["recommended"]["capture_sizes"]


def test_steps_above_a_servers_list_are_counted_apart(tmp_path):
    # vLLM's list at --max-batch 8 tops out at 16: a step of 20 rows runs eagerly there.
    batches = write_trace(tmp_path / "t.csv", {1: 5, 3: 2, 20: 1})
    args = ["buckets", "--batch-trace", str(tmp_path / "t.csv"), "--max-graphs", "2"]
    args += ["--max-batch", "20", "--run-lengths", "8", "--out", str(tmp_path / "o"), "--json"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    rows = {
        r["list_name"]: r for r in json.loads(result.stdout)["rows"] if r["table"] == "recommended"
    }
    # Two graphs: {3, 20} pads 5 x 2 = 10 rows; {1, 20} pads 2 x 17 = 34.
    assert rows["recommended"]["capture_sizes"] == [3, 20]
    assert rows["recommended"]["padded_rows"] == step_padding([3, 20], batches) == 10
    assert rows["vllm"]["uncovered_steps"] == 0  # vLLM goes to 2 x 20 = 40
    sglang = rows["sglang"]  # 1, 2, 4, 8, 12, 16 at cuda_graph_max_bs 20
    assert sglang["capture_sizes"] == [1, 2, 4, 8, 12, 16] and sglang["uncovered_steps"] == 1
    assert sglang["padded_rows"] == 2  # the two steps of 3 run at 4; the 20 runs eagerly


@pytest.mark.parametrize(
    ("trace", "graphs", "message"),
    [
        (None, ["--max-graphs", "4"], "--batch-trace {path}: cannot read it"),
        ("step,batch\n0,4\n", ["--max-graphs", "4"], "expected a CSV with a rows column"),
        ("rows\n4\nfour\n", ["--max-graphs", "4"], "line 3: rows 'four', expected a positive"),
        ("rows\n4\n0\n", ["--max-graphs", "4"], "line 3: rows '0', expected a positive integer"),
        ("rows\n", ["--max-graphs", "4"], "no decode step in it"),
        ("rows\n4\n99\n", ["--max-graphs", "4"], "a step of 99 rows is above --max-batch 64"),
        ("rows\n4\n", [], "needs --max-graphs K"),
    ],
)
def test_bad_traces_are_one_line_and_exit_2(tmp_path, trace, graphs, message):
    path = tmp_path / "trace.csv"
    if trace is not None:
        path.write_text(trace)
    args = ["buckets", "--batch-trace", str(path), "--max-batch", "64", *graphs]
    result = invoke([*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nanobench: error: "), result.stderr
    assert message.format(path=path) in lines[0]
    assert not (tmp_path / "o").exists()


def test_max_graphs_without_a_trace_is_bad_input(tmp_path):
    result = invoke(["buckets", "--max-graphs", "4", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--max-graphs 4: needs --batch-trace" in result.stderr


def test_with_a_target_the_list_is_chosen_within_the_memory_budget(tmp_path):
    from nanobench.memory.target_memory import size_memory

    write_trace(tmp_path / "t.csv", {1: 10, 2: 10, 8: 1})
    spec = "tests/corpus/memory_gptfast.py:small"
    priced = [
        size_memory(spec, rows=r, prompt_len=127, steps=1, dtype="float32")[0] for r in (1, 2, 8)
    ]
    # State at 8 rows and the largest workspace stay whatever the list; each graph keeps its
    # (B, 1, 256) fp32 logits: 1 KiB a row. Ten rows of outputs: {2, 8}; eleven: {1, 2, 8}.
    fixed = priced[-1].state_bytes + max(p.workspace_bytes for p in priced)
    assert [p.outputs_bytes for p in priced] == [1024, 2048, 8192]
    args = ["buckets", "--batch-trace", str(tmp_path / "t.csv"), "--max-graphs", "3"]
    args += ["--target", spec, "--capture-tokens", "128", "--gpu-memory-utilization", "1.0"]
    args += ["--run-lengths", "8", "--out", str(tmp_path / "o"), "--json"]
    for rows, sizes in ((10, [2, 8]), (11, [1, 2, 8])):
        result = invoke([*args, "--device-memory", str(fixed + rows * 1024)])
        assert result.exit_code == 0, result.output
        found = json.loads(result.stdout)["rows"]
        best = next(r for r in found if r.get("list_name") == "recommended")
        assert best["capture_sizes"] == sizes and best["fits"] is True
        assert best["need_bytes"] == fixed + sum(sizes) * 1024 <= best["usable_bytes"]
    # Below the largest batch's own need no list fits: an empty list, every step eager.
    result = invoke([*args, "--device-memory", str(fixed + 7 * 1024)])
    best = next(r for r in json.loads(result.stdout)["rows"] if r.get("list_name") == "recommended")
    assert best["capture_sizes"] == [] and best["fits"] is False and best["uncovered_steps"] == 21


def test_a_budget_needs_the_trace_and_the_target(tmp_path):
    args = ["buckets", "--device-memory", "1GiB", "--out", str(tmp_path / "o")]
    result = invoke(args)
    assert result.exit_code == 2 and "--target, --device-memory: bound the list" in result.stderr
