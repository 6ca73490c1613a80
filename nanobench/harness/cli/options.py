"""The command line's vocabulary: every option every command takes, declared once.

What it is: `typing.Annotated` aliases (`Rows`, `Device`, `RunLengths`, `JsonOpt`, ...) that a
command puts in its signature with its default from its spec (`rows: Rows = CompileSpec.rows`).
Ranges and choices are declared here, so Typer itself refuses `--rows 0` or `--device tpu` with
one line and exit 2; the choices come from the engine's and the harness's own constants.
List-valued options have plural names and take comma-separated values (`--run-lengths 8,64`),
parsed into `Ints` / `Names` tuples.
What it is not: validation across options (`--rows` above `--max-batch`): that is each
command's spec `validate()`.
Invariant: one name, one meaning and one type in every command that takes it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from engine.config import CAPTURE_OUTPUTS, DECODE_PATHS, DTYPES, KERNELS
from nanobench.harness.cli.choices import (
    BACKENDS,
    CACHES,
    COUNT_COLUMNS,
    DEVICES,
    HF_ATTENTION,
    LAUNCHERS,
    MODES,
    REDUCE_OVERHEAD,
    SYSTEMS,
    TIMING_COLUMNS,
)
from nanobench.harness.step.self_compiled import VLLM_MODES


class Ints(tuple):
    """Comma-separated positive integers, parsed: `8,64,128` -> (8, 64, 128)."""


class Names(tuple):
    """Comma-separated names from a fixed set, parsed and checked: `off,static`."""


def parse_ints(text: str | Ints) -> Ints:
    if isinstance(text, Ints):
        return text
    try:
        values = Ints(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        values = Ints()
    if not values or min(values) < 1:
        raise typer.BadParameter(f"{text!r}: expected comma-separated positive integers")
    return values


def names_of(allowed: tuple[str, ...]):
    """A parser for a comma-separated subset of `allowed`, each named once, in the order given."""

    def parse(text: str | Names) -> Names:
        if isinstance(text, Names):
            return text
        values = Names(x.strip() for x in str(text).split(",") if x.strip())
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            what = repr(bad[0]) if bad else repr(text)
            raise typer.BadParameter(f"{what}: expected some of {', '.join(allowed)}")
        if len(set(values)) != len(values):
            raise typer.BadParameter(f"{text!r}: a name is given twice")
        return values

    return parse


def parse_listed(text: str | Names) -> Names:
    """Comma-separated free names (each command's spec checks them): `cpp-wrapper,freezing`."""
    if isinstance(text, tuple | list):  # the default, or already parsed
        return Names(text)
    return Names(x.strip() for x in str(text).split(",") if x.strip())


class Pairs(tuple):
    """Comma-separated KEY=VALUE settings, parsed: `A=1,B=x` -> (("A", "1"), ("B", "x"))."""


def parse_pairs(text: str | Pairs) -> Pairs:
    """KEY=VALUE[,KEY=VALUE]: each KEY a variable's name, given once; a VALUE may be empty."""
    if isinstance(text, tuple | list):  # the default, or already parsed
        return Pairs(text)
    pairs = []
    for item in (x.strip() for x in str(text).split(",") if x.strip()):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not key.strip().replace("_", "").isalnum():
            raise typer.BadParameter(f"{item!r}: expected KEY=VALUE (a variable's name, then =)")
        pairs.append((key.strip(), value))
    keys = [k for k, _ in pairs]
    if not pairs or len(set(keys)) != len(keys):
        raise typer.BadParameter(f"{text!r}: expected KEY=VALUE[,KEY=VALUE], each KEY once")
    return Pairs(pairs)


def _ints(help_text: str, *decls: str):
    return typer.Option(*decls, parser=parse_ints, metavar="N,N,...", help=help_text)


def _names(allowed: tuple[str, ...], help_text: str):
    return typer.Option(parser=names_of(allowed), metavar=",".join(allowed), help=help_text)


# -- the model and where it runs ----------------------------------------------------------------
Model = Annotated[
    str,
    typer.Option(help="A preset (tiny, llama-3.2-1b, smollm2-135m), a checkpoint dir or a .gguf."),
]
Device = Annotated[Literal[DEVICES], typer.Option(help="Where the model runs.")]
Dtype = Annotated[
    Literal[("auto", *DTYPES)],
    typer.Option(help="Weights' dtype; auto: the checkpoint's on CUDA, float32 on CPU."),
]
Kernel = Annotated[
    Literal[(*KERNELS, "auto")],
    typer.Option(help="Attention read: reference (width is a tensor axis), triton, auto."),
]
Kernels = Annotated[Names, _names(KERNELS, "Attention reads to price, comma-separated.")]
CaptureOutput = Annotated[
    Literal[CAPTURE_OUTPUTS],
    typer.Option(
        help="shared: every graph writes one logits buffer (the engine's capture); "
        "per-graph: each graph keeps its own (a plain torch.cuda.graph per shape)."
    ),
]
Target = Annotated[
    str,
    typer.Option(help="Your decode step: module:factory, file.py:factory, hf-static, hf-dynamic."),
]
Vs = Annotated[
    str,
    typer.Option(
        "--vs",
        help="The before side, in the same run: a target spec, as --target names the after.",
    ),
]
VsModel = Annotated[
    str,
    typer.Option(
        "--vs-model", help="The before side, in the same run: this model (after: --model)."
    ),
]
VsDtype = Annotated[
    Literal[("auto", *DTYPES)] | None,
    typer.Option(
        "--vs-dtype", help="The before side, in the same run: this dtype (after: --dtype)."
    ),
]
Try = Annotated[
    Names,
    typer.Option(
        "--try",
        parser=parse_listed,
        metavar="KNOB,KNOB+KNOB,...",
        help="Knobs measured against plain torch.compile in the same run, each a side: "
        "cpp-wrapper, guard-filter, free-tensors, freezing, max-autotune, coordinate-descent, "
        "no-automatic-dynamic, specialize-float, inductor.KEY=VALUE, dynamo.KEY=VALUE "
        "(docs/knobs.md).",
    ),
]
Python = Annotated[
    str,
    typer.Option(
        "--python", metavar="PATH",
        help="Run every worker under this interpreter (it needs this nanobench: the run says "
        "how to install it there).",
    ),
]  # fmt: skip
VsPython = Annotated[
    str,
    typer.Option(
        "--vs-python", metavar="PATH",
        help="The after side, in the same run: the same step under this interpreter (before: "
        "--python's, or this one).",
    ),
]  # fmt: skip
VsEnv = Annotated[
    Pairs,
    typer.Option(
        "--vs-env", parser=parse_pairs, metavar="KEY=VALUE,...",
        help="The after side, in the same run: the same step with these variables set for its "
        "workers (ATEN_CPU_CAPABILITY=default, OMP_NUM_THREADS=1, LD_PRELOAD=...).",
    ),
]  # fmt: skip
VsPath = Annotated[
    Literal[DECODE_PATHS] | None,
    typer.Option("--vs-path", help="The before side: the engine on this --path (after: --path)."),
]

# -- the batch, the cache and the shape set -----------------------------------------------------
Rows = Annotated[int, typer.Option(min=1, help="Rows (sequences) decoded together.")]
MaxBatch = Annotated[int, typer.Option(min=1, help="Rows the cache holds: the row ladder's top.")]
PromptLen = Annotated[int, typer.Option(min=1, help="Prompt tokens per row.")]
Steps = Annotated[int, typer.Option(min=1, help="Decode steps (tokens per row) in a run.")]
Step = Annotated[
    int, typer.Option(min=0, help="With --target: the decode step to explain (0-based).")
]
RunLengths = Annotated[Ints, _ints("Run lengths in decode steps, comma-separated.")]
MaxModelLen = Annotated[
    int,
    typer.Option(min=0, help="Tokens per row in the cache, the slot table's width (0: the run's)."),
]
BlockSize = Annotated[int, typer.Option(min=1, help="Tokens per KV block.")]
WidthMultiple = Annotated[int, typer.Option(min=1, help="Width bucket multiple.")]
WidthMultiples = Annotated[Ints, _ints("Width bucket multiples, comma-separated.")]
CaptureSizes = Annotated[
    str | None,
    typer.Option(
        metavar="vllm|sglang|N,N,...",
        help="Capture list rows: a list, or vllm / sglang (that server's default for --max-batch).",
    ),
]
Heads = Annotated[
    int, typer.Option(min=0, help="Query heads the score rectangle is priced at (0: the model's).")
]
Layers = Annotated[Ints | None, _ints("Depths to rebuild the model at (default: its own).")]
Bucketed = Annotated[bool, typer.Option(help="Close the shape set (pad rows and width).")]
Prefill = Annotated[bool, typer.Option("--prefill", help="Explain the prefill, not a decode step.")]
UpFront = Annotated[
    bool, typer.Option("--up-front/--lazy", help="Record the whole list before the run, or lazily.")
]
CaptureRows = Annotated[int, typer.Option(min=1, help="Rows of the serving config priced.")]
CaptureTokens = Annotated[
    int, typer.Option(min=1, help="Tokens per row (max_model_len) of the serving config priced.")
]
MaxShapes = Annotated[int, typer.Option(min=1, help="Capture budget: most shapes a list may hold.")]
MaxWaste = Annotated[
    float, typer.Option(min=0.0, max=1.0, help="Largest share of bucketed cells that is padding.")
]
BatchTrace = Annotated[
    str | None,
    typer.Option(
        metavar="FILE.csv",
        help="Batch sizes served: a CSV with a rows column, one decode step a line.",
    ),
]
MaxGraphs = Annotated[
    int | None,
    typer.Option(min=1, help="With --batch-trace: most graphs the recommended list may hold."),
]
DeviceMemory = Annotated[
    str, typer.Option(help="Device bytes (80GiB, 24GB, ...) or probe (free memory, CUDA only).")
]
MemoryUtilization = Annotated[
    float,
    typer.Option(
        "--gpu-memory-utilization", min=0.0, max=1.0, help="Share of the device the engine may use."
    ),
]

# -- how it is measured -------------------------------------------------------------------------
Threads = Annotated[
    int,
    typer.Option(
        min=0, help="torch threads in every process that runs the step (0: torch's default)."
    ),
]
Timeout = Annotated[int, typer.Option(min=1, help="Seconds before a worker is killed.")]
Backend = Annotated[Literal[BACKENDS], typer.Option(help="torch.compile backend.")]
Modes = Annotated[
    Names,
    _names(
        (*MODES, REDUCE_OVERHEAD, *VLLM_MODES),
        "Compile modes, each in its own fresh process (--target vllm: off and vLLM's own).",
    ),
]
Systems = Annotated[Names, _names(SYSTEMS, "Systems compared, each in its own fresh process.")]
DecodePath = Annotated[
    Literal[DECODE_PATHS],
    typer.Option("--path", help="planned (addressing on the host) | unplanned (inside)."),
]
Cache = Annotated[
    Literal[CACHES],
    typer.Option(help="cold: a fresh Inductor cache per mode; warm: one shared, keyed cache."),
]
HfAttention = Annotated[Literal[HF_ATTENTION], typer.Option(help="transformers' attention.")]
Horizon = Annotated[
    int, typer.Option(min=1, help="Decode steps a served process runs: the amortisation horizon.")
]
Rounds = Annotated[int, typer.Option(min=1, help="Interleaved rounds at least.")]
Processes = Annotated[
    int,
    typer.Option(
        min=1, help="Fresh worker processes per mode or system; its rounds are dealt over them."
    ),
]
MaxRounds = Annotated[int, typer.Option(min=1, help="Interleaved rounds at most.")]
History = Annotated[
    bool,
    typer.Option(
        "--history/--no-history",
        help="Lend each ratio the spread of its earlier runs on this machine, and record this one.",
    ),
]
RelCi = Annotated[
    float, typer.Option(min=0.0, help="Stop once every ratio's 95% interval is this tight.")
]
BudgetS = Annotated[float, typer.Option(min=0.0, help="Stop adding rounds after these seconds.")]
Trace = Annotated[bool, typer.Option("--trace", help="TORCH_TRACE per worker; tlparse if there.")]
Launcher = Annotated[
    Literal[LAUNCHERS], typer.Option(help="local (this machine) | ray (a Ray cluster).")
]
Jobs = Annotated[
    int, typer.Option(min=1, help="Arithmetic points run at once by local; timed ones: 1.")
]
Address = Annotated[
    str | None, typer.Option(help="Ray cluster address (auto, HEAD:6379); none: start one.")
]
NumCpus = Annotated[
    int, typer.Option(min=0, help="CPUs of a local Ray cluster (0: this machine's).")
]
Resources = Annotated[
    str, typer.Option(help='Ray resources each point asks for, as JSON: {"GPU": 1}.')
]
Redo = Annotated[bool, typer.Option("--redo", help="Run finished points again.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="List the points; run nothing.")]

# -- startup ------------------------------------------------------------------------------------
Starts = Annotated[
    Names,
    _names(
        ("cold", "warm", "hot"),
        "Kinds of start: cold (every cache empty), warm (the caches a cold start filled), hot "
        "(empty, the cold start's cache artifacts loaded first).",
    ),
]
Runs = Annotated[
    int, typer.Option(min=1, help="Starts of each kind per mode (intervals over them).")
]
Pgo = Annotated[
    bool,
    typer.Option("--pgo", help="Let dynamo's automatic-dynamic PGO state carry between starts."),
]
MaxWarmS = Annotated[
    float,
    typer.Option(min=0.0, help="Gate: each mode's warm start ready under these seconds (0: none)."),
]
Artifacts = Annotated[
    str, typer.Option(help="Hot starts load this saved torch.compiler cache-artifact file instead.")
]
CacheDir = Annotated[
    str,
    typer.Option(help="Keep the starts' caches under this directory (default: a temporary one)."),
]

# -- what every command prints ------------------------------------------------------------------
Out = Annotated[str, typer.Option(help="Directory for the CSV, the diagram and the env record.")]
NoMore = Annotated[
    Names | None,
    typer.Option(
        parser=names_of(COUNT_COLUMNS),
        metavar=",".join(COUNT_COLUMNS),
        help="With --vs or --try and --check: fail when the after side (a knob) has more of these.",
    ),
]
NoSlower = Annotated[
    Names | None,
    typer.Option(
        parser=names_of(TIMING_COLUMNS),
        metavar=",".join(TIMING_COLUMNS),
        help="With --vs or --try and --check: fail when the after side (a knob) is decided "
        "slower in these.",
    ),
]
Margin = Annotated[
    float,
    typer.Option(
        min=0.0,
        max=0.5,
        help="--no-slower passes once the after side is known no more than this much slower.",
    ),
]
ProfiledPasses = Annotated[
    int,
    typer.Option(
        "--passes", min=1, help="Pairs of steady passes after warm-up: one profiled, one not."
    ),
]
Top = Annotated[int, typer.Option(min=1, help="Kernels shown per mode (the CSV has all).")]
MaxOverheadShare = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        help="--check: each compiled mode's host work (guards, wrapper and forward Python, the "
        "step's host code) at most this share of its step.",
    ),
]
ExportJson = Annotated[
    str,
    typer.Option(
        "--export-json",
        metavar="FILE",
        help="Also write the run as PyTorch OSS benchmark database records (one per metric).",
    ),
]
OldRun = Annotated[
    str,
    typer.Argument(
        help="The before run: a compile, explain or decode --out directory, or --json file."
    ),
]
NewRun = Annotated[str, typer.Argument(help="The after run, of the same command.")]
HistoryKey = Annotated[
    str | None,
    typer.Argument(metavar="KEY", help="One key (its first digits will do): that key's every run."),
]
HistoryOf = Annotated[
    str | None,
    typer.Option("--of", metavar="OUT", help="A saved compile or decode --out folder: "
                 "which earlier runs its intervals read, and whether they were lent."),
]  # fmt: skip
HistoryTarget = Annotated[
    str | None,
    typer.Option("--target", help="Only the keys of this target, as the run named it."),
]
ClearOpt = Annotated[
    bool, typer.Option("--clear", help="Remove the selected keys' runs: a KEY, --target or --all.")
]
AllOpt = Annotated[bool, typer.Option("--all", help="With --clear: every key on this machine.")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout instead of tables.")
]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Exit 1 when a gate fails, 3 when one can't tell.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress display on stderr.")]

# -- a capture list's startup seconds (buckets, pool-budget) ------------------------------------
RecordSPerGraph = Annotated[
    float | None,
    typer.Option(
        help="Seconds to record one graph, as measured (capture's record_s_per_graph); "
        "unset: the row's model (docs/capture-lists.md)."
    ),
]
