"""Hugging Face checkpoints on disk: read one, write one, synthesize a preset's weights.

What it is: `load_checkpoint(dir)` -> (ModelConfig, state dict) from `config.json` plus a
single or sharded safetensors file; `write_checkpoint`; `synthesize_weights` (deterministic
seeded weights) and `write_once`, with which `sources.materialize_preset` writes a preset once as
a real HF directory in the user cache, so presets load through exactly the code a downloaded
checkpoint does.
What it is not: a downloader. Nothing here reaches the network.
Invariant: safetensors only. A pickle (`.bin`, `.pt`) is never opened, because unpickling runs
arbitrary code; a directory that holds only pickles is refused with that reason.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

import torch

from engine.config import ConfigError, ModelConfig, Preset, cache_root

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be loaded, with the file or tensor named."""


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    h, i = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (config.vocab_size, h),
        "model.norm.weight": (h,),
    }
    for n in range(config.num_layers):
        p = f"model.layers.{n}."
        shapes[p + "self_attn.q_proj.weight"] = (config.q_size, h)
        shapes[p + "self_attn.k_proj.weight"] = (config.kv_size, h)
        shapes[p + "self_attn.v_proj.weight"] = (config.kv_size, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, config.q_size)
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        if config.qkv_bias:
            shapes[p + "self_attn.q_proj.bias"] = (config.q_size,)
            shapes[p + "self_attn.k_proj.bias"] = (config.kv_size,)
            shapes[p + "self_attn.v_proj.bias"] = (config.kv_size,)
        if config.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (config.head_dim,)
            shapes[p + "self_attn.k_norm.weight"] = (config.head_dim,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, h)
    return shapes


def read_config(directory: Path) -> ModelConfig:
    path = directory / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{directory}: no config.json (expected a Hugging Face checkpoint)")
    try:
        hf = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: malformed JSON ({e})") from None
    try:
        return ModelConfig.from_hf(hf, source=str(path))
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def weight_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    single = directory / "model.safetensors"
    root = directory.resolve()
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index}: malformed index ({e})") from None
        files = []
        for name in names:
            path = (directory / str(name)).resolve()
            if root not in path.parents:
                raise CheckpointError(f"{index}: shard {name!r} points outside {directory}")
            if path.suffix != ".safetensors":
                raise CheckpointError(f"{index}: shard {name!r} is not a .safetensors file")
            if not path.is_file():
                raise CheckpointError(f"{index}: shard {name!r} is missing")
            files.append(path)
        return files
    if single.is_file():
        return [single]
    loose = sorted(directory.glob("*.safetensors"))
    if loose:
        return loose
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
    if pickles:
        raise CheckpointError(
            f"{directory}: only pickled weights ({', '.join(pickles)}); nanobench loads "
            "safetensors only, because unpickling runs arbitrary code"
        )
    raise CheckpointError(f"{directory}: no model.safetensors or model.safetensors.index.json")


def read_tensors(files: list[Path]) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            tensors.update(load_file(str(path)))
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
    return tensors


