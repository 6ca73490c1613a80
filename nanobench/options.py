"""The command line's vocabulary: every option every command takes, declared once.

What it is: `typing.Annotated` aliases (`Rows`, `Device`, `RunLengths`, `JsonOpt`, ...) that a
command puts in its signature with its own default (`rows: Rows = 4`). Ranges and choices are
declared here, so Typer itself refuses `--rows 0` or `--device tpu` with one line and exit 2;
the choices come from the engine's and the harness's own constants. List-valued options have
plural names and take comma-separated values (`--run-lengths 8,64,128`).
What it is not: validation across options (`--rows` above `--max-batch`): that is each
command's spec `validate()`.
Invariant: one name, one meaning and one type in every command that takes it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from engine.config import DTYPES, KERNELS

DEVICES = ("cpu", "cuda")
BACKENDS = ("inductor", "aot_eager", "eager")
COMPILE_MODES = ("off", "dynamic", "static")
DECODE_PATHS = ("planned", "unplanned")
CACHES = ("cold", "warm")
HF_ATTENTION = ("sdpa", "eager")


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
    """A parser for a comma-separated subset of `allowed`, in the order given."""

    def parse(text: str | Names) -> Names:
        if isinstance(text, Names):
            return text
        values = Names(x.strip() for x in str(text).split(",") if x.strip())
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            what = repr(bad[0]) if bad else repr(text)
            raise typer.BadParameter(f"{what}: expected some of {', '.join(allowed)}")
        return values

    return parse


def _ints(help_text: str):
    return typer.Option(parser=parse_ints, metavar="N,N,...", help=help_text)


def _names(allowed: tuple[str, ...], help_text: str):
    return typer.Option(parser=names_of(allowed), metavar=",".join(allowed), help=help_text)


# -- the model and where it runs ----------------------------------------------------------------
Model = Annotated[
    str,
    typer.Option(help="A preset (tiny, llama-3.2-1b, ...), a checkpoint directory or a GGUF file."),
]
Device = Annotated[Literal[DEVICES], typer.Option(help="Where the model runs.")]
Dtype = Annotated[Literal[DTYPES], typer.Option(help="Weights and activations dtype.")]
Kernel = Annotated[
    Literal[KERNELS],
    typer.Option(help="Attention read: reference (width is a tensor axis) or triton (no width)."),
]
Kernels = Annotated[Names, _names(KERNELS, "Attention reads to price, comma-separated.")]

# -- the batch and the cache --------------------------------------------------------------------
Rows = Annotated[int, typer.Option(min=1, help="Rows (sequences) decoded together.")]
MaxBatch = Annotated[int, typer.Option(min=1, help="Rows the cache holds: the row ladder's top.")]
PromptLen = Annotated[int, typer.Option(min=1, help="Prompt tokens per row.")]
Steps = Annotated[int, typer.Option(min=1, help="Decode steps (tokens per row) measured.")]
RunLengths = Annotated[Ints, _ints("Run lengths in decode steps, comma-separated.")]
MaxModelLen = Annotated[
    int,
    typer.Option(min=0, help="Tokens per row in the cache, the slot table's width (0: the run's)."),
]
BlockSize = Annotated[int, typer.Option(min=1, help="Tokens per KV block.")]
WidthMultiple = Annotated[int, typer.Option(min=1, help="Width bucket multiple.")]
WidthMultiples = Annotated[Ints, _ints("Width bucket multiples, comma-separated.")]
Heads = Annotated[
    int, typer.Option(min=0, help="Query heads the score rectangle is priced at (0: the model's).")
]

# -- how it is measured -------------------------------------------------------------------------
Threads = Annotated[
    int, typer.Option(min=0, help="torch threads in every worker (0: torch's default).")
]
Timeout = Annotated[int, typer.Option(min=1, help="Seconds before a worker is killed.")]
Backend = Annotated[Literal[BACKENDS], typer.Option(help="torch.compile backend.")]
Modes = Annotated[Names, _names(COMPILE_MODES, "Compile modes, each in a fresh process.")]
DecodePath = Annotated[
    Literal[DECODE_PATHS],
    typer.Option("--path", help="planned (addressing on the host) | unplanned (inside)."),
]
Cache = Annotated[
    Literal[CACHES],
    typer.Option(help="cold: a fresh Inductor cache per mode; warm: one shared, keyed cache."),
]

# -- what every command prints ------------------------------------------------------------------
Out = Annotated[str, typer.Option(help="Directory for the CSV and the diagram.")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout instead of tables.")
]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="Exit 1 when a gate fails (see README: exit codes).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress display on stderr.")]
