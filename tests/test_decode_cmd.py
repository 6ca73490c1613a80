"""`nanobench decode`: the engine and transformers on one checkpoint, each in a fresh process.

The slow tests run real workers with few steps and one repeat: they check what the command
promises (the same greedy tokens, every column, a floor from a measured probe), never a timing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from engine.config import PRESETS
from nanobench.cli import app
from nanobench.decode.bench import TARGETS, DecodeTargets, targets_for
from nanobench.decode.derive import derive
from nanobench.decode.gates import gates
from nanobench.decode.roofline import (
    PROBE,
    floor_ms,
    kv_read_bytes,
    matmul_params,
    roofline_ms,
    step_flops,
    weight_bytes,
)
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec, SystemRow
from nanobench.decode.spec import DecodeSpec
from nanobench.harness.runs.env_record import read_env
from nanobench.harness.workers.rounds import Window
from tests.helpers import TINY_GQA, TINY_MHA, assert_close_rounding, write_model

runner = CliRunner()


def decode(tmp_path: Path, *args: str):
    result = runner.invoke(
        app,
        [
            "decode",
            "--threads",
            "1",
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
    return {r["system"]: r for r in doc["rows"]}, doc, result.exit_code


# -- arithmetic and gates, no workers ---------------------------------------------------------


def test_weight_bytes_count_a_tied_head_once_and_skip_an_untied_embedding():
    tiny = PRESETS["tiny"].config
    assert tiny.tie_word_embeddings
    assert weight_bytes(tiny, 4) == tiny.num_params * 4
    untied = TINY_MHA
    assert (
        weight_bytes(untied, 2) == (untied.num_params - untied.vocab_size * untied.hidden_size) * 2
    )


def test_kv_bytes_are_the_mean_context_over_the_decode_steps():
    c = TINY_GQA
    per_token = 2 * c.num_layers * c.kv_size * 4
    # decode steps 1..3 attend over 11, 12, 13 tokens: mean 12
    assert kv_read_bytes(c, 4, rows=2, prompt_len=10, steps=4) == 2 * 12 * per_token
    assert kv_read_bytes(c, 4, rows=2, prompt_len=10, steps=1) == 0
    assert floor_ms(10_000_000, 10.0) == pytest.approx(1.0)


def test_the_roofline_floor_is_the_larger_bound_and_says_which():
    c = TINY_GQA
    h, q, kv, i = c.hidden_size, c.q_size, c.kv_size, c.intermediate_size
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i  # q, k, v, o, gate, up, down
    assert matmul_params(c) == c.num_layers * per_layer + c.vocab_size * h
    # 2 flops per weight per row; attention: scores and values, 2 * 2 * ctx * q_size per layer
    # per row, mean context 10 + 4 / 2 = 12 over decode steps 1..3
    assert step_flops(c, 2, 10, 4) == 2 * 2 * matmul_params(c) + 4 * 2 * 12 * q * c.num_layers
    # 10 MB at 10 GB/s is 1 ms; 20 MFLOP at 10 GFLOP/s is 2 ms: compute-bound at 2 ms
    assert roofline_ms(10_000_000, 10.0, 20_000_000, 10.0) == (pytest.approx(2.0), "compute")
    assert roofline_ms(10_000_000, 10.0, 5_000_000, 10.0) == (pytest.approx(1.0), "memory")
    assert roofline_ms(10_000_000, None, 0, None) == (None, None)


# per-round window medians (ms): five rounds, the same every round, so every interval is a point
STEADY_MS = {
    "engine-eager": 4.0,
    "hf-eager": 5.0,
    "engine-compiled": 3.0,
    "hf-static-compiled": 4.0,
}


def run_spec(**kw) -> RunSpec:
    """A worker's spec for derive: the shape given, the rest any valid value."""
    base = dict(
        model="x",
        rows=2,
        prompt_len=16,
        steps=2,
        max_model_len=18,
        width_multiple=128,
        device="cpu",
        dtype="float32",
        threads=0,
        backend="inductor",
        hf_attn="sdpa",
        weight_bytes=1,
        kv_bytes=1,
        step_flops=0,
    )
    return RunSpec(**{**base, **kw})


