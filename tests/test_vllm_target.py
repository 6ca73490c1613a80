"""`--target vllm`: vLLM's own modes, its refusals, and its step against transformers.

The refusals that need no vLLM run everywhere; the ones that run vLLM's engine need the
environment `make vllm` builds (.venv-vllm) and skip with that reason where it is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.spec import CompileSpec

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
needs_vllm = pytest.mark.skipif(
    not VLLM_PYTHON.exists(), reason="no .venv-vllm: `make vllm` builds vLLM's environment"
)
FAST = ["--steps", "3", "--rounds", "3", "--max-rounds", "3", "--processes", "1"]


def refused(args: list[str], out) -> str:
    result = runner.invoke(app, ["compile", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    # the estimate and a busy machine's warning may come first: the error is one line of its own
    errors = [x for x in result.stderr.splitlines() if x.startswith("nanobench: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


@pytest.mark.parametrize(
    "args, said",
    [
        (["--target", "vllm", "--modes", "off,dynamic"],
         "--modes dynamic: --target vllm compiles itself; its modes are off, "
         "stock-torch-compile, dynamo-trace-once, evaluate-guards"),
        (["--modes", "off,dynamo-trace-once"],
         "--modes dynamo-trace-once: a mode of --target vllm, which compiles itself"),
        (["--target", "hf-static", "--modes", "stock-torch-compile"],
         "--modes stock-torch-compile: a mode of --target vllm"),
        (["--target", "vllm", "--try", "freezing"],
         "--try with --target vllm: it compiles itself"),
    ],
)  # fmt: skip
def test_modes_that_belong_to_another_step_are_refused_before_any_worker(args, said, tmp_path):
    assert said in refused(args, tmp_path)


def test_the_vllm_target_defaults_to_its_own_modes_and_keeps_a_choice():
    # --python: the workers' interpreter, checked for vLLM by its worker, not here
    assert CompileSpec(target="vllm", python=sys.executable).validate().modes == (
        "off", "stock-torch-compile", "dynamo-trace-once", "evaluate-guards")  # fmt: skip
    chosen = CompileSpec(
        target="vllm", modes=("off", "dynamo-trace-once"), python=sys.executable
    ).validate()
    assert chosen.modes == ("off", "dynamo-trace-once")
    assert CompileSpec().validate().modes == ("off", "dynamic", "static")


def test_an_interpreter_without_vllm_is_told_how_to_get_it(tmp_path):
    line = refused(["--target", "vllm", "--python", sys.executable, *FAST], tmp_path)
    assert f"{sys.executable} has no vLLM" in line
    assert "run `make vllm`, then .venv-vllm/bin/nanobench (or pass --python" in line


@pytest.mark.parametrize(
    "args, what",
    [
        (["compile", "--target", "vllm"], "--target vllm"),
        (["startup", "--target", "vllm"], "--target vllm"),
        (["decode", "--systems", "hf-eager,vllm-eager"], "--systems vllm-eager"),
    ],
)
def test_vllm_asked_of_an_interpreter_without_it_is_refused_before_any_worker(args, what, tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter has vLLM")
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"nanobench: error: {what}: {sys.executable} has no vLLM: run `make vllm`, then "
        ".venv-vllm/bin/nanobench (or pass --python .venv-vllm/bin/python)"
    ]
    assert not (tmp_path / "decode.csv").exists() and not (tmp_path / "compile.csv").exists()


@needs_vllm
def test_a_head_dim_vllm_cannot_attend_is_said_before_the_load(tmp_path):
    from tests.helpers import TINY_GQA, write_model

    # vLLM's CPU attention takes head dims of 32 and up
    model = write_model(tmp_path / "h16", replace(TINY_GQA, head_dim=16))
    line = refused(["--target", "vllm", "--model", str(model), "--python", str(VLLM_PYTHON),
                    *FAST], tmp_path)  # fmt: skip
    assert "head dim 16: vLLM's CPU attention takes 32, 64" in line


@needs_vllm
def test_a_kv_cache_asking_for_most_of_the_machine_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "100000")
    line = refused(["--target", "vllm", "--python", str(VLLM_PYTHON), *FAST], tmp_path)
    assert "VLLM_CPU_KVCACHE_SPACE=100000 GiB: more than half of the" in line


STEPS = """
import json, sys
from nanobench.harness.step.targets import inputs_at, make_target
t = make_target("vllm", model=sys.argv[1], mode=sys.argv[2], rows=int(sys.argv[3]), prompt_len=5,
                steps=6, device="cpu", dtype="float32")
windows = []
for _ in range(2):  # a window replays steps 0..5 from a fresh prefill
    windows.append([t.forward(*inputs_at(t, i)[0]).flatten().tolist() for i in range(6)])
