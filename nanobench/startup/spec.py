"""What `nanobench startup` is asked for, and what one start's fresh process is handed.

What it is: `StartupSpec` (every option's one default, `validate()` for the rules across
options, and `sides()`: the one plain side, or `--vs`'s before and `--target`'s after), `StartJob` (one start: a compile worker's shape plus the start's kind and the artifact
files it loads or saves; sent as its fields and rebuilt there as `StartJob(**payload)`), and
`KINDS` in the order a run takes them (a warm or hot start needs its run's cold start first).
What it is not: the starts themselves (`startup.session`, `startup.run`) or the command.
Invariant: a default lives once; the spec imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.compile.spec import CompileSpec, WorkerSpec
from nanobench.harness.cli import options as o
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import check_columns, check_sides

KINDS = ("cold", "warm", "hot")  # a run's order: warm and hot read what its cold start left
# What a comparison's --no-more and --no-slower may name here: the counts a start row has where
# more is worse, and the two timings a CI would hold a change to.
GATED_COUNTS = ("graphs", "fx_misses", "aot_misses", "kernels_built")
GATED_TIMINGS = ("ready_s", "compile_s")


@dataclass(frozen=True)
class StartupSpec:
    """The starts as asked for; `max_model_len` 0 is the run's own."""

    model: str = "tiny"
    modes: tuple[str, ...] = o.Names(("off", "dynamic", "static"))
    starts: tuple[str, ...] = o.Names(KINDS)
    runs: int = 2
    rows: int = CompileSpec.rows
    max_batch: int = CompileSpec.max_batch
    prompt_len: int = CompileSpec.prompt_len
    steps: int = 4
    max_model_len: int = CompileSpec.max_model_len
    block_size: int = CompileSpec.block_size
    backend: str = CompileSpec.backend
    device: str = CompileSpec.device
    dtype: str = CompileSpec.dtype
    threads: int = CompileSpec.threads
    pgo: bool = False
    max_warm_s: float = 0.0
    artifacts: str = ""
    cache_dir: str = ""
    timeout: int = CompileSpec.timeout
    out: str = CompileSpec.out
    target: str = ""
    vs: str = ""  # the before side's target; the after side is --target
    no_more: tuple[str, ...] | None = None
    no_slower: tuple[str, ...] | None = None
    margin: float = 0.05
    export_json: str = ""  # also the starts as PyTorch OSS benchmark records (harness.runs.export)

    @property
    def compared(self) -> bool:
        """A before-and-after run: both sides' starts interleaved in one run."""
        return bool(self.vs)

    def sides(self) -> dict[str, StartupSpec]:
        """Each side's spec by its name: "" alone, or the before (--vs) and the after."""
        if not self.compared:
            return {"": self}
        return {"before": replace(self, target=self.vs, vs=""), "after": self}

    def validate(self) -> StartupSpec:
        """Rules across options (ranges and choices are the options' own); the run's width."""
        # The step's rules are compile's: rows within the batch, the width, the device, modes.
        width = self.as_compile().validate().max_model_len
        if self.starts and "cold" not in self.starts and not self.artifacts:
            if "warm" in self.starts:
                raise BadInput(
                    "--starts: a warm start reads the caches its run's cold start filled; "
                    "add cold (--starts cold,warm)"
                )
            raise BadInput(
                "--starts hot without cold: a hot start loads a cold start's artifacts; add "
                "cold, or name a saved artifact file with --artifacts"
            )
        compared_option(self)
        return replace(self, max_model_len=width)

    def as_compile(self) -> CompileSpec:
        """The same step as `compile` would sweep it: its model resolution and worker shape."""
        return CompileSpec(
            **{f: getattr(self, f) for f in SHARED},
            modes=self.modes,
            processes=1,
        )

    def worker(self, model: str = "", dtype: str = "float32") -> WorkerSpec:
        """A compile worker's shape for these starts (`compile.session.build_stepper` reads it)."""
        return self.as_compile().worker(model, dtype)


def compared_option(spec: StartupSpec) -> None:
    """--vs and the comparison's gates, against each other and the options a side owns."""
    check_sides(spec.vs, None, spec.target, bool(spec.no_more or spec.no_slower))
    if spec.vs and spec.artifacts:
        raise BadInput("--artifacts with --vs: each side's hot start loads its own cold start's "
                       "artifacts; drop --artifacts")  # fmt: skip
    if spec.vs and spec.max_warm_s:
        raise BadInput("--max-warm-s with --vs: a comparison gates the columns you name; give "
                       "--no-slower ready_s")  # fmt: skip
    check_columns("--no-more", spec.no_more, GATED_COUNTS)
    check_columns("--no-slower", spec.no_slower, GATED_TIMINGS)


# What a start shares with a compile sweep, under the same names.
SHARED = ("model", "rows", "max_batch", "prompt_len", "steps", "max_model_len", "block_size",
          "backend", "device", "dtype", "threads", "target", "timeout", "out")  # fmt: skip


@dataclass(frozen=True)
class StartJob(WorkerSpec):
    """One start in its own process: the worker's shape, the kind, what it loads and saves."""

    kind: str = "cold"
    run: int = 1
    load_artifacts: str = ""  # hot: the artifact bytes to load before anything compiles
    save_artifacts: str = ""  # cold: where to write this start's artifacts for the hot ones
    pgo: bool = StartupSpec.pgo
