"""GGUF loading on tiny files written here with the `gguf` package's own writer.

The files are built the way llama.cpp's convert_hf_to_gguf.py builds them (dims innermost
first, Llama q/k rows permuted for its rotary layout, no output.weight when tied), so loading
one back must give exactly the state dict it was made from.
"""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from engine.config import ModelConfig
from engine.engine import Engine
from engine.gguf import load_gguf, read_gguf_config
from engine.weights import CheckpointError, synthesize_weights
from nanobench.cli import app
from tests.helpers import TINY_GQA, TINY_MHA

GGUF_NAMES = {
    "embed_tokens": "token_embd",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_config(config: ModelConfig) -> ModelConfig:
    """The config a GGUF can round-trip: eps stored as float32, no llama3 rope scaling."""
    return ModelConfig(
        **{
            **config.__dict__,
            "rope_scaling": None,
            "rms_norm_eps": float(np.float32(config.rms_norm_eps)),
        }
    )


CONFIG = gguf_config(TINY_GQA)  # tied
UNTIED = gguf_config(TINY_MHA)


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute, as written there."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def gguf_name(hf: str) -> str:
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    module, leaf = rest.rsplit(".", 1)
    return f"blk.{layer}.{GGUF_NAMES[module]}.{leaf}"


def write_gguf(path, config: ModelConfig, tensors, arch: str = "llama", bad_tensor=None) -> None:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(config.num_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_heads)
    w.add_head_count_kv(config.num_kv_heads)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_vocab_size(config.vocab_size)
    for name, t in tensors.items():
        a = t.numpy()
        if name.endswith("q_proj.weight"):
            a = llama_cpp_permute(a, config.num_heads)
        elif name.endswith("k_proj.weight"):
            a = llama_cpp_permute(a, config.num_kv_heads)
        if name == bad_tensor:
            a = a.astype(np.int32)  # an integer tensor: no dequantization exists for it
        w.add_tensor(gguf_name(name), a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture
def tiny_gguf(tmp_path):
    tensors = synthesize_weights(CONFIG, 3, torch.float32)
    path = tmp_path / "tiny.gguf"
    write_gguf(path, CONFIG, tensors)
    return path, tensors


@pytest.mark.parametrize("config", [CONFIG, UNTIED], ids=["tied", "untied"])
def test_gguf_loads_back_the_state_dict_it_was_written_from(config, tmp_path):
    tensors = synthesize_weights(config, 3, torch.float32)
    path = tmp_path / "tiny.gguf"
    write_gguf(path, config, tensors)
    loaded_config, loaded = load_gguf(path)
    assert loaded_config == config
    assert read_gguf_config(path) == config
    assert loaded.keys() == tensors.keys()
    for name, t in tensors.items():
        # F32 in, F32 out: the same numbers, so bitwise.
        assert torch.equal(loaded[name], t), name


def test_gguf_is_dequantized_to_the_engine_dtype_and_decodes_like_its_source(tiny_gguf, tmp_path):
    from engine.weights import write_checkpoint

    path, tensors = tiny_gguf
    _, half = load_gguf(path, torch.bfloat16)
    assert {t.dtype for t in half.values()} == {torch.bfloat16}
    write_checkpoint(tmp_path / "hf", CONFIG, tensors)
    batch = [[5, 9, 13], [1, 2, 3, 4, 5, 6, 7]]
    a = Engine.from_checkpoint(str(path), max_model_len=64).generate(batch, 8)
    b = Engine.from_checkpoint(str(tmp_path / "hf"), max_model_len=64).generate(batch, 8)
    assert a == b


@pytest.mark.parametrize(
    "arch,bad_tensor,needle",
    [
        ("gpt2", None, "GGUF architecture 'gpt2' is not supported"),
        ("llama", "model.layers.0.mlp.up_proj.weight", "quantized as I32"),
    ],
)
def test_unsupported_gguf_is_one_line_exit_2(tmp_path, arch, bad_tensor, needle):
    path = tmp_path / "bad.gguf"
    write_gguf(path, CONFIG, synthesize_weights(CONFIG, 3, torch.float32), arch, bad_tensor)
    with pytest.raises(CheckpointError, match=needle):
        load_gguf(path)
    if arch != "llama":  # the arithmetic-only command reads the metadata alone
        result = CliRunner().invoke(app, ["pool-budget", "--model", str(path)])
        assert result.exit_code == 2, result.output
        assert needle in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_pool_budget_reads_a_gguf_model_from_its_metadata(tiny_gguf, monkeypatch):
    import engine.gguf

    def no_data(*args, **kwargs):
        raise AssertionError("pool-budget dequantized weights")

    monkeypatch.setattr(engine.gguf, "load_gguf", no_data)
    path, _ = tiny_gguf
    result = CliRunner().invoke(app, ["pool-budget", "--model", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.output)
    weights = {r["weights_bytes"] for r in doc["rows"] if "weights_bytes" in r}
    assert weights == {CONFIG.num_params * 4}


def test_a_user_gguf_is_converted_once_for_transformers(tiny_gguf, tmp_path, monkeypatch):
    """decode hands transformers a HF directory: the GGUF's own tensors, under config.json."""
    import transformers

    from engine.sources import materialize_gguf
    from engine.weights import load_checkpoint
    from nanobench.decode.bench import transformers_can_load

    monkeypatch.setenv("NANOBENCH_CACHE", str(tmp_path / "cache"))
    path, tensors = tiny_gguf
    directory = materialize_gguf(path)
    assert directory != path and (directory / "config.json").is_file()
    assert materialize_gguf(path) == directory  # converted once, then reused
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    assert materialize_gguf(tmp_path / "hf") == tmp_path / "hf"  # a HF directory: as given
    transformers_can_load(directory)
    hf = transformers.AutoConfig.from_pretrained(str(directory), local_files_only=True)
    assert (hf.hidden_size, hf.num_hidden_layers) == (CONFIG.hidden_size, CONFIG.num_layers)
    _, loaded = load_checkpoint(directory)
    for name, t in tensors.items():
        assert torch.equal(loaded[name], t), name
