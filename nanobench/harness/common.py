"""What every command shares: option validation, model resolution, gates and the output contract.

What it is: validators that turn a user mistake into `BadInput` (one line, exit 2), `Gate`
records (a verdict of pass, fail or inconclusive; a timing gate also carries its estimate, 95%
interval and target), and `finish`, which prints the table or the JSON document and picks the
exit code (0 all pass, 1 a fail or a failed measurement, 3 nothing failed but something could
not be decided).
What it is not: a command. Commands live in their own modules and `cli.py` only registers them.
Invariant: validation happens before anything is measured; `--json` prints one document and
nothing else on stdout.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from nanobench.harness.errors import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK, BadInput
from nanobench.harness.verdicts import FAIL, INCONCLUSIVE, PASS  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class Gate:
    """A promise checked. `passed` is `verdict == "pass"`; a pass/fail gate gives only `passed`."""

    name: str
    passed: bool
    detail: str
    verdict: str = ""
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    target: float | None = None

    def __post_init__(self) -> None:
        verdict = self.verdict or (PASS if self.passed else FAIL)
        if verdict not in (PASS, FAIL, INCONCLUSIVE) or self.passed != (verdict == PASS):
            raise ValueError(f"gate {self.name}: verdict {verdict!r} with passed={self.passed}")
        object.__setattr__(self, "verdict", verdict)


def interval_gate(name: str, verdict: str, detail: str, interval, target: float) -> Gate:
    """A timing gate: the verdict of an Interval (nanobench.harness.stats) against its target."""

    def number(value: float) -> float | None:
        return None if value != value else round(value, 4)

    return Gate(
        name,
        verdict == PASS,
        detail,
        verdict,
        number(interval.estimate),
        number(interval.low),
        number(interval.high),
        target,
    )


def ratio_gate(name: str, what: str, interval, target: float) -> Gate:
    """A step-time ratio at most `target`: pass only when its whole 95% interval is."""
    from nanobench.harness.stats import (
        MIN_ROUNDS,
        processes_bind,
        rounds_to_decide,
        verdict_at_most,
    )

    if interval.estimate != interval.estimate:
        return Gate(name, False, f"{what}: not measured (both systems must run in the sweep)")
    verdict = verdict_at_most(interval, target)
    if interval.low != interval.low:
        span = f"no interval yet ({interval.rounds} rounds; one needs {MIN_ROUNDS})"
    else:
        span = f"[{interval.low:.2f}, {interval.high:.2f}] over {interval.rounds} rounds"
    detail = f"{what} is {interval.estimate:.2f}x {span}; the target is at most {target:.2f}x"
    if verdict == INCONCLUSIVE:
        more, bind = rounds_to_decide(interval, target), processes_bind(interval, target)
        detail += "; can't tell at this noise" + undecided_hint(more, bind)
    return interval_gate(name, verdict, detail, interval, target)


def undecided_hint(more: int | None, bind: bool | None) -> str:
    """What would decide an inconclusive gate: more processes, about `more` rounds, or nothing said."""
    if bind:
        return (
            " (the processes disagree by more than the gap: more --processes would narrow it,"
            " more rounds would not)"
        )
    return f" (about {more} more rounds would likely decide)" if more else ""


def gate(name: str, check: Callable, *args, **kwargs) -> Gate:
    """Run one `check_*` function; its exception (named after the broken promise) fails it."""
    try:
        check(*args, **kwargs)
    except (AssertionError, RuntimeError, ValueError) as e:
        return Gate(name, False, str(e).splitlines()[0] if str(e) else type(e).__name__)
    return Gate(name, True, "ok")


def positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise BadInput(f"{name} {value}: expected a positive integer")
    return value


def apply_threads(threads: int) -> int:
    """torch's intra-op threads in this process set to `threads` (0 leaves torch's default).

    Returns `torch.get_num_threads()` read afterwards: what a row timed in this process carries,
    never the option echoed back.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@contextmanager
def threads_applied(threads: int) -> Iterator[int]:
    """`apply_threads` for one in-process run (capture, explain, the kernel bench), undone after:
    a command called inside another program (a test, a notebook) leaves its setting alone."""
    import torch

    before = torch.get_num_threads()
    try:
        yield apply_threads(threads)
    finally:
        torch.set_num_threads(before)


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


def model_option(model: str):
    """A preset name, a checkpoint directory or a GGUF file whose weights a worker will load.

    Returns (checkpoint path, ModelConfig). A preset is materialised on first use. Names and
    shapes come from the headers; a safetensors checkpoint's weights are each read once to
    refuse NaN/Inf before measuring (a GGUF's are checked as the worker dequantizes them).
    """
    from engine.config import PRESETS, ConfigError
    from engine.gguf import find_gguf
    from engine.sources import inspect_model, materialize_preset
    from engine.weights import CheckpointError, scan_finite

    try:
        if model in PRESETS:
            directory = materialize_preset(model)
        else:
            directory = Path(model)
            if not directory.exists():
                raise BadInput(
                    f"--model {model!r}: not a preset ({', '.join(PRESETS)}) and no such directory"
                )
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
    from engine.config import PRESETS, ConfigError
    from engine.sources import model_config
    from engine.weights import CheckpointError

    try:
        if model not in PRESETS and not Path(model).exists():
            raise BadInput(
                f"--model {model!r}: not a preset ({', '.join(PRESETS)}) and no such directory"
            )
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


def out_dir(path: str) -> Path:
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
            pass
    except OSError as e:
        raise BadInput(f"--out {path}: cannot write there ({e.strerror or e})") from None
    return directory


def finish(
    command: str,
    rows: list[dict],
    gates: list[Gate],
    outputs: dict[str, str],
    *,
    json_mode: bool,
    check: bool,
    render: Callable[[], None],
    failed: bool = False,
    env: dict | None = None,
) -> int:
    """Print the table (or the JSON document) and return the exit code.

    Exit 1 when a measurement failed, or when --check is set and a gate failed; exit 3 when
    --check is set, nothing failed and a gate is inconclusive.
    """
    if json_mode:
        doc = {
            "command": command,
            "rows": rows,
            "gates": [asdict(g) for g in gates],
            "outputs": outputs,
        }
        if env is not None:
            doc["env"] = env
        sys.stdout.write(json.dumps(clean_json(doc), default=str) + "\n")
    else:
        render()
    if failed:
        return EXIT_FAILED
    if check and any(g.verdict == FAIL for g in gates):
        return EXIT_FAILED
    if check and any(g.verdict == INCONCLUSIVE for g in gates):
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def clean_json(value):
    """NaN and infinity are not JSON: they become null."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


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