def fake_rows(hf_tokens):
    base = {"status": "ok", "deterministic": True, "builds_measured": 0}
    same = [[1, 2], [3, 4]]
    return [
        SystemRow(**base, system="engine-eager", tokens=same),
        SystemRow(**base, system="hf-eager", tokens=hf_tokens),
        SystemRow(**base, system="engine-compiled", compile_s=1.0, tokens=same),
        SystemRow(**base, system="hf-static-compiled", compile_s=2.0, tokens=same),
    ]


def gates_at(targets: DecodeTargets, rows, monkeypatch) -> dict:
    """The command's gates for a model whose targets are `targets`."""
    monkeypatch.setitem(TARGETS, "held-to-these", targets)
    return {g.name: g for g in gates(DecodeSpec(model="held-to-these"), rows)}


def fake_windows(ms_by_round: dict[str, list[float]]) -> list[Window]:
    """Windows whose median in round r is ms_by_round[system][r - 1] (three equal steps)."""
    return [
        Window(system, r + 1, "ok", (ms, ms, ms), (0, 0, 0), (True,) * 3)
        for system, values in ms_by_round.items()
        for r, ms in enumerate(values)
    ]


def test_derive_sets_ratio_intervals_the_roofline_and_names_the_first_mismatch(monkeypatch):
    spec = run_spec(weight_bytes=8_000_000, kv_bytes=2_000_000)
    # The probe's rounds: 10 MB at 10 GB/s, a 1.0 ms floor each round (its rates say memory).
    windows = fake_windows({**{s: [ms] * 5 for s, ms in STEADY_MS.items()}, PROBE: [1.0] * 5})
    probe = ProbeRow("ok", bandwidth_gbs=10.0, gemm_gflops=1.0)
    rows = derive(fake_rows([[1, 2], [3, 9]]), spec, probe, windows)
    by = {r.system: r for r in rows}
    assert by["engine-eager"].ms_per_step == 4.0 and by["engine-eager"].rounds == 5
    assert by["engine-eager"].ms_iqr == 0.0
    assert (
        by["engine-eager"].ratio_vs_hf_eager_low,
        by["engine-eager"].ratio_vs_hf_eager,
    ) == (
        0.8,
        0.8,
    )
    assert by["engine-compiled"].ratio_vs_hf_compiled_high == 0.75
    assert by["engine-eager"].floor_ms == pytest.approx(1.0)
    assert by["engine-eager"].floor_bound == "memory"
    assert by["engine-eager"].ratio_vs_floor == pytest.approx(4.0)
    assert by["engine-compiled"].tokens_match is True
    assert by["hf-eager"].tokens_match is False
    assert by["hf-eager"].first_mismatch == "row 1 step 1: 9 vs 4"
    every = DecodeTargets(compiled_vs_hf_compiled=0.7, best_vs_floor=1.5)
    found = gates_at(every, rows, monkeypatch)
    assert not found["tokens_match[hf-eager]"].passed
    assert found["engine_eager_vs_hf_eager"].verdict == "pass"
    # 3.0 / 4.0 = 0.75 every round misses the 0.7 target with its whole interval
    compiled = found["engine_compiled_vs_hf_compiled"]
    assert compiled.verdict == "fail" and "0.75x" in compiled.detail
    assert (compiled.estimate, compiled.ci_low, compiled.ci_high, compiled.target) == (
        0.75,
        0.75,
        0.75,
        0.7,
    )
    assert found["nothing_built_while_timed[engine-compiled]"].passed
    # a compiled row whose worker did not say what it built while timed fails, never passes
    unsaid = [replace(fake_rows([[1, 2], [3, 4]])[2], builds_measured=None)]
    unsaid_gates = gates_at(every, derive(unsaid, spec, probe, windows), monkeypatch)
    assert not unsaid_gates["nothing_built_while_timed[engine-compiled]"].passed
    # the best engine mode is engine-compiled at 3.0 ms: 3.0x a 1.0 ms floor misses 1.5x
    floor = found["best_engine_vs_floor"]
    assert floor.verdict == "fail" and "engine-compiled" in floor.detail and "3.00x" in floor.detail
    # a GEMM rate that makes the step's 20 MFLOP take 2 ms: compute-bound, 3.0 / 2.0 = 1.5x
    slow_gemm = replace(probe, gemm_gflops=10.0)
    slow_windows = [w for w in windows if w.system != PROBE] + fake_windows({PROBE: [2.0] * 5})
    fast = derive(
        fake_rows([[1, 2], [3, 4]]), replace(spec, step_flops=20_000_000), slow_gemm, slow_windows
    )
    assert {r.floor_bound for r in fast} == {"compute"}
    assert gates_at(every, fast, monkeypatch)["best_engine_vs_floor"].passed
    # each model is held to its own targets: tiny to compiling's gain, the 1B shape to the floor
    tiny = {g.name for g in gates(DecodeSpec(model="tiny"), rows)}
    big = {g.name for g in gates(DecodeSpec(model="llama-3.2-1b"), rows)}
    assert "engine_compiled_vs_hf_compiled" in tiny and "best_engine_vs_floor" not in tiny
    assert "best_engine_vs_floor" in big and "engine_compiled_vs_hf_compiled" not in big
    assert "engine_eager_vs_hf_eager" in tiny & big
    assert targets_for("/some/dir", 5 << 30).best_vs_floor == 1.5
    assert targets_for("/some/dir", 5 << 20).compiled_vs_hf_compiled == 0.7


