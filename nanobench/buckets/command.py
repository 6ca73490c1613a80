"""`nanobench buckets` (alias `bucketbench`): price a closed decode shape set before capturing.

What it is: the command: its options (each defaulting to `BucketsSpec`'s, `buckets/spec.py`),
validated and handed to `buckets/run.py`, which runs `nanobench.buckets.bench` on the host (a real cache and real
plans, no weights, no compiler), prints table 1 (per run length) and table 2 (the capture list
per width multiple, both kernels), with `--batch-trace FILE --max-graphs K` table 3 (the capture
list chosen for the served trace, beside vLLM's and SGLang's priced on it); each list's
startup seconds (its graphs x one graph's record seconds, `--record-s-per-graph` or the CUDA
model the row names) sit beside its memory; it writes
`<out>/buckets.csv` and
`<out>/bucketed-decode-shape.png`, and turns the gates (`buckets/gates.py`) into an exit status
under `--check`.
What it is not: the measurement (`nanobench.buckets.bench`) or the formatting (`reports.buckets`).
Invariant: a gate failure is exit 1 under --check and never exit 2; bad input leaves the out
directory untouched.
"""

from __future__ import annotations

import typer

from nanobench.buckets.spec import OUT, BucketsSpec
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.options import (
    BatchTrace,
    BlockSize,
    CaptureRows,
    CaptureSizes,
    CaptureTokens,
    CheckOpt,
    DeviceMemory,
    Dtype,
    Heads,
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
    RecordSPerGraph,
    Rows,
    RunLengths,
    Target,
    WidthMultiple,
    WidthMultiples,
)
from nanobench.harness.cli.registry import COUNTED, Command
from nanobench.harness.cli.validate import out_dir_tried


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
    record_s_per_graph: RecordSPerGraph = BucketsSpec.record_s_per_graph,
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

    Example: nanobench buckets --width-multiples 512,2048 --record-s-per-graph 0.05
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
            record_s_per_graph=record_s_per_graph,
        ).validate()
        out_dir_tried(out)  # before torch loads
        # Heavy on purpose: the engine's cache and the reports load when the command runs.
        from nanobench.buckets.run import run_buckets

        code = run_buckets(spec, out, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


COMMAND = Command("buckets", buckets, ("bucketbench",), "docs/capture-lists.md", COUNTED)