found = [r.text() for r in t.findings()]
print("@@" + json.dumps({"windows": windows, "compile_s": t.compile_s, "findings": found}))
"""


def vllm_steps(model: str, mode: str, rows: int = 2) -> dict:
    done = subprocess.run([str(VLLM_PYTHON), "-c", STEPS, model, mode, str(rows)],
                          capture_output=True, text=True, timeout=600,
                          env=os.environ | {"OMP_NUM_THREADS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(x for x in done.stdout.splitlines() if x.startswith("@@"))[2:])


@needs_vllm
@pytest.mark.parametrize("mode", ["off", "dynamo-trace-once"])
def test_vllm_steps_are_transformers_greedy_tokens_in_every_window(mode):
    import torch
    from transformers import AutoModelForCausalLM

    from nanobench.harness.cli.validate import model_option

    model = str(model_option("tiny")[0])
    got = vllm_steps(model, mode)
    # The same seeded prompts the target draws, continued greedily by transformers: its peer.
    g = torch.Generator().manual_seed(0)
    vocab = json.loads((Path(model) / "config.json").read_text())["vocab_size"]
    prompts = torch.randint(0, vocab, (2, 5), generator=g)
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, local_files_only=True)
    out = hf.generate(prompts, max_new_tokens=7, do_sample=False, min_new_tokens=7)
    # step k samples each row's token k + 2: the prefill gave the first
    expected = out[:, 6:].T.tolist()  # (steps, B)
    assert got["windows"][0] == expected
    assert got["windows"][1] == expected
    assert (got["compile_s"] > 0) == (mode != "off")


@needs_vllm
def test_evaluated_guards_say_where_one_row_leaves_the_one_trace():
    # vLLM traces with a batch of tokens; a decode step of one row presents input_ids of size 1,
    # which fails the 0/1 specialisation trace-once drops: every step, not the prefill. Two rows
    # hold every guard.
    from nanobench.harness.cli.validate import model_option

    model = str(model_option("tiny")[0])
    one = vllm_steps(model, "evaluate-guards", rows=1)
    (said,) = one["findings"]
    assert said.startswith("specialised: dynamo-trace-once drops every guard"), said
    assert "2 <= input_ids.size()[0] failed at steps 0..5:" in said, said
    assert "vocab_parallel_embedding.py:" in said, said
    two = vllm_steps(model, "evaluate-guards", rows=2)
    (held,) = two["findings"]
    assert held.startswith("guards-held: ") and "held over the 6 steps" in held, held
    assert two["windows"][0] == two["windows"][1]


@needs_vllm
def test_compile_measures_vllms_modes_in_the_table_and_json(tmp_path):
    args = ["compile", "--target", "vllm", "--python", str(VLLM_PYTHON), "--modes",
            "off,dynamo-trace-once", "--out", str(tmp_path), *FAST]  # fmt: skip
    table = runner.invoke(app, args)
    assert table.exit_code in (0, 1), table.output
    assert "mode: dynamo-trace-once" in table.output and "compiled decode of target vllm" in (
        table.output
    )
    assert "--try" not in table.output  # no knob reaches vLLM's compile: none is suggested
    done = runner.invoke(app, [*args, "--json"])
    rows = {r["mode"]: r for r in json.loads(done.stdout)["rows"]}
    assert rows["off"]["status"] == rows["dynamo-trace-once"]["status"] == "ok"
    assert rows["off"]["compile_s"] == 0 and rows["dynamo-trace-once"]["compile_s"] > 0
    assert rows["dynamo-trace-once"]["step_ms"] > 0


EXPLAINED = """
import json, sys, torch
from nanobench.harness.step.targets import inputs_at, make_target
t = make_target("vllm", model=sys.argv[1], mode="off", rows=4, prompt_len=16, steps=2,
                device="cpu", dtype="float32")
# dynamo's own explain of vLLM's model forward, called where the runner calls it
out = t.explained(lambda fn, *a, **k: torch._dynamo.explain(fn)(*a, **k), *inputs_at(t, 0)[0])
print("@@" + json.dumps({"graphs": out.graph_count, "graph_breaks": out.graph_break_count,
                         "ops": out.op_count, "guards": len(out.out_guards)}))
"""


@needs_vllm
def test_explain_of_vllms_step_is_what_dynamo_explains_of_its_model_forward(tmp_path):
    from nanobench.harness.cli.validate import model_option

    model = str(model_option("tiny")[0])
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(VLLM_PYTHON), "-c", EXPLAINED, model], capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    dynamo = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("@@"))[2:])
    ours = subprocess.run([str(VLLM_PYTHON.parent / "nanobench"), "explain", "--target", "vllm",
                           "--json", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-3000:]
    row = json.loads(ours.stdout)["rows"][0]
    assert {k: row[k] for k in dynamo} == dynamo
    assert dynamo["ops"] > 50  # the whole model's forward, not the runner's wrapper


@needs_vllm
def test_decode_sets_vllm_beside_transformers_and_its_tokens_match(tmp_path):
    # the decode workers run under vLLM's interpreter, transformers' system among them
    result = runner.invoke(app, [
        "decode", "--python", str(VLLM_PYTHON), "--systems", "hf-eager,vllm-eager,vllm-compiled",
        "--steps", "6", "--threads", "1", "--rounds", "2", "--max-rounds", "2", "--out",
        str(tmp_path), "--json"])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    rows = {r["system"]: r for r in json.loads(result.stdout)["rows"]}
    for name in ("vllm-eager", "vllm-compiled"):
        r = rows[name]
        assert r["status"] == "ok", r["status"]
        assert r["tokens_ref"] == "hf-eager" and r["tokens_match"] is True, r["first_mismatch"]
        assert r["ms_per_step"] > 0 and r["ratio_vs_floor"] > 0 and r["vllm_version"] == "0.32.0"
    assert rows["vllm-eager"]["compile_s"] is None and rows["vllm-compiled"]["compile_s"] > 0