def test_a_ratio_whose_interval_straddles_its_target_cannot_tell(monkeypatch):
    spec = run_spec()
    # engine-eager / hf-eager per round: 0.9, 1.1, 0.95, 1.05, 1.0: around the 1.0 target
    windows = fake_windows({"engine-eager": [9.0, 11.0, 9.5, 10.5, 10.0], "hf-eager": [10.0] * 5})
    rows = derive(fake_rows([[1, 2], [3, 4]])[:2], spec, None, windows)
    gate = gates_at(DecodeTargets(), rows, monkeypatch)["engine_eager_vs_hf_eager"]
    assert gate.verdict == "inconclusive" and not gate.passed
    assert gate.ci_low < 1.0 < gate.ci_high and "can't tell" in gate.detail
    # fewer rounds than an interval needs: an estimate, never a pass
    short = derive(
        fake_rows([[1, 2], [3, 4]])[:2],
        spec,
        None,
        fake_windows({"engine-eager": [5.0] * 4, "hf-eager": [10.0] * 4}),
    )
    gate = gates_at(DecodeTargets(), short, monkeypatch)["engine_eager_vs_hf_eager"]
    assert gate.verdict == "inconclusive" and gate.estimate == 0.5


def test_processes_that_disagree_say_more_processes_not_more_rounds(monkeypatch):
    """engine-eager / hf-eager is 0.8 in one worker process and 1.2 in the other (rounds
    alternate between them, 1% jitter within each): the rows carry what the interval over the
    processes says, and the gate names more --processes. Two runs of decode on this box said
    'about 6901 more rounds' and 'about 573 more rounds' of such a gate."""
    jitter = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99, 1.005, 0.995]
    windows = [
        Window(system, r + 1, "ok", (ms,) * 3, (0,) * 3, (True,) * 3, process=r % 2 + 1)
        for r, j in enumerate(jitter)
        for system, ms in (("engine-eager", 10.0 * j * (0.8, 1.2)[r % 2]), ("hf-eager", 10.0))
    ]
    rows = derive(fake_rows([[1, 2], [3, 4]])[:2], run_spec(), None, windows)
    eager = next(r for r in rows if r.system == "engine-eager")
    assert eager.processes == 2 and eager.ratio_vs_hf_eager_within_share < 0.01
    gate = gates_at(DecodeTargets(), rows, monkeypatch)["engine_eager_vs_hf_eager"]
    assert gate.verdict == "inconclusive"
    assert "more --processes would narrow it" in gate.detail, gate.detail
    # one process, the same spread of rounds: rounds are the whole story
    alone = [replace(w, process=1) for w in windows]
    rows = derive(fake_rows([[1, 2], [3, 4]])[:2], run_spec(), None, alone)
    assert next(r for r in rows if r.system == "engine-eager").ratio_vs_hf_eager_within_share == 1


