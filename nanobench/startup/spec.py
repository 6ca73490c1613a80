"""What `nanobench startup` is asked for, and what one start's fresh process is handed.

What it is: `StartupSpec` (every option's one default, a `harness.runs.run_spec.MeasuredSpec`:
`checked()` for the rules across options, `before()` --vs's side, `plan` its estimate), `StartJob` (one start: a compile worker's shape plus the start's kind and the artifact
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
from nanobench.harness.runs.change import check_sides
from nanobench.harness.runs.run_spec import MeasuredSpec

KINDS = ("cold", "warm", "hot")  # a run's order: warm and hot read what its cold start left
# What a comparison's --no-more and --no-slower may name here: the counts a start row has where
# more is worse, and the two timings a CI would hold a change to.
GATED_COUNTS = ("graphs", "fx_misses", "aot_misses", "kernels_built")
GATED_TIMINGS = ("ready_s", "compile_s")


@dataclass(frozen=True)
class StartupSpec(MeasuredSpec):
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
    device: str = CompileSpec.device
    dtype: str = CompileSpec.dtype
    pgo: bool = False
    max_warm_s: float = 0.0
    artifacts: str = ""
    cache_dir: str = ""
    timeout: int = CompileSpec.timeout
    target: str = ""
    vs: str = ""  # the before side's target; the after side is --target

    COUNTS = GATED_COUNTS
    TIMINGS = GATED_TIMINGS
    COMPARED_BY = "--vs or --try"
    KNOBBED = "a compiled mode; add dynamic or static to --modes"
    BORROW_WHY = "eager off reads no knob: it starts once, on plain's side"
    OWNS = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE",
            "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO")  # `caches.start_env`  # fmt: skip
    ALONE_ONLY = {
        "artifacts": "--artifacts with {by}: each side's hot start loads its own cold start's "
        "artifacts; drop --artifacts",
        "max_warm_s": "--max-warm-s with {by}: a comparison gates the columns you name; give "
        "--no-slower ready_s",
    }

    def members(self) -> tuple[str, ...]:
        return tuple(self.modes)

    def knob_members(self) -> tuple[str, ...]:
        return tuple(m for m in self.modes if m != "off")

    def before(self) -> StartupSpec | None:
        """--vs's target as the before side."""
        return replace(self, target=self.vs, vs="") if self.vs else None

    def typed_as(self) -> tuple[tuple[str, str], ...]:
        return (("--target", "--vs"),)

    def plan(self, sides, cores: int):
        """The run's estimate (`harness.runs.eta`): every start one after another; a compiled
        mode's cold start compiles cold, its warm and hot starts from the cache; off starts once
        a run; each side's starts."""
        from nanobench.harness.runs.eta import Plan

        kinds = [k for k in self.starts if k != "hot" or self.backend == "inductor"]
        modes = [m for side in sides for m in side.members]
        compiled = len([m for m in modes if m != "off"])
        starts = compiled * len(kinds) + (len(modes) - compiled)
        cold = compiled if "cold" in kinds and self.backend == "inductor" else 0
        warm = compiled * len(kinds) - cold
        return Plan(starts * self.runs, cold * self.runs, warm * self.runs)

    def checked(self) -> StartupSpec:
        """Rules across options (ranges and choices are the options' own); the run's width."""
        # The step's rules are compile's: rows within the batch, the width, the device, modes.
        compiled = self.as_compile().validate()  # and a self-compiled target's default modes
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
        check_sides(self.vs, None, self.target)
        return replace(self, max_model_len=compiled.max_model_len, modes=compiled.modes)

    def as_compile(self) -> CompileSpec:
        """The same step as `compile` would sweep it: its model resolution and worker shape."""
        return CompileSpec(
            **{f: getattr(self, f) for f in SHARED},
            modes=self.modes,
            processes=1,
        )

    def heading(self, sides, dtype: str, rows: list) -> str:
        """The table's and the figure's title: what started, on what, how often."""
        from nanobench.harness.step.targets import BUILTINS
        from reports.style import counted, title

        of = f" of target {self.target}" if self.target else ""
        return title(
            sides.worded(
                f"startup{of}",
                lambda knobs: f"startup{of}: knobs {knobs} against plain torch.compile",
                lambda b: f"startup{of} (after) vs {b.spec.target} (before)",
                f"startup{of}",
            ),
            model=self.model if not self.target or self.target in BUILTINS else None,
            device=self.device,
            dtype=dtype,
            rows=self.rows,
            steps=f"{self.steps} in the first pass, {counted(self.runs, 'run')}",
            backend=self.backend,
            pgo="on" if self.pgo else "off (pinned)",
        )

    def worker(self, model: str = "", dtype: str = "float32") -> WorkerSpec:
        """A compile worker's shape for these starts (`compile.session.build_stepper` reads it)."""
        return self.as_compile().worker(model, dtype)


# What a start shares with a compile sweep, under the same names.
SHARED = ("model", "rows", "max_batch", "prompt_len", "steps", "max_model_len", "block_size",
          "backend", "device", "dtype", "threads", "target", "timeout", "out", "knob")  # fmt: skip


@dataclass(frozen=True)
class StartJob(WorkerSpec):
    """One start in its own process: the worker's shape, the kind, what it loads and saves."""

    kind: str = "cold"
    run: int = 1
    load_artifacts: str = ""  # hot: the artifact bytes to load before anything compiles
    save_artifacts: str = ""  # cold: where to write this start's artifacts for the hot ones
    pgo: bool = StartupSpec.pgo
