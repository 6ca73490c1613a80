"""`nanobench buckets` (alias `bucketbench`): price a closed decode shape set before capturing.

What it is: the command, its spec (`BucketsSpec`: every option's default and the cross-option
rules) and its gates. It runs `nanobench.buckets.bench` on the host (a real cache and real
plans, no weights, no compiler), prints table 1 (per run length) and table 2 (the capture list
per width multiple, both kernels), with `--batch-trace FILE --max-graphs K` table 3 (the capture
list chosen for the served trace, beside vLLM's and SGLang's priced on it), writes
`<out>/buckets.csv` and
`<out>/bucketed-decode-shape.png`, and turns the gates into an exit status under `--check`.
What it is not: the measurement (`nanobench.buckets.bench`) or the formatting (`reports.buckets`).
Invariant: a gate failure is exit 1 under --check and never exit 2; bad input leaves the out
directory untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import typer

from engine.config import KERNELS
from nanobench.harness.common import Gate, finish, gate
from nanobench.harness.console import run_command, stdout_console
from nanobench.harness.options import (
    BatchTrace,
    BlockSize,
    CaptureRows,
    CaptureSizes,
    CaptureTokens,
    CheckOpt,
    DeviceMemory,
    Dtype,
    Heads,
    Ints,
    JsonOpt,
    Kernel,
    MaxBatch,
    MaxGraphs,
    MaxModelLen,
    MaxShapes,
    MaxWaste,
    MemoryUtilization,
    Out,
    PromptLen,
    QuietOpt,
    Rows,
    RunLengths,
    Target,
    WidthMultiple,
    WidthMultiples,
)

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
        from nanobench.harness.common import capture_sizes_option
        from nanobench.harness.errors import BadInput

        if self.kernel not in KERNELS:
            raise BadInput(f"--kernel {self.kernel}: expected reference or triton (no device here)")
        if self.heads < 1:
            raise BadInput(f"--heads {self.heads}: expected 1 or more (buckets reads no model)")
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
        from nanobench.harness.errors import BadInput

        if not self.target and not self.device_memory:
            return 0
        if not (self.target and self.device_memory and self.batch_trace):
            raise BadInput(
                "--target, --device-memory: bound the list chosen for --batch-trace; pass all "
                "three (and --max-graphs)"
            )
        from nanobench.harness.targets import target_option
        from nanobench.pool_budget.command import device_memory_bytes

        target_option(self.target)
        if self.gpu_memory_utilization <= 0.0:
            raise BadInput(
                f"--gpu-memory-utilization {self.gpu_memory_utilization}: expected a share in (0, 1]"
            )
        return device_memory_bytes(self.device_memory, "cpu")

    def _batches(self) -> tuple[int, ...] | None:
        """--batch-trace read and checked against --max-graphs and --max-batch."""
        from nanobench.harness.errors import BadInput

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


def buckets(
    rows: Rows = BucketsSpec.rows,
    max_batch: MaxBatch = BucketsSpec.max_batch,
    prompt_len: PromptLen = BucketsSpec.prompt_len,
    run_lengths: RunLengths = BucketsSpec.run_lengths,
    width_multiple: WidthMultiple = BucketsSpec.width_multiple,
    max_model_len: MaxModelLen = BucketsSpec.max_model_len,
    block_size: BlockSize = BucketsSpec.block_size,
    capture_rows: CaptureRows = BucketsSpec.capture_rows,
    capture_tokens: CaptureTokens = BucketsSpec.capture_tokens,
    capture_sizes: CaptureSizes = BucketsSpec.capture_sizes,
    width_multiples: WidthMultiples = BucketsSpec.width_multiples,
    kernel: Kernel = BucketsSpec.kernel,
    heads: Heads = BucketsSpec.heads,
    max_shapes: MaxShapes = BucketsSpec.max_shapes,
    max_waste: MaxWaste = BucketsSpec.max_waste,
    batch_trace: BatchTrace = BucketsSpec.batch_trace,
    max_graphs: MaxGraphs = BucketsSpec.max_graphs,
    target: Target = BucketsSpec.target,
    device_memory: DeviceMemory = BucketsSpec.device_memory,
    gpu_memory_utilization: MemoryUtilization = BucketsSpec.gpu_memory_utilization,
    dtype: Dtype = BucketsSpec.dtype,
    out: Out = OUT,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Price a closed decode shape set on the host, per run length and per width multiple.

    Example: nanobench buckets --width-multiple 2048

    Example: nanobench buckets --run-lengths 8,512 --width-multiples 128,2048 --check

    Example: nanobench buckets --kernel triton --capture-sizes vllm --max-batch 64

    Example: nanobench buckets --batch-trace served.csv --max-graphs 8 --max-batch 64
    """
    with run_command(quiet) as status:
        spec = BucketsSpec(
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            run_lengths=tuple(run_lengths),
            width_multiple=width_multiple,
            max_model_len=max_model_len,
            block_size=block_size,
            capture_rows=capture_rows,
            capture_tokens=capture_tokens,
            capture_sizes=capture_sizes,
            width_multiples=None if width_multiples is None else tuple(width_multiples),
            kernel=kernel,
            heads=heads,
            max_shapes=max_shapes,
            max_waste=max_waste,
            batch_trace=batch_trace,
            max_graphs=max_graphs,
            target=target,
            device_memory=device_memory,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype="float32" if dtype == "auto" else dtype,
        ).validate()

        from nanobench.buckets.bench import CaptureRow, RecommendedRow, RunRow, measure
        from nanobench.harness.common import out_dir
        from nanobench.harness.rows import as_dicts, columns

        directory = out_dir(out)
        result = measure(spec, status)
        found = gates(spec, result)

        from dataclasses import asdict

        from reports.buckets import (
            BUCKETS_COLUMNS,
            draw_buckets,
            render_buckets,
            render_short_answer,
            save_buckets_figure,
        )
        from reports.csvio import write_rows

        status("writing the CSV and the diagram")
        # Missing cells as "" rather than None: a None makes pandas turn a column of counts
        # into floats ("8.0" steps), and each table leaves the other's columns empty.
        keys = [*columns(RunRow), *columns(CaptureRow), *columns(RecommendedRow)]
        keys = list(dict.fromkeys(keys))
        csv_rows = [{k: r.get(k, "") for k in keys} for r in result.rows]
        csv_path = write_rows(directory / CSV_NAME, csv_rows, BUCKETS_COLUMNS)
        runs, capture, chosen = (
            as_dicts(result.runs),
            as_dicts(result.capture),
            asdict(result.chosen),
        )
        fig = draw_buckets(
            runs,
            capture,
            [asdict(t) for t in result.traces],
            spec.max_shapes,
            spec.max_waste,
        )
        png_path = save_buckets_figure(fig, directory / PNG_NAME)
        outputs = {"csv": str(csv_path), "png": str(png_path)}

        def render() -> None:
            console = stdout_console()
            if spec.short:
                render_short_answer(
                    console, chosen, found, outputs, kernel=kernel, max_shapes=max_shapes
                )
            else:
                render_buckets(
                    console,
                    runs,
                    capture,
                    found,
                    outputs,
                    kernel=kernel,
                    max_shapes=max_shapes,
                    explicit_len=bool(max_model_len),
                )
            if spec.sizes is not None and not spec.short:
                from reports.capture_sizes import capture_sizes_table

                console.print(capture_sizes_table(result.chosen))
            if result.recommended:
                from reports.capture_sizes import recommended_table

                console.print(recommended_table(as_dicts(result.recommended)))

        code = finish(
            "buckets",
            result.rows,
            found,
            outputs,
            json_mode=json_mode,
            check=check,
            render=render,
        )
    raise typer.Exit(code)


