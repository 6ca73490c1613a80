"""tune on a served batch trace, with capture lists as a dimension of its race: the mix a window
decodes, each list's sizes (the trace's own held to a brute-force search), the space that
prunes a list on a CPU or one that leaves the trace's largest batch without a graph, the
engine padding a batch to its list's size, a worker decoding the mix, and the bad input."""

from __future__ import annotations

import itertools

import pytest
import torch
from typer.testing import CliRunner

from engine.config import ConfigError, EngineConfig
from engine.engine import Engine
from engine.recorders import eager_recorder
from nanobench.cli import app
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.errors import BadInput
from nanobench.tune.paste import paste_lines
from nanobench.tune.space import Config, build_space, knob_settings
from nanobench.tune.words import space_lines
from nanobench.tune.workload import capture_lists, workload

TRACE = [1, 1, 1, 2, 3, 3, 5, 5, 5, 5, 6, 1]


def trace_file(tmp_path, batches=TRACE):
    path = tmp_path / "served.csv"
    path.write_text("rows\n" + "".join(f"{b}\n" for b in batches))
    return str(path)


def test_a_mixed_workers_step_shapes_are_each_size_in_turn():
    # written out by hand: prompt 16, 3 steps, widths 17 to 19 at 1 row, then at 4
    mixed = WorkerSpec(model="tiny", steps=3, batch_mix=((1, 0.5), (4, 0.5)))
    assert mixed.step_shapes() == [(1, 17), (1, 18), (1, 19), (4, 17), (4, 18), (4, 19)]
    assert WorkerSpec(model="tiny", steps=2, rows=3).step_shapes() == [(3, 17), (3, 18)]


def test_a_trace_is_its_mix_and_rows_are_one_size(tmp_path):
    assert workload(4, "", 8).mix == ((4, 1.0),)
    load = workload(4, trace_file(tmp_path), 8)
    # counted by hand from TRACE: 4 ones, 1 two, 2 threes, 4 fives, 1 six of 12 steps
    assert load.mix == ((1, 4 / 12), (2, 1 / 12), (3, 2 / 12), (5, 4 / 12), (6, 1 / 12))
    assert load.top == 6 and load.line().startswith("the batch trace's 12 steps: 1 (33%)")
    with pytest.raises(BadInput, match="a step of 6 rows is above --max-batch 4"):
        workload(4, trace_file(tmp_path), 4)


def padding(sizes, batches):
    return sum(min(s for s in sizes if s >= b) - b for b in batches)


def test_the_trace_list_pads_least_of_every_list_of_that_many(tmp_path):
    load = workload(4, trace_file(tmp_path), 8)
    ((name, sizes),) = capture_lists(("trace",), load, 3, 8)
    # every list of at most 3 sizes from 1..6 whose largest covers the trace: the least padding
    lists = [c for k in (1, 2, 3) for c in itertools.combinations(range(1, 7), k) if c[-1] == 6]
    least = min(padding(c, TRACE) for c in lists)
    assert name == "trace" and len(sizes) <= 3 and padding(sizes, TRACE) == least
    # vLLM v1's rule for max_num_seqs 8 (vllm/config/vllm.py): 1, 2, 4, then 8 up to 2 x 8
    assert capture_lists(("vllm", "1+2+8"), load, 3, 8) == (("vllm", (1, 2, 4, 8, 16)),
                                                            ("1+2+8", (1, 2, 8)))  # fmt: skip


def test_a_list_needs_a_trace_or_a_ladder(tmp_path):
    with pytest.raises(BadInput, match="--capture-lists trace: needs --batch-trace"):
        capture_lists(("trace",), workload(4, "", 8), 4, 8)
    with pytest.raises(BadInput, match="--capture-lists 0\\+2: expected trace, vllm"):
        capture_lists(("0+2",), workload(4, "", 8), 4, 8)


def space(device, graphs, top=6):
    return build_space(("dynamic",), ("freezing",), 1, device=device, backend="inductor",
                       settings=knob_settings, graphs=graphs, top=top)  # fmt: skip