def fake_sweep(ms_by_round: dict[str, list[float]], hf_tokens):
    import nanobench.decode.bench as bench

    def sweep(runs, members, plan, **kw):
        systems = [m.name for m in members if m.name != bench.PROBE]
        listener = kw["listener"]
        listener.on_row(ProbeRow("ok", bench.PROBE, bandwidth_gbs=10.0, gemm_gflops=1e3))
        for row in (r for r in fake_rows(hf_tokens) if r.system in systems):
            listener.on_row(row)
        for w in fake_windows({s: ms_by_round[s] for s in systems}):
            listener.on_window(w)

    return sweep


def test_a_token_mismatch_fails_the_command_without_check(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench

    steady = {s: [ms] * 5 for s, ms in STEADY_MS.items()}
    monkeypatch.setattr(bench, "sweep_sides", fake_sweep(steady, [[1, 2], [3, 9]]))
    result = runner.invoke(
        app, ["decode", "--systems", "engine-eager,hf-eager", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1, result.output
    assert "NO" in result.stdout and "row 1 step 1: 9 vs 4" in result.stdout
    frame = pd.read_csv(tmp_path / "decode.csv")
    assert list(frame["tokens_match"]) == [True, False]
    assert "tokens" not in frame.columns


def test_check_exits_3_when_nothing_fails_but_a_ratio_cannot_tell(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench

    around = {"engine-eager": [9.0, 11.0, 9.5, 10.5, 10.0], "hf-eager": [10.0] * 5}
    monkeypatch.setattr(bench, "sweep_sides", fake_sweep(around, [[1, 2], [3, 4]]))
    args = ["decode", "--systems", "engine-eager,hf-eager", "--out", str(tmp_path), "--json"]
    result = runner.invoke(app, [*args, "--check"])
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    gate = {g["name"]: g for g in doc["gates"]}["engine_eager_vs_hf_eager"]
    assert gate["verdict"] == "inconclusive" and gate["passed"] is False
    assert gate["ci_low"] < gate["target"] == 1.0 < gate["ci_high"]
    assert doc["env"]["schema_version"] == 3 and doc["env"]["argv"]
    assert json.loads((tmp_path / "decode-env.json").read_text()) == doc["env"]
    assert asdict(read_env(tmp_path / "decode-env.json")) == doc["env"], "it rebuilds from JSON"
    samples = pd.read_csv(doc["outputs"]["samples"])
    assert len(samples) == 2 * 5 * 3 and set(samples["system"]) == {"engine-eager", "hf-eager"}
    assert runner.invoke(app, args).exit_code == 0, "without --check an inconclusive gate is 0"
    clear = {"engine-eager": [8.0] * 5, "hf-eager": [10.0] * 5}
    monkeypatch.setattr(bench, "sweep_sides", fake_sweep(clear, [[1, 2], [3, 4]]))
    assert runner.invoke(app, [*args, "--check"]).exit_code == 0


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path):
    from engine.weights import synthesize_weights
    from tests.helpers import write_sharded

    unloadable = write_model(tmp_path / "unloadable", TINY_MHA)
    cfg = json.loads((unloadable / "config.json").read_text())
    cfg["model_type"] = "not-a-transformers-model"
    (unloadable / "config.json").write_text(json.dumps(cfg))
    a_file = tmp_path / "weights.txt"
    a_file.write_text("x")
    # The engine loads shards from an index without `metadata`; transformers cannot.
    no_metadata = tmp_path / "sharded"
    write_sharded(no_metadata, TINY_MHA, synthesize_weights(TINY_MHA, 0, torch.float32))
    index = json.loads((no_metadata / "model.safetensors.index.json").read_text())
    del index["metadata"]
    (no_metadata / "model.safetensors.index.json").write_text(json.dumps(index))
    out = tmp_path / "o"
    for args, needle in (
        (["--systems", "engine-eager,fast"], "--systems"),
        (["--systems", "hf-eager,hf-eager"], "--systems"),
        (["--rows", "0"], "--rows"),
        (["--steps", "-1"], "--steps"),
        (["--steps", "1"], "--steps"),
        (["--rounds", "0"], "--rounds"),
        (["--rounds", "5", "--max-rounds", "4"], "--max-rounds"),
        (["--rel-ci", "1.5"], "--rel-ci"),
        (["--budget-s", "0"], "--budget-s"),
        (["--prompt-len", "0"], "--prompt-len"),
        (["--threads", "-2"], "--threads"),
        (["--dtype", "int8"], "--dtype"),
        (["--device", "tpu"], "--device"),
        (["--prompt-len", "16", "--steps", "20", "--max-model-len", "30"], "--max-model-len"),
        (["--steps", "131072"], "max_position_embeddings"),
        (["--model", str(tmp_path / "nope")], "--model"),
        (["--model", str(unloadable)], "transformers cannot load"),
        (["--model", str(no_metadata)], "transformers cannot read model.safetensors.index.json"),
        (["--model", str(a_file)], "is a file"),
        (["--out", str(a_file / "sub")], "--out"),
    ):
        result = runner.invoke(app, ["decode", "--out", str(out), *args])
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, result.stderr)
        assert "Traceback" not in result.output
        assert not out.exists(), f"{args}: nothing may be written for bad input"


# -- the engine changes this command's targets asked for ----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_engines_reference_read_is_the_oracles_math(dtype):
    from types import SimpleNamespace

    from engine.attention import reference_read
    from kernels.reference import paged_attention_batched_reference

    g = torch.Generator().manual_seed(0)
    for B, H, Hkv, D, W in [(4, 8, 4, 32, 40), (3, 6, 2, 32, 17), (2, 4, 4, 16, 5)]:
        k_pool = torch.randn(64, Hkv, D, generator=g).to(dtype)
        v_pool = torch.randn(64, Hkv, D, generator=g).to(dtype)
        q = torch.randn(B, H, D, generator=g).to(dtype)
        mapping = torch.randint(0, 64, (B, W), generator=g)
        lens = torch.randint(1, W + 1, (B,), generator=g)
        lens[-1] = 0  # a padded row: every column masked, uniform weights, never NaN
        want = paged_attention_batched_reference(q, k_pool, v_pool, mapping, lens, validated=True)
        got = reference_read(
            q, k_pool, v_pool, SimpleNamespace(slot_mapping=mapping, context_lens=lens)
        )
        assert torch.isfinite(got).all()
        # bmm over grouped heads against matmul after repeat_interleave: other kernels. Each
        # output is D products for the score, then W for the weighted sum, and in bf16 every
        # stored intermediate rounds too: the rounding tolerance of D + W additions.
        assert_close_rounding(got, want, D + W, f"{dtype} B={B} W={W}")


def test_fused_projection_weights_stay_the_checkpoints_through_load_and_dtype_changes():
    from engine.engine import Engine
    from engine.model import Llama
    from engine.sources import materialize_preset
    from engine.weights import load_checkpoint

    config, tensors = load_checkpoint(materialize_preset("tiny"))
    name = "model.layers.1.self_attn.k_proj.weight"
    for engine in (
        Engine.from_checkpoint("tiny"),
        Engine.from_checkpoint("tiny", dtype="bfloat16"),
    ):
        attn = engine.model.model.layers[1].self_attn
        qkv = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]
        assert attn._is_fused("qkv_weight", qkv)
        torch.testing.assert_close(attn.k_proj.weight, tensors[name].to(attn.k_proj.weight.dtype))
        assert name in engine.model.state_dict() and "qkv_weight" not in str(
            list(engine.model.state_dict())
        )
    model = Llama(config, 32)
    model.load_state_dict(tensors, strict=False, assign=True)  # replaces the parameters
    mlp = model.model.layers[0].mlp
    assert mlp._is_fused("gate_up_weight", [mlp.gate_proj.weight, mlp.up_proj.weight])
    assert torch.equal(mlp.gate_up_weight[config.intermediate_size :], mlp.up_proj.weight)


# -- real workers -------------------------------------------------------------------------------


@pytest.mark.slow
def test_tiny_engine_and_transformers_agree_and_every_column_is_written(tmp_path):
    rows, doc, code = decode(
        tmp_path,
        "--systems",
        "engine-eager,engine-captured,hf-eager",
        "--steps",
        "8",
        "--width-multiple",
        "8",
    )
    assert set(rows) == {"engine-eager", "engine-captured", "hf-eager"}
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r["status"])
        assert r["tokens_match"] is True, (name, r["first_mismatch"])
        assert r["tokens_ref"] == "engine-eager"
        assert r["ms_per_step"] > 0 and r["prefill_ms"] > 0 and r["tokens_per_s"] > 0
        assert r["floor_ms"] > 0 and r["ratio_vs_floor"] > 0 and r["floor_bound"]
        assert r["rounds"] == 1 and r["ms_q1"] <= r["ms_per_step"] <= r["ms_q3"]
        assert r["ratio_vs_hf_eager"] > 0 and r["ratio_vs_hf_compiled"] is None
        assert r["peak_rss_mb"] > 0 and r["threads"] == 1
        assert "tokens" not in r
    assert rows["hf-eager"]["ratio_vs_hf_eager"] == 1.0
    assert rows["engine-captured"]["recorded_mid_run"] == 0
    assert rows["engine-captured"]["capture_s"] > 0
    frame = pd.read_csv(doc["outputs"]["csv"])
    assert list(frame["system"]) == ["engine-eager", "engine-captured", "hf-eager"]
    # every field of the row but the token lists (their digest is written) is a column, in order
    assert list(frame.columns) == [f.name for f in fields(DecodeRow) if f.name != "tokens"]
    assert Path(doc["outputs"]["png"]).stat().st_size > 10_000
    gates = {g["name"]: g["passed"] for g in doc["gates"]}
    assert all(gates[f"tokens_match[{s}]"] for s in rows)
    assert "engine_eager_vs_hf_eager" in gates