def read_batch_trace(path: str) -> tuple[int, ...]:
    """The `rows` column of a CSV, one served decode step a line: positive ints, at least one."""
    import csv

    from nanobench.harness.errors import BadInput

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


def gates(spec: BucketsSpec, result) -> list[Gate]:
    """Closed runs, plans = arithmetic, the capture budget at the chosen multiple, bounded waste.

    `result` is `buckets_bench.measure`'s (its rows and the per-step traces they came from).
    Every gate goes through `nanobench.harness.common.gate`, so a broken promise is a failed gate (exit
    1 under --check) and never bad input.
    """
    from engine.buckets import check_capture_budget, check_run_closed, check_waste_bounded
    from nanobench.buckets.bench import capture_buckets, check_plans_match_arithmetic, run_buckets

    found: list[Gate] = []
    for row, trace in zip(result.runs, result.traces, strict=True):
        buckets = run_buckets(spec, row.max_model_len)
        found.append(
            gate(
                f"check_run_closed[steps={row.steps}]",
                check_run_closed,
                buckets,
                trace.bucketed_shapes,
            )
        )
        found.append(
            gate(
                f"check_plans_match_arithmetic[steps={row.steps}]",
                check_plans_match_arithmetic,
                row,
            )
        )
    found.append(
        gate(
            f"check_capture_budget[multiple={spec.multiple},kernel={spec.kernel}]",
            check_capture_budget,
            capture_buckets(spec, spec.multiple, spec.width_free),
            spec.max_shapes,
        )
    )
    waste_checks = [(f"steps={r.steps}", r.waste) for r in result.runs]
    waste_checks.append((f"typical,multiple={spec.multiple}", result.chosen.waste))
    for label, share in waste_checks:
        name = f"check_waste_bounded[{label}]"
        if spec.width_free:
            # The window is addressed, not computed: the kernel reads each row to its length,
            # padded rows have length 0, and there is no score rectangle to fill.
            found.append(Gate(name, True, "triton kernel: padded cells are never computed"))
        else:
            found.append(gate(name, check_waste_bounded, share, spec.max_waste))
    return found
