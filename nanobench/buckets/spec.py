"""`nanobench buckets`'s spec: every option's default, the rules across options, the trace.

What it is: `BucketsSpec` (frozen; `validate()` resolves `--capture-sizes`, reads
`--batch-trace` and the memory budget), `read_batch_trace` and the command's output names.
What it is not: the command (`command.py`) or the pricing (`bench.py`).
Invariant: a spec that validated prices without another check; a bad one is `BadInput`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace

from engine.config import KERNELS
from nanobench.harness.cli.options import Ints
from nanobench.harness.cli.validate import (
    capture_sizes_option,
    device_memory_bytes,
    record_s_option,
)
from nanobench.harness.errors import BadInput

CSV_NAME = "buckets.csv"
PNG_NAME = "bucketed-decode-shape.png"
OUT = "nanobench-out"


DEFAULT_WIDTH_MULTIPLE = 128
DEFAULT_WIDTH_MULTIPLES = (128, 512, 2048, 8192)


@dataclass(frozen=True)
class BucketsSpec:
    """Everything one `buckets` invocation prices: the command's option defaults live here."""

    rows: int = 3
    max_batch: int = 8
    prompt_len: int = 16
    run_lengths: tuple[int, ...] = Ints((8, 64, 128, 512))
    # None: DEFAULT_WIDTH_MULTIPLE; given without --width-multiples it asks the short question.
    width_multiple: int | None = None
    # 0: each run's own length (prompt + steps).
    max_model_len: int = 0
    block_size: int = 16
    capture_rows: int = 256
    capture_tokens: int = 8192
    # A server's capture list (engine.capture_sizes) as given; None: the power-of-two ladder.
    capture_sizes: str | None = None
    width_multiples: tuple[int, ...] | None = None
    kernel: str = "reference"
    heads: int = 32
    max_shapes: int = 64
    max_waste: float = 0.6
    # A CSV of served batch sizes (a `rows` column) and the graphs the list chosen for it holds.
    batch_trace: str | None = None
    max_graphs: int | None = None
    # With --batch-trace: the user's step, whose capture memory bounds the recommended list.
    target: str = ""
    device_memory: str = ""  # "": no memory budget
    gpu_memory_utilization: float = 0.9
    dtype: str = "float32"
    # Seconds to record one graph, measured; None: the CUDA model `cost.capture` names.
    record_s_per_graph: float | None = None
    # --capture-sizes resolved for --max-batch, --batch-trace read (validate() fills them).
    sizes: tuple[int, ...] | None = None
    batches: tuple[int, ...] | None = None
    device_bytes: int = 0

    @property
    def width_free(self) -> bool:
        return self.kernel == "triton"

    @property
    def multiple(self) -> int:
        """The chosen width multiple."""
        return self.width_multiple or DEFAULT_WIDTH_MULTIPLE

    @property
    def short(self) -> bool:
        """--width-multiple alone: the user asked one question about one multiple."""
        return self.width_multiple is not None and self.width_multiples is None

    def run_len(self, steps: int) -> int:
        """max_model_len of one run: the explicit one, else prompt + steps (the run's own length)."""
        return self.max_model_len or self.prompt_len + steps

    @property
    def typical_steps(self) -> int:
        """The longest run, clamped so prompt + steps fits the capture configuration."""
        return min(max(self.run_lengths), self.capture_tokens - self.prompt_len)

    @property
    def table_multiples(self) -> tuple[int, ...]:
        """The multiples table 2 prices: the list plus the chosen one, ascending."""
        return tuple(sorted({*(self.width_multiples or DEFAULT_WIDTH_MULTIPLES), self.multiple}))

    def validate(self) -> BucketsSpec:
        """Cross-option rules (ranges and choices are the options' own); returns the spec with
        --capture-sizes resolved."""
        if self.kernel not in KERNELS:
            raise BadInput(f"--kernel {self.kernel}: expected reference or triton (no device here)")
        if self.heads < 1:
            raise BadInput(f"--heads {self.heads}: expected 1 or more (buckets reads no model)")
        record_s_option(self.record_s_per_graph)
        if not 0.0 <= self.max_waste <= 1.0:
            raise BadInput(f"--max-waste {self.max_waste}: expected a share between 0 and 1")
        if self.rows > self.max_batch:
            raise BadInput(
                f"--rows {self.rows}: above --max-batch {self.max_batch}; the cache has no row for it"
            )
        longest = self.prompt_len + max(self.run_lengths)
        if self.max_model_len and longest > self.max_model_len:
            raise BadInput(
                f"--max-model-len {self.max_model_len}: a run grows to {longest} tokens "
                f"(--prompt-len {self.prompt_len} + --run-lengths {max(self.run_lengths)})"
            )
        sizes = capture_sizes_option(self.capture_sizes, self.max_batch)
        if sizes is not None and self.rows > sizes[-1]:
            raise BadInput(
                f"--rows {self.rows}: above the largest --capture-sizes size {sizes[-1]}; the "
                "typical run must fit the capture list"
            )
        if sizes is None and self.rows > self.capture_rows:
            raise BadInput(
                f"--rows {self.rows}: above --capture-rows {self.capture_rows}; the typical run "
                "must fit the serving config"
            )
        if self.prompt_len >= self.capture_tokens:
            raise BadInput(
                f"--prompt-len {self.prompt_len}: leaves no decode step inside --capture-tokens "
                f"{self.capture_tokens}"
            )
        return replace(
            self, sizes=sizes, batches=self._batches(), device_bytes=self._device_bytes()
        )

    def _device_bytes(self) -> int:
        """--target and --device-memory: the memory budget of the recommended list, or 0."""
        if not self.target and not self.device_memory:
            return 0
        if not (self.target and self.device_memory and self.batch_trace):
            raise BadInput(
                "--target, --device-memory: bound the list chosen for --batch-trace; pass all "
                "three (and --max-graphs)"
            )
        from nanobench.harness.step.targets import target_option

        target_option(self.target)
        if self.gpu_memory_utilization <= 0.0:
            raise BadInput(
                f"--gpu-memory-utilization {self.gpu_memory_utilization}: expected a share in (0, 1]"
            )
        return device_memory_bytes(self.device_memory, "cpu")

    def _batches(self) -> tuple[int, ...] | None:
        """--batch-trace read and checked against --max-graphs and --max-batch."""
        if self.batch_trace is None:
            if self.max_graphs is not None:
                raise BadInput(
                    f"--max-graphs {self.max_graphs}: needs --batch-trace FILE.csv, the batch "
                    "sizes the list is chosen for"
                )
            return None
        if self.max_graphs is None:
            raise BadInput(
                f"--batch-trace {self.batch_trace}: needs --max-graphs K, the most graphs the "
                "recommended list may hold"
            )
        batches = read_batch_trace(self.batch_trace)
        if max(batches) > self.max_batch:
            raise BadInput(
                f"--batch-trace {self.batch_trace}: a step of {max(batches)} rows is above "
                f"--max-batch {self.max_batch}; pass --max-batch {max(batches)} or more (the "
                "servers' lists are built for it)"
            )
        return batches


def read_batch_trace(path: str) -> tuple[int, ...]:
    """The `rows` column of a CSV, one served decode step a line: positive ints, at least one."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if "rows" not in (reader.fieldnames or ()):
                raise BadInput(
                    f"--batch-trace {path}: expected a CSV with a rows column (the batch size of "
                    f"each decode step), got columns {reader.fieldnames or []}"
                )
            cells = [(reader.line_num, line["rows"]) for line in reader]
    except OSError as e:
        raise BadInput(f"--batch-trace {path}: cannot read it ({e.strerror or e})") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise BadInput(f"--batch-trace {path}: not a text CSV ({e})") from None
    batches = []
    for line, cell in cells:
        text = (cell or "").strip()
        if not text.isdigit() or int(text) < 1:
            raise BadInput(
                f"--batch-trace {path}: line {line}: rows {cell!r}, expected a positive integer"
            )
        batches.append(int(text))
    if not batches:
        raise BadInput(f"--batch-trace {path}: no decode step in it (expected rows lines)")
    return tuple(batches)