@pytest.mark.slow
def test_a_second_config_untied_without_rope_scaling_matches_too(tmp_path):
    directory = write_model(tmp_path / "mha", TINY_MHA)
    rows, _, _ = decode(
        tmp_path / "out",
        "--model",
        str(directory),
        "--systems",
        "engine-eager,hf-eager",
        "--hf-attn",
        "eager",
        "--rows",
        "3",
        "--prompt-len",
        "9",
        "--steps",
        "12",
    )
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r["status"])
        assert r["tokens_match"] is True, (name, r["first_mismatch"])
    assert rows["hf-eager"]["attention"] == "eager"
    assert rows["engine-eager"]["weight_bytes"] == weight_bytes(TINY_MHA, 4)


@pytest.mark.slow
def test_compiled_systems_report_compile_apart_from_their_steps(tmp_path):
    # Dynamo with its eager backend: the same warm-up, guards and counters, no Inductor codegen.
    rows, doc, _ = decode(
        tmp_path,
        "--systems",
        "engine-eager,engine-compiled,hf-static-compiled",
        "--backend",
        "eager",
        "--steps",
        "6",
    )
    for name in ("engine-compiled", "hf-static-compiled"):
        r = rows[name]
        assert r["status"] == "ok", (name, r["status"])
        assert r["tokens_match"] is True, (name, r["first_mismatch"])
        assert r["compile_s"] > 0 and r["frames_compiled"] >= 1
        assert r["builds_measured"] == 0, "the warm-up must reach every shape"
    assert rows["engine-eager"]["compile_s"] is None
    gates = {g["name"]: g for g in doc["gates"]}
    assert gates["nothing_built_while_timed[hf-static-compiled]"]["passed"]
    assert "engine_compiled_vs_hf_compiled" in gates
    assert rows["engine-compiled"]["ratio_vs_hf_compiled"] > 0


