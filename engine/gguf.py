"""GGUF files (llama.cpp's format): read the model config and dequantized weights.

What it is: `find_gguf(path)` (a `.gguf` file, or a directory holding exactly one and no
config.json), `read_gguf_config` (metadata only, no tensor data), `load_gguf` (tensors
dequantized through the `gguf` package, renamed to Hugging Face's names, cast to the engine's
dtype) and `convert_gguf`, which writes a GGUF once as a Hugging Face directory (config.json +
model.safetensors + the tokenizer the file carries).
What it is not: a quantized engine. Weights are dequantized on load; nothing runs in Q4.
Invariant: the state dict `load_gguf` returns is the one the same model's Hugging Face
checkpoint holds: llama.cpp stores Llama q/k rows permuted for its rotary layout (its
`convert_hf_to_gguf.py` `permute`), and they are permuted back here. An unsupported
architecture or quantization type is a `CheckpointError` naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from engine.config import ConfigError, ModelConfig
from engine.weights import CheckpointError, check_tensors

ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
# gguf name -> Hugging Face name; `{}` is the layer index.
NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
BLOCK = re.compile(r"blk\.(\d+)\.(.+)")


def find_gguf(path: str | Path) -> Path | None:
    """The GGUF file `path` names: the file itself, or the one .gguf in a non-HF directory."""
    path = Path(path)
    if path.is_file():
        return path if path.suffix == ".gguf" else None
    if not path.is_dir() or (path / "config.json").exists():
        return None
    files = sorted(path.glob("*.gguf"))
    if len(files) > 1:
        raise CheckpointError(f"{path}: {len(files)} .gguf files; name one of them")
    return files[0] if files else None


def reader(path: Path):
    import gguf

    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError, IndexError) as e:
        raise CheckpointError(f"{path}: not a readable GGUF file ({e})") from None


def field(r, key: str, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def config_of(r, path: Path) -> ModelConfig:
    arch = field(r, "general.architecture")
    if arch not in ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch!r} is not supported; expected one of "
            f"{', '.join(ARCHITECTURES)}"
        )
    if any(t.name == "rope_freqs.weight" for t in r.tensors):
        raise CheckpointError(f"{path}: GGUF rope_freqs (llama3 rope scaling) is not supported")
    names = {t.name for t in r.tensors}
    heads = field(r, f"{arch}.attention.head_count")
    hidden = field(r, f"{arch}.embedding_length")
    vocab = field(r, f"{arch}.vocab_size") or len(r.fields["tokenizer.ggml.tokens"].data)
    hf = {
        "architectures": [ARCHITECTURES[arch]],
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": field(r, f"{arch}.feed_forward_length"),
        "num_hidden_layers": field(r, f"{arch}.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": field(r, f"{arch}.attention.head_count_kv", heads),
        "head_dim": field(r, f"{arch}.attention.key_length"),
        "rope_theta": field(r, f"{arch}.rope.freq_base", 10000.0),
        "rms_norm_eps": field(r, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
        "max_position_embeddings": field(r, f"{arch}.context_length", 2048),
        # llama.cpp drops output.weight when the head is the embedding.
        "tie_word_embeddings": "output.weight" not in names,
    }
    try:
        return ModelConfig.from_hf(hf, source=str(path))
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def hf_name(name: str) -> str | None:
    if name in NAMES:
        return NAMES[name]
    m = BLOCK.fullmatch(name)
    if m and m.group(2) in NAMES:
        return f"model.layers.{m.group(1)}.{NAMES[m.group(2)]}"
    return None


def tensor_shapes(r, path: Path) -> dict[str, tuple[int, ...]]:
    """Hugging Face names -> (out, in) shapes; GGUF lists dims innermost first."""
    shapes = {}
    for t in r.tensors:
        name = hf_name(t.name)
        if name is None:
            raise CheckpointError(f"{path}: unexpected GGUF tensor {t.name}")
        shapes[name] = tuple(int(d) for d in reversed(t.shape.tolist()))
    return shapes


def read_gguf_config(path: str | Path) -> ModelConfig:
    """The config from the metadata, with tensor names and shapes checked; no data is read."""
    path = Path(path)
    r = reader(path)
    config = config_of(r, path)
    check_tensors(config, tensor_shapes(r, path), str(path))
    return config


def unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's q/k permute: rows (heads, D/2, 2) -> (heads, 2, D/2), per head."""
    out = w.shape[0]
    return w.reshape(heads, out // heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def load_gguf(
    path: str | Path, dtype: torch.dtype = torch.float32
) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    import gguf

    path = Path(path)
    r = reader(path)
    config = config_of(r, path)
    check_tensors(config, tensor_shapes(r, path), str(path))
    tensors = {}
    for t in r.tensors:
        name = hf_name(t.name)
        try:
            data = gguf.quants.dequantize(t.data, t.tensor_type)  # float32, (out, in)
        except NotImplementedError:
            raise CheckpointError(
                f"{path}: tensor {t.name} is quantized as {t.tensor_type.name}, which the gguf "
                "package cannot dequantize"
            ) from None
        w = torch.from_numpy(data.copy()).reshape(tuple(reversed(t.shape.tolist())))
        if config.architecture == "LlamaForCausalLM" and name.endswith(
            ("q_proj.weight", "k_proj.weight")
        ):
            w = unpermute(w, config.num_heads if "q_proj" in name else config.num_kv_heads)
        tensors[name] = w.to(dtype)
    return config, tensors


def write_tokenizer(path: Path, directory: Path) -> bool:
    """Save the tokenizer the GGUF carries (built by transformers) into `directory`, if any."""
    if "tokenizer.ggml.tokens" not in reader(path).fields:
        return False
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tok.save_pretrained(str(directory))
    return True


def convert_gguf(path: Path, directory: Path) -> None:
    """Write the GGUF as a Hugging Face directory: float32 weights, config.json, tokenizer."""
    from engine.weights import write_checkpoint

    config, tensors = load_gguf(path, torch.float32)
    write_checkpoint(directory, config, tensors)
    write_tokenizer(path, directory)