def check_finite(name: str, tensor: torch.Tensor, where: str) -> None:
    """A NaN or Inf weight makes every logit downstream meaningless while argmax still agrees
    with itself, so it is refused at load, by name. One read of the tensor, no copy of it."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return
    # aminmax is one vectorised pass that propagates NaN and keeps +-Inf at the ends: about
    # 20x faster than isfinite().all(), which materialises a bool per element.
    low, high = torch.aminmax(tensor)
    if not (bool(torch.isfinite(low)) and bool(torch.isfinite(high))):
        bad = int((~torch.isfinite(tensor)).sum())
        raise CheckpointError(
            f"{where}: tensor {name} holds {bad} non-finite value(s) (NaN or Inf); "
            "expected finite weights"
        )


def scan_finite(path: str | Path) -> None:
    """Every weight of a checkpoint is finite, read one tensor at a time (memory: the largest).

    For a parent process that must refuse a broken checkpoint before any worker loads it.
    """
    from safetensors import SafetensorError, safe_open

    for f in weight_files(checkpoint_dir(path)):
        try:
            with safe_open(str(f), framework="pt") as handle:
                for name in handle.keys():
                    check_finite(name, handle.get_tensor(name), str(f))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{f}: not a readable safetensors file ({e})") from None


def check_tensors(config: ModelConfig, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """Names and shapes against the config; a tied head may or may not be stored."""
    expected = expected_shapes(config)
    if config.tie_word_embeddings:
        shapes = {k: v for k, v in shapes.items() if k != "lm_head.weight"}
    missing = sorted(expected.keys() - shapes.keys())
    if missing:
        raise CheckpointError(f"{where}: missing tensor {missing[0]} ({len(missing)} missing)")
    unexpected = sorted(
        k for k in shapes.keys() - expected.keys() if not k.endswith("rotary_emb.inv_freq")
    )
    if unexpected:
        raise CheckpointError(f"{where}: unexpected tensor {unexpected[0]}")
    for name, shape in expected.items():
        if tuple(shapes[name]) != shape:
            raise CheckpointError(
                f"{where}: tensor {name} has shape {tuple(shapes[name])}, expected {shape}"
            )


def checkpoint_dir(path: str | Path) -> Path:
    directory = Path(path)
    if not directory.exists():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: is a file, expected a checkpoint directory")
    return directory


def load_checkpoint(path: str | Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    directory = checkpoint_dir(path)
    config = read_config(directory)
    tensors = read_tensors(weight_files(directory))
    check_tensors(config, {k: tuple(v.shape) for k, v in tensors.items()}, str(directory))
    for name, tensor in tensors.items():
        check_finite(name, tensor, str(directory))
    if config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
    return config, tensors


def write_checkpoint(
    directory: Path, config: ModelConfig, tensors: dict[str, torch.Tensor]
) -> None:
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_hf(), indent=2))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / "model.safetensors"))


def synthesize_weights(
    config: ModelConfig, seed: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Deterministic weights: each tensor seeded from (seed, name), so depth does not reshuffle."""
    tensors = {}
    for name, shape in expected_shapes(config).items():
        g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif name.endswith("embed_tokens.weight"):
            t = 0.02 * torch.randn(shape, generator=g)
        else:
            # fan-in scaling keeps every layer's contribution the size of the residual, so the
            # synthetic model does not just echo its input token.
            t = torch.randn(shape, generator=g) * shape[-1] ** -0.5
        tensors[name] = t.to(dtype)
    return tensors


def preset_dir(name: str, spec: Preset) -> Path:
    key = json.dumps([spec.config.to_hf(), spec.seed, spec.disk_dtype], sort_keys=True)
    return cache_root() / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def write_once(target: Path, write: Callable[[Path], None]) -> Path:
    """A checkpoint directory written once, atomically: `write` fills a temporary sibling that
    is renamed into place; a concurrent writer that won the race is kept."""
    if (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(tmp)
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def inspect_checkpoint(path: str | Path) -> ModelConfig:
    """Validate a checkpoint without reading its weights: config, files, tensor names and shapes."""
    from safetensors import SafetensorError, safe_open

    directory = checkpoint_dir(path)
    config = read_config(directory)
    shapes: dict[str, tuple[int, ...]] = {}
    for f in weight_files(directory):
        try:
            with safe_open(str(f), framework="pt") as handle:
                for name in handle.keys():
                    shapes[name] = tuple(handle.get_slice(name).get_shape())
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{f}: not a readable safetensors file ({e})") from None
    check_tensors(config, shapes, str(directory))
    return config


def available_memory_bytes(device: str) -> int | None:
    """Memory a load can still use on the device: free CUDA memory, or MemAvailable on Linux."""
    if torch.device(device).type == "cuda":
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits_memory(config: ModelConfig, dtype: str, device: str, copies: int = 1) -> None:
    """Refuse a model whose weights cannot fit, instead of being killed mid-load."""
    need = config.num_params * torch.empty((), dtype=DTYPES[dtype]).element_size() * copies
    free = available_memory_bytes(device)
    if free is not None and need > free:
        raise CheckpointError(
            f"the weights need {need / 1e9:.1f} GB in {dtype} on {device}, but only "
            f"{free / 1e9:.1f} GB is available; pick a smaller model or dtype"
        )