@pytest.mark.slow
def test_a_field_renamed_in_a_real_workers_payload_fails_the_parent_naming_it(
    tmp_path, monkeypatch
):
    import nanobench.decode.bench as bench
    from nanobench.harness.runs.rows import RowSchemaError

    monkeypatch.setattr(bench, "WORKER", "tests.renaming_decode_worker")
    result = runner.invoke(
        app,
        [
            "decode",
            *("--systems", "engine-eager", "--rows", "1", "--prompt-len", "4", "--steps", "2"),
            *("--threads", "1", "--rounds", "1", "--max-rounds", "1", "--out", str(tmp_path)),
        ],
    )
    assert isinstance(result.exception, RowSchemaError), result.output
    assert "SystemRow" in str(result.exception) and "'builds_timed'" in str(result.exception)
    assert result.exit_code not in (0, 2)


def test_the_figure_draws_a_single_step_row_whose_rounded_rate_sits_above_its_quartile(tmp_path):
    from nanobench.decode.rows import DecodeRow
    from reports.decode import draw_decode

    # One decode step a round: q1 = median = q3 = 0.1235 ms; 1000 / 0.1235 = 8097.1659... tok/s,
    # stored rounded to 8097.17, a hair above the quartile's own rate.
    ms = 0.1235
    row = DecodeRow(
        "engine-eager", "ok", ms_per_step=ms, ms_q1=ms, ms_q3=ms, rows=1, tokens_per_s=8097.17
    )
    assert 8097.17 > 1e3 / ms
    path = draw_decode([row], tmp_path / "decode.png", "decode: tiny, cpu float32")
    assert path.stat().st_size > 0