def test_lists_race_on_cuda_and_are_pruned_on_a_cpu():
    graphs = (("trace", (1, 3, 6)), ("same", (1, 3, 6)), ("short", (1, 2, 4)))
    on_cpu = space("cpu", graphs)
    assert [c.name for c in on_cpu.configs] == ["off", "dynamic", "dynamic + freezing"]
    assert {s.config.name for s in on_cpu.set_aside} == {
        "dynamic + graphs trace", "dynamic + graphs same", "dynamic + graphs short"}  # fmt: skip
    assert all("needs --device cuda, not cpu" in s.reason for s in on_cpu.set_aside)
    on_cuda = space("cuda", graphs)
    listed = next(c for c in on_cuda.configs if c.graphs)
    assert listed.name == "dynamic + graphs trace" and listed.sizes == (1, 3, 6)
    aside = {s.config.name: s for s in on_cuda.set_aside}
    assert aside["dynamic + graphs same"].into == listed
    assert "largest graph is 4 rows and the workload reaches 6" in aside[
        "dynamic + graphs short"].reason  # fmt: skip
    assert "  dynamic + graphs short [1,2,4]: pruned: its largest" in "\n".join(
        space_lines(on_cuda)
    )
    # its padded batches are shapes of its own: it compiles into a cache of its own
    assert on_cuda.cache_of(listed) == listed and listed.side != Config("dynamic").side


def test_the_paste_lines_name_the_list_as_each_server_takes_it():
    lines = paste_lines(Config("dynamic", "", "trace", (1, 3, 6)), "inductor")
    assert "step = torch.compile(step, dynamic=True, backend='inductor')" in lines
    assert '# vLLM: compilation_config={"cudagraph_capture_sizes": [1, 3, 6]}' in lines
    assert "# SGLang: --cuda-graph-bs 1 3 6" in lines
    assert not any(ln for ln in paste_lines(Config("dynamic"), "inductor") if "graph" in ln)


def test_the_engine_pads_a_batch_to_its_lists_size():
    with pytest.raises(ConfigError, match="largest size must be max_batch_size 8"):
        EngineConfig(bucket_decode=True, capture_sizes=(1, 3, 6))
    with pytest.raises(ConfigError, match="needs bucket_decode"):
        EngineConfig(max_batch_size=6, capture_sizes=(1, 3, 6))
    shape = dict(max_model_len=64, dtype="float32")
    plain = Engine.from_checkpoint("tiny", max_batch_size=6, **shape)
    # capture semantics on a CPU (fixed buffers, no-argument replays), as decode's engine-captured
    listed = Engine.from_checkpoint("tiny", max_batch_size=6, bucket_decode=True,
                                    capture_decode=True, capture_sizes=(1, 3, 6),
                                    recorder=eager_recorder, **shape)  # fmt: skip
    listed.capture()
    prompts = [[5, 9, 11, 2], [7, 3, 3]]
    tokens = plain.prefill(prompts).argmax(-1).tolist()
    assert listed.prefill(prompts).argmax(-1).tolist() == tokens
    want = plain.decode_step(tokens)  # (B, V)
    got = listed.decode_step(tokens).clone()  # (B, V)
    assert listed.last_plan.graph_rows == 3 and got.shape == want.shape
    # the same forward on a padded batch: float32 sums in another order, not bitwise
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_worker_decodes_the_mix_and_a_step_is_its_mean():
    from nanobench.compile.session import open_session

    base = dict(model="tiny", steps=3, max_model_len=32, backend="eager", probe=False)
    mixed = open_session({**base, "batch_mix": [[1, 0.25], [3, 0.75]]}).ready["outputs"]
    alone = [open_session({**base, "rows": r}).ready["outputs"] for r in (1, 3)]
    # each size's steps in turn, each output the one a worker at that size alone gives
    assert mixed == alone[0] + alone[1]
    session = open_session({**base, "batch_mix": [[1, 0.25], [3, 0.75]]})
    session.pass_at = lambda prompts, report, keep: ([len(prompts)] * 3, [len(prompts) - 1] * 3)
    assert session.run() == ([0.25 * 1 + 0.75 * 3] * 3, [0 + 2] * 3)
    assert WorkerSpec(**{**base, "batch_mix": [[1, 0.25]]}).batch_mix == ((1, 0.25),)


