"""Validation of what a user typed: each option checked before anything is measured.

What it is: validators that turn a user mistake into `BadInput` (one line, exit 2) and return
the value to use: `positive`, `choice`, `device_option`, `dtype_option` (auto resolved to a
dtype), `capture_sizes_option`, `record_s_option`, `device_memory_bytes`, `model_option` and
`config_option` (a preset, checkpoint or GGUF resolved; `model_named` the name alone and
`step_named` with a --target's and a --vs's, no torch loaded), `fits_option` (the weights
against the device's memory), `out_dir` (a directory that can be written; `out_dir_tried`,
tried and left as found) and `out_file` (a file the run writes at its end).
What it is not: the options' declarations (`options`, where Typer refuses a range or a choice
itself) or the rules across options (each command's spec `validate()`, which calls these).
Invariant: validation happens before anything is measured; a mistake is `BadInput`, never a
traceback. This module imports no torch: what a check needs of it is imported inside the
check, after the checks that need none (a typing mistake is said at once, not after seconds).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from nanobench.harness.errors import BadInput, as_vs


def positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise BadInput(f"{name} {value}: expected a positive integer")
    return value


def choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise BadInput(f"{name} {value!r}: expected one of {', '.join(allowed)}")
    return value


def dtype_option(dtype: str, model: str, device: str) -> str:
    """--dtype: an explicit dtype, or auto = the checkpoint's stored dtype on CUDA, float32 on CPU.

    On a CPU, float32 is the fast path (oneDNN-packed GEMMs) and bf16/fp16 matmuls are emulated
    or slower; on a GPU the stored dtype is what the model was trained and shipped to run in.
    """
    from engine.config import DTYPES

    choice("--dtype", dtype, ("auto", *DTYPES))
    if dtype != "auto":
        return dtype
    if device != "cuda":
        return "float32"
    from engine.sources import checkpoint_dtype

    return checkpoint_dtype(model) or "float32"


def capture_sizes_option(text: str | None, max_batch: int) -> tuple[int, ...] | None:
    """--capture-sizes: None, a server's named ladder for max_batch sequences, or a list."""
    if text is None:
        return None
    from engine.capture_sizes import CaptureSizesError, resolve

    try:
        return resolve(text, max_batch)
    except CaptureSizesError:
        raise BadInput(
            f"--capture-sizes {text!r}: expected vllm, sglang or comma-separated positive integers"
        ) from None


def record_s_option(seconds: float | None) -> float | None:
    """--record-s-per-graph: unset, or positive seconds (what recording one graph took)."""
    if seconds is not None and not seconds > 0:
        raise BadInput(
            f"--record-s-per-graph {seconds:g}: expected positive seconds, what recording one "
            "graph took (capture's record_s_per_graph)"
        )
    return seconds


def device_option(device: str) -> str:
    choice("--device", device, ("cpu", "cuda"))
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BadInput(
                "--device cuda: no CUDA device here (torch.cuda.is_available() is False)"
            )
    return device


def model_named(model: str) -> str:
    """--model names a preset or a path that exists: checked with no torch loaded, so the
    mistake is said at once; what the path holds is `model_option`'s and `config_option`'s."""
    from engine.config import PRESETS  # the presets' names: no torch

    if model not in PRESETS and not Path(model).exists():
        raise BadInput(
            f"--model {model!r}: not a preset ({', '.join(PRESETS)}) and no such directory"
        )
    return model


def step_named(model: str, target: str, vs: str = "") -> None:
    """--vs, --target and --model as named, nothing imported (`targets.target_named`,
    `model_named`), in the order a run resolves them: the before side first. The model is the
    engine's, or a built-in target's."""
    from nanobench.harness.step.targets import BUILTINS, target_named

    if vs:
        try:
            target_named(vs)
        except BadInput as e:
            raise as_vs(e) from None
    if target:
        target_named(target)
    if not target or BUILTINS.keys() & {target, vs}:
        model_named(model)


def model_option(model: str):
    """A preset name, a checkpoint directory or a GGUF file whose weights a worker will load.

    Returns (checkpoint path, ModelConfig). A preset is materialised on first use. Names and
    shapes come from the headers; a safetensors checkpoint's weights are each read once to
    refuse NaN/Inf before measuring (a GGUF's are checked as the worker dequantizes them).
    """
    from engine.config import PRESETS, ConfigError

    model_named(model)
    # Heavy on purpose: torch loads once the name is known to be a preset or a path.
    from engine.gguf import find_gguf
    from engine.sources import inspect_model, materialize_preset
    from engine.weights import CheckpointError, scan_finite

    try:
        directory = materialize_preset(model) if model in PRESETS else Path(model)
        config = inspect_model(directory)
        if find_gguf(directory) is None:
            scan_finite(directory)
        return directory, config
    except (CheckpointError, ConfigError) as e:
        raise BadInput(f"--model: {e}") from None


def config_option(model: str):
    """The ModelConfig of a preset, a checkpoint directory (config.json) or a GGUF (metadata).

    For commands that only do arithmetic: no weights are read, synthesized or written, so a
    directory holding only `config.json` is enough and a preset is never materialised.
    """
    from engine.config import ConfigError

    model_named(model)
    from engine.sources import model_config
    from engine.weights import CheckpointError

    try:
        return model_config(model)
    except (CheckpointError, ConfigError) as e:
        raise BadInput(f"--model: {e}") from None


def fits_option(config, dtype: str, device: str, copies: int = 1) -> None:
    """Weights against the memory available on the target device, before anything loads."""
    from engine.config import DTYPES
    from engine.weights import CheckpointError, check_fits_memory

    choice("--dtype", dtype, DTYPES)
    device_option(device)
    try:
        check_fits_memory(config, dtype, device, copies)
    except CheckpointError as e:
        raise BadInput(f"--model: {e}") from None


def device_memory_bytes(text: str, device: str) -> int:
    """A size, or with 'probe' the free memory of the current CUDA device."""
    if text.strip().lower() == "probe":
        if device != "cuda":
            raise BadInput(
                "--device-memory probe: reads free memory on a CUDA device; pass --device cuda "
                "on a machine with one, or give a size like 80GiB"
            )
        import torch

        return int(torch.cuda.mem_get_info()[0])
    from nanobench.cost.pool import parse_bytes  # pure arithmetic: no torch

    try:
        value = parse_bytes(text)
    except ValueError as e:
        raise BadInput(f"--device-memory: {e}") from None
    if value < 1:
        raise BadInput(f"--device-memory {text!r}: expected a positive size")
    return value


def out_dir(path: str, option: str = "--out") -> Path:
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
            pass
    except OSError as e:
        raise BadInput(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    return directory


def out_dir_tried(path: str, option: str = "--out") -> None:
    """A directory option tried as `out_dir` makes it, then left as it was found: a command
    whose later checks load torch says a bad --out at once, and bad input writes nothing."""
    directory = Path(path)
    made = [p for p in (directory, *directory.parents) if not p.exists()]  # deepest first
    try:
        out_dir(path, option)
    finally:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()


def out_file(path: str, option: str) -> None:
    """A file the run writes at its end (`--export-json`), tried before anything is measured:
    a run is never spent on an output it cannot write. Leaves no file it did not find."""
    if not path:
        return
    target = Path(path)
    existed = target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a"):
            pass
    except OSError as e:
        raise BadInput(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    if not existed:
        target.unlink(missing_ok=True)