def test_a_system_over_two_processes_keeps_the_first_row_and_every_workers_builds():
    from nanobench.decode.bench import closed_row
    from nanobench.decode.rows import SystemRow

    ready = SystemRow("engine-compiled", "ok", compile_s=3.0)
    first = {"status": "ok", "builds_measured": 0, "deterministic": True, "tokens": [[1, 2]]}
    second = {**first, "builds_measured": 2, "compile_s": 0.5}
    got = closed_row(ready, [first, second])
    # compile seconds are the first worker's; the second's two frames built while timed count
    assert got.compile_s == 3.0 and got.builds_measured == 0 + 2 and got.deterministic
    # a second worker that made other tokens: not deterministic across processes
    other = closed_row(ready, [first, {**first, "tokens": [[1, 3]]}])
    assert other.deterministic is False and other.tokens == [[1, 2]]
    # a second worker that died names its process
    dead = closed_row(ready, [first, {"status": "timeout"}])
    assert dead.status == "process 2: timeout"


def test_a_step_below_its_floor_fails_the_probe_on_every_row_and_the_floor_gate_cannot_tell(
    monkeypatch,
):
    # 10 MB a step at 2 GB/s: a 5 ms floor; engine-eager ran 4.0 ms, engine-compiled 3.0
    spec = run_spec(weight_bytes=8_000_000, kv_bytes=2_000_000)
    windows = fake_windows({s: [ms] * 5 for s, ms in STEADY_MS.items()})
    slow_probe = ProbeRow("ok", bandwidth_gbs=2.0, gemm_gflops=1e6)
    rows = derive(fake_rows([[1, 2], [3, 4]]), spec, slow_probe, windows)
    assert [r.floor_ms for r in rows] == [pytest.approx(5.0)] * len(rows)
    assert len({r.floor_probe for r in rows}) == 1
    assert rows[0].floor_probe.startswith("failed: engine-eager ran 4.000 ms/step, below the 5.000")
    every = DecodeTargets(best_vs_floor=1.5)
    floor = gates_at(every, rows, monkeypatch)["best_engine_vs_floor"]
    # 3.0 / 5.0 = 0.6x would "pass" a 1.5x target on a floor that is not one
    assert floor.verdict == "inconclusive" and "probe failed" in floor.detail
    # at 20 GB/s the floor is 0.5 ms, under every step: the probe holds
    fine = derive(
        fake_rows([[1, 2], [3, 4]]), spec, replace(slow_probe, bandwidth_gbs=20.0), windows
    )
    assert {r.floor_probe for r in fine} == {"ok"}


