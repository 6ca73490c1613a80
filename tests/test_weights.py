"""Checkpoint loading: safetensors only, and every broken directory named precisely."""

from __future__ import annotations

import json

import pytest
import torch

from engine.config import PRESETS, ConfigError, ModelConfig
from engine.sources import materialize_preset
from engine.weights import (
    CheckpointError,
    inspect_checkpoint,
    load_checkpoint,
    synthesize_weights,
    write_checkpoint,
)
from tests.helpers import TINY_MHA, write_model


@pytest.fixture
def good(tmp_path):
    return write_model(tmp_path / "ckpt", TINY_MHA)


def test_round_trip_config_and_tensors(good):
    config, tensors = load_checkpoint(good)
    assert config == TINY_MHA
    assert "lm_head.weight" in tensors  # untied
    assert inspect_checkpoint(good) == TINY_MHA


def test_config_round_trips_through_hf_json():
    for spec in PRESETS.values():
        assert ModelConfig.from_hf(spec.config.to_hf()) == spec.config


def test_preset_is_written_once_and_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("NANOBENCH_CACHE", str(tmp_path))
    first = materialize_preset("tiny")
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert materialize_preset("tiny") == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    a = synthesize_weights(PRESETS["tiny"].config, 0, torch.float32)
    _, b = load_checkpoint(first)
    assert torch.equal(
        a["model.layers.3.mlp.up_proj.weight"], b["model.layers.3.mlp.up_proj.weight"]
    )


def test_sharded_checkpoint_loads(tmp_path):
    from safetensors.torch import save_file

    tensors = synthesize_weights(TINY_MHA, 0, torch.float32)
    names = sorted(tensors)
    half = len(names) // 2
    d = tmp_path / "sharded"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY_MHA.to_hf()))
    save_file({k: tensors[k] for k in names[:half]}, str(d / "model-00001-of-00002.safetensors"))
    save_file({k: tensors[k] for k in names[half:]}, str(d / "model-00002-of-00002.safetensors"))
    weight_map = {
        k: f"model-0000{1 if i < half else 2}-of-00002.safetensors" for i, k in enumerate(names)
    }
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    config, loaded = load_checkpoint(d)
    assert config == TINY_MHA and len(loaded) == len(tensors)


def broken(tmp_path, good, case):
    d = tmp_path / case
    if case == "missing":
        return d
    if case == "file":
        d.write_text("x")
        return d
    import shutil

    shutil.copytree(good, d)
    cfg = json.loads((d / "config.json").read_text())
    if case == "no-config":
        (d / "config.json").unlink()
    elif case == "malformed-json":
        (d / "config.json").write_text("{not json")
    elif case == "arch":
        cfg["architectures"] = ["GPT2LMHeadModel"]
        (d / "config.json").write_text(json.dumps(cfg))
    elif case == "missing-field":
        del cfg["hidden_size"]
        (d / "config.json").write_text(json.dumps(cfg))
    elif case == "pickle-only":
        (d / "model.safetensors").rename(d / "pytorch_model.bin")
    elif case == "truncated":
        data = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(data[: len(data) // 3])
    elif case == "wrong-shape":
        from safetensors.torch import load_file, save_file

        t = load_file(str(d / "model.safetensors"))
        t["model.layers.0.mlp.up_proj.weight"] = torch.zeros(3, 3)
        save_file(t, str(d / "model.safetensors"))
    elif case == "missing-tensor":
        from safetensors.torch import load_file, save_file

        t = load_file(str(d / "model.safetensors"))
        del t["model.norm.weight"]
        save_file(t, str(d / "model.safetensors"))
    elif case == "index-escape":
        (d / "model.safetensors").unlink()
        (d / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {"model.norm.weight": "../outside.safetensors"}})
        )
    return d


@pytest.mark.parametrize(
    "case,needle",
    [
        ("missing", "no such checkpoint directory"),
        ("file", "is a file"),
        ("no-config", "no config.json"),
        ("malformed-json", "malformed JSON"),
        ("arch", "GPT2LMHeadModel"),
        ("missing-field", "hidden_size"),
        ("pickle-only", "unpickling runs arbitrary code"),
        ("truncated", "not a readable safetensors file"),
        ("wrong-shape", "model.layers.0.mlp.up_proj.weight has shape (3, 3)"),
        ("missing-tensor", "missing tensor model.norm.weight"),
        ("index-escape", "points outside"),
    ],
)
def test_broken_checkpoints_are_named_errors(tmp_path, good, case, needle):
    d = broken(tmp_path, good, case)
    for loader in (load_checkpoint, inspect_checkpoint):
        with pytest.raises(CheckpointError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            loader(d)


def test_pickles_are_never_opened(tmp_path, good, monkeypatch):
    d = broken(tmp_path, good, "pickle-only")
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with pytest.raises(CheckpointError):
        load_checkpoint(d)


def test_bad_config_values_are_config_errors():
    hf = TINY_MHA.to_hf()
    hf["num_key_value_heads"] = 3
    with pytest.raises(ConfigError, match="multiple of"):
        ModelConfig.from_hf(hf)
    hf = TINY_MHA.to_hf()
    hf["rope_scaling"] = {"rope_type": "yarn", "factor": 2.0}
    with pytest.raises(ConfigError, match="yarn"):
        ModelConfig.from_hf(hf)


def test_write_then_load_preserves_bf16_on_disk(tmp_path):
    write_checkpoint(tmp_path, TINY_MHA, synthesize_weights(TINY_MHA, 0, torch.bfloat16))
    _, tensors = load_checkpoint(tmp_path)
    assert tensors["model.norm.weight"].dtype == torch.bfloat16