@pytest.mark.slow
def test_a_worker_with_a_list_records_it_up_front_and_every_step_replays():
    from nanobench.compile.session import open_session
    from nanobench.harness.step.output_check import output_change

    base = dict(model="tiny", mode="dynamic", steps=3, max_model_len=32, backend="eager",
                probe=False, batch_mix=[[1, 0.5], [3, 0.5]])  # fmt: skip
    # on a CPU the engine's recorder keeps capture semantics with eager replays
    listed = open_session({**base, "capture_sizes": [1, 3]})
    ready = listed.ready
    assert ready["record_s"] > 0 and ready["builds_per_step"] == [0, 0, 0]
    # a replay compiles nothing: every step of a window is steady
    assert listed.run()[1] == [0, 0, 0]
    plain = open_session(base).ready
    assert plain["record_s"] is None and plain["builds_per_step"][0] > 0
    assert output_change(plain["outputs"], ready["outputs"], "float32") == ""


@pytest.mark.parametrize(
    "args, said",
    [
        (["--capture-lists", "trace"], "--capture-lists trace: needs --batch-trace"),
        (["--capture-lists", "big"], "--capture-lists big: expected trace, vllm"),
        (["--batch-trace", "TRACE", "--max-batch", "4", "--rows", "2"], "above --max-batch 4"),
        (["--batch-trace", "TRACE", "--target", "hf-static"], "--batch-trace with --target"),
        (["--batch-trace", "nowhere.csv"], "--batch-trace nowhere.csv: cannot read it"),
    ],
)
def test_bad_workload_input_is_one_line_exit_2(args, said, tmp_path, monkeypatch):
    import nanobench.tune.bench as bench

    monkeypatch.setattr(bench.Race, "run", lambda self: pytest.fail("a worker started"))
    args = [trace_file(tmp_path) if a == "TRACE" else a for a in args]
    result = CliRunner().invoke(app, ["tune", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert not (tmp_path / "o" / "tune.csv").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="records CUDA graphs")
def test_on_cuda_the_lists_race_on_the_trace(tmp_path):
    import json

    result = CliRunner().invoke(app, [
        "tune", "--device", "cuda", "--knobs", "guard-filter", "--max-knobs", "1", "--steps", "4",
        "--max-rounds", "6", "--processes", "1", "--batch-trace", trace_file(tmp_path),
        "--capture-lists", "trace,vllm", "--max-graphs", "3", "--out", str(tmp_path), "--json",
    ])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    rows = {r["config"]: r for r in json.loads(result.stdout)["rows"]}
    for name in ("dynamic + graphs trace", "dynamic + graphs vllm"):
        assert rows[name]["outcome"] in ("survivor", "dropped"), rows[name]["reason"]
        assert rows[name]["record_s"] > 0 and rows[name]["step_ms"] > 0
    assert rows["dynamic + graphs vllm"]["capture_sizes"] == "1,2,4,8,16"


def test_the_table_adds_a_lists_recording_to_its_compile():
    from rich.console import Console

    from reports.tune import render_tune

    console = Console(record=True, width=200)
    rows = [{"config": "dynamic + graphs trace", "mode": "dynamic", "outcome": "survivor",
             "compile_s": 28.31, "compile_warm_s": 17.6, "record_s": 1.24, "step_ms": 0.5},
            {"config": "dynamic", "mode": "dynamic", "outcome": "survivor", "compile_s": 20.0,
             "compile_warm_s": None, "record_s": None, "step_ms": 0.6}]  # fmt: skip
    render_tune(console, rows, [], "t")
    text = console.export_text()
    assert "28.3 / 17.6 + 1.2 rec" in text and "20.0 / -" in text and "20.0 / - +" not in text