def test_the_gemm_probe_is_a_large_square_product_not_the_steps_own():
    from nanobench.decode.roofline import probe_gemm

    got = probe_gemm(run_spec(rows=1))
    # 1024 x 1024 by 1024 x 1024: 2 n^3 flops a pass, whatever the model's shapes
    assert got["gemm_side"] == 1024 and got["gemm_flops"] == 2 * 1024**3
    assert got["gemm_gflops"] > 0 and got["gemm_ms"] > 0


def test_export_json_writes_one_oss_benchmark_record_per_measured_metric(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench

    clear = {"engine-eager": [8.0, 8.2, 7.9, 8.1, 8.0], "hf-eager": [10.0, 10.1, 9.9, 10.2, 10.0]}
    monkeypatch.setattr(bench, "sweep_sides", fake_sweep(clear, [[1, 2], [3, 4]]))
    records = tmp_path / "records.json"
    args = ["decode", "--systems", "engine-eager,hf-eager", "--out", str(tmp_path), "--json",
            "--export-json", str(records)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    found = json.loads(records.read_text())
    by = {(r["model"]["backend"], r["metric"]["name"]): r for r in found}
    for row in doc["rows"]:
        step = by[(row["system"], "step_latency_ms")]
        assert step["metric"]["benchmark_values"] == [row["ms_per_step"]]
        assert step["benchmark"]["extra_info"]["system"] == row["system"]
        assert step["benchmark"]["name"] == "nanobench decode"
        assert by[(row["system"], "tokens_per_second")]["metric"]["benchmark_values"] == [
            row["tokens_per_s"]]  # fmt: skip
    ratio = by[("engine-eager", "ratio_vs_hf_eager")]["metric"]
    engine = next(r for r in doc["rows"] if r["system"] == "engine-eager")
    assert (ratio["extra_info"]["low"], ratio["extra_info"]["high"]) == (
        engine["ratio_vs_hf_eager_low"], engine["ratio_vs_hf_eager_high"])  # fmt: skip
    assert doc["outputs"]["export_json"] == str(records)


def test_the_gemm_probes_side_shrinks_for_a_dtype_the_cpu_only_emulates():
    from nanobench.decode.roofline import gemm_side

    # seconds a multiply as this box measured them: float32 0.03 s at 1024, bfloat16 2.2 s
    float32, bfloat16 = (lambda n: 0.03 * (n / 1024) ** 3), (lambda n: 2.2 * (n / 1024) ** 3)
    assert gemm_side(float32, 1024) == 1024  # 512's 3.8 ms foretells 30 ms at 1024
    assert gemm_side(bfloat16, 1024) == 256  # 256's 34 ms foretells 275 ms at 512: past 250
    assert gemm_side(bfloat16, 64) == 64  # never past the largest side
    assert gemm_side(lambda n: 1.0, 4096) == 128  # one slow multiply: the first side stays
