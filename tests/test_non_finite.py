"""Nothing non-finite is measured as healthy: NaN/Inf weights are refused at load, by name, and
logits that turn non-finite at any step fail that system's row in decode, compile and capture.

Argmax over NaN logits agrees with itself, so "tokens match" cannot catch either case: these
tests are what does.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from engine.weights import CheckpointError, load_checkpoint
from nanobench.cli import app
from nanobench.harness.workers.finite import FiniteWatch, NonFiniteLogits
from tests.helpers import TINY_MHA, write_model

BROKEN = "model.layers.1.mlp.down_proj.weight"


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "220"})


def rewrite(directory, name: str, edit) -> None:
    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    tensors[name] = edit(tensors[name].clone())
    save_file(tensors, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module", params=["nan", "inf"])
def poisoned(request, tmp_path_factory):
    directory = write_model(tmp_path_factory.mktemp(f"poisoned-{request.param}"), TINY_MHA)

    def poison(t):
        t[3, 5] = float(request.param)
        return t

    rewrite(directory, BROKEN, poison)
    return directory


@pytest.fixture(scope="module")
def overflowing(tmp_path_factory):
    """Finite weights whose forward overflows: a final-norm weight of 3e38 (fp32's max is
    3.4e38) sends every normed entry past 1.13 to inf, and the head's sum of +inf and -inf
    terms is NaN, whatever the attention implementation. Only a logit check sees it. (Scores
    overflowing inside attention do not do: transformers' sdpa path stays finite there.)"""
    directory = write_model(tmp_path_factory.mktemp("overflow"), TINY_MHA)
    rewrite(directory, "model.norm.weight", lambda t: torch.full_like(t, 3e38))
    return directory


def test_load_names_the_non_finite_tensor(poisoned):
    with pytest.raises(CheckpointError, match=BROKEN.replace(".", r"\.") + ".*non-finite"):
        load_checkpoint(poisoned)


@pytest.mark.parametrize("command", ["decode", "compile", "capture", "explain"])
def test_commands_refuse_non_finite_weights_before_measuring(command, poisoned, tmp_path):
    out = tmp_path / "out"
    outputs = [] if command == "explain" else ["--out", str(out)]  # explain writes no files
    result = invoke([command, "--model", str(poisoned), *outputs])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and BROKEN in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (out / f"{command}.csv").exists()


def test_the_overflowing_checkpoint_passes_the_load_check(overflowing):
    config, tensors = load_checkpoint(overflowing)
    assert all(bool(torch.isfinite(t).all()) for t in tensors.values())


def test_finite_watch_names_the_first_bad_step():
    watch = FiniteWatch()
    for step in range(5):
        logits = torch.randn(2, 7)  # (B, V)
        if step >= 3:
            logits[1, step] = float("nan") if step == 3 else float("inf")
        watch.see(logits)
    with pytest.raises(NonFiniteLogits, match="non-finite logits at step 3$"):
        watch.check()


def test_decode_fails_a_system_whose_logits_go_non_finite(overflowing, tmp_path):
    result = invoke(
        ["decode", "--model", str(overflowing), "--systems", "engine-eager,hf-eager",
         "--rows", "2", "--prompt-len", "4", "--steps", "3", "--rounds", "1", "--threads", "1",
         "--json", "--out", str(tmp_path)]
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    systems = {r["system"]: r for r in doc["rows"] if "system" in r}
    for name in ("engine-eager", "hf-eager"):
        assert systems[name]["status"] == "error: non-finite logits at step 0", systems[name]
    failed = {g["name"] for g in doc["gates"] if not g["passed"]}
    assert {"measured[engine-eager]", "measured[hf-eager]"} <= failed


def test_compile_fails_a_mode_whose_logits_go_non_finite(overflowing, tmp_path):
    result = invoke(
        ["compile", "--model", str(overflowing), "--modes", "off", "--rows", "2",
         "--prompt-len", "4", "--steps", "3", "--threads", "1", "--json", "--out", str(tmp_path)]
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert row["status"] == "error: non-finite logits at step 0", row


def test_capture_fails_a_run_whose_logits_go_non_finite(overflowing, tmp_path):
    result = invoke(
        ["capture", "--model", str(overflowing), "--rows", "2", "--prompt-len", "4",
         "--run-lengths", "2", "--json", "--out", str(tmp_path)]
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    runs = [r for r in doc["rows"] if r["table"] == "run"]
    assert runs and all(
        r["status"] == "error: non-finite logits at step 1 (eager)" for r in runs
    ), runs
    assert any(g["name"].startswith("measured[") and not g["passed"] for g in doc["gates"])
