"""What `nanobench compile` is asked for, and what each mode's worker is handed.

What it is: `CompileSpec` (every option's one default, and `validate()` for the rules across
options) and `WorkerSpec` (the frozen spec a mode's worker process reads: the shape, the cache,
the backend, the resolved model and dtype; sent as its fields and rebuilt there as
`WorkerSpec(**payload)`), with `CompileSpec.worker()` the one place that builds one.
What it is not: the measurement (`compile.bench`, `compile.session`) or the command.
Invariant: a default lives once: WorkerSpec's come from CompileSpec's, so the worker never
repeats one; the spec imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.buckets import DecodeBuckets
from nanobench.compile.reduce_overhead import check_modes
from nanobench.cost.buckets import open_shapes
from nanobench.harness.cli import options as o
from nanobench.harness.cli.validate import device_option, positive
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import check_columns, check_sides
from nanobench.harness.step.knobs import PLAIN, check_backend, parse_side
from nanobench.harness.step.knobs import check_sides as check_knob_sides


@dataclass(frozen=True)
class CompileSpec:
    """The sweep as asked for: each option's one default; `max_model_len` 0 is the run's."""

    model: str = "tiny"
    modes: tuple[str, ...] = o.Names(("off", "dynamic", "static"))
    rows: int = 4
    max_batch: int = 8
    prompt_len: int = 16
    steps: int = 16
    rounds: int = 3
    max_rounds: int = 30
    processes: int = 3  # fresh workers per mode: docs/measuring.md#what-a-process-costs
    history: bool = (
        True  # earlier runs' spread on this machine (harness.statistics.history); a plain run
    )
    rel_ci: float = 0.03
    budget_s: float = 120.0
    bucketed: bool = False
    width_multiple: int = 128
    max_model_len: int = 2048
    block_size: int = 16
    cache: str = "cold"
    backend: str = "inductor"
    path: str = "planned"
    device: str = "cpu"
    dtype: str = "auto"
    threads: int = 0
    horizon: int = 10000
    timeout: int = 600
    out: str = "nanobench-out"
    target: str = ""
    trace: bool = False
    vs: str = ""  # the before side's target; the after side is --target
    vs_path: str | None = None  # the before side: the engine on this path; after: --path
    no_more: tuple[str, ...] | None = None
    no_slower: tuple[str, ...] | None = None
    margin: float = 0.05
    export_json: str = ""
    tries: tuple[str, ...] = ()  # --try: each a side measured against plain (harness.step.knobs)
    knob: str = ""  # this side's knob, set by `sides()` alone ("" plain)

    @property
    def compared(self) -> bool:
        """A run of sides in one fleet: before and after, or plain and each knob."""
        return bool(self.vs or self.vs_path or self.tries)

    def sides(self) -> dict[str, CompileSpec]:
        """Each side's sweep by its name: "" alone, the before (--vs, --vs-path) and after, or
        plain and each --try knob (its compiled modes only: eager `off` reads no knob, so
        a knob side's speedup is over plain's `off`, `MeasuredRun.derived`)."""
        if self.tries:
            compiled = tuple(m for m in self.modes if m != "off")
            knobs = {k: replace(self, knob=k, modes=compiled) for k in self.tries}
            return {PLAIN: self, **knobs}
        if not self.compared:
            return {"": self}
        before = replace(self, target=self.vs) if self.vs else replace(self, path=self.vs_path)
        return {"before": replace(before, vs="", vs_path=None), "after": self}

    def pairs(self) -> list[tuple[str, str]]:
        """The sides compared, (base, other): (before, after), or (plain, knob) per knob."""
        if self.tries:
            return [(PLAIN, k) for k in self.tries]
        return [("before", "after")] if self.compared else []

    def members(self) -> int:
        """Members of the whole run: every side's modes."""
        return sum(len(s.modes) for s in self.sides().values())

    def validate(self) -> CompileSpec:
        """Rules across options (ranges and choices are the options' own); the run's width."""
        # numpy (through the statistics) loads when the command runs, not at CLI start.
        from nanobench.harness.workers.rounds import round_plan

        round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)
        positive("--processes", self.processes)
        if self.rows > self.max_batch:
            raise BadInput(f"--rows {self.rows}: above --max-batch {self.max_batch}")
        width = self.max_model_len or self.prompt_len + self.steps
        if self.prompt_len + self.steps > width:
            raise BadInput(
                f"--prompt-len {self.prompt_len} + --steps {self.steps} exceed "
                f"--max-model-len {width}"
            )
        if self.path == "unplanned" and self.bucketed:
            raise BadInput("--path unplanned cannot be --bucketed: the unplanned path has no plan")
        check_modes(list(self.modes), self.device, self.backend)
        if "reduce-overhead" in self.modes and not self.target:
            # the engine compiles off, dynamic or static; it records its CUDA graphs itself
            raise BadInput("--modes reduce-overhead: a --target's mode; the engine records its "
                           "own CUDA graphs (nanobench capture, decode --systems engine-captured)")  # fmt: skip
        device_option(self.device)
        if self.target and (self.bucketed or self.path != "planned"):
            raise BadInput("--target: --bucketed and --path apply to the engine, not to a target")
        compared_option(self)
        return replace(self, max_model_len=width)

    def worker(self, model: str = "", dtype: str = "float32", trace_dir: str = "") -> WorkerSpec:
        """The spec a mode's worker reads: this sweep's shape, resolved model and dtype."""
        return WorkerSpec(
            model=str(model),
            rows=self.rows,
            max_batch=self.max_batch,
            prompt_len=self.prompt_len,
            steps=self.steps,
            bucketed=self.bucketed,
            width_multiple=self.width_multiple,
            max_model_len=self.max_model_len,
            block_size=self.block_size,
            cache=self.cache,
            backend=self.backend,
            device=self.device,
            dtype=dtype,
            decode_path=self.path,
            threads=self.threads,
            target=self.target,
            trace=trace_dir,
            knob=self.knob,
        )


COUNTS = ("graphs", "breaks", "break_sites", "builds", "recompiles", "fell_back", "shapes")
TIMINGS = ("step_ms", "speedup")  # and --no-slower: a cold compile is one sample a side


def compared_option(spec: CompileSpec) -> None:
    """--vs, --vs-path and the comparison's gates, checked against each other."""
    check_sides(spec.vs, spec.vs_path, spec.target, bool(spec.no_more or spec.no_slower),
                bool(spec.tries))  # fmt: skip
    if spec.tries:
        tried_option(spec)
    if spec.tries and "speedup" in (spec.no_slower or ()):
        raise BadInput("--no-slower speedup with --try: a knob's speedup change is its step "
                       "time's, inverted (both over plain's off); use --no-slower step_ms")  # fmt: skip
    if spec.compared and "off" not in spec.modes and "speedup" in (spec.no_slower or ()):
        raise BadInput("--no-slower speedup: a speedup is against off; add off to --modes")
    check_columns("--no-more", spec.no_more, COUNTS)
    check_columns("--no-slower", spec.no_slower, TIMINGS)


def tried_option(spec: CompileSpec) -> None:
    """--try against the run: one comparison at a time, a compiled mode to turn, a backend that
    reads the knob (an Inductor setting under --backend eager would measure nothing)."""
    check_knob_sides(spec.tries)
    if spec.vs or spec.vs_path:
        raise BadInput("--try with --vs or --vs-path: one comparison a run; try the knobs on "
                       "one side")  # fmt: skip
    if all(m == "off" for m in spec.modes):
        raise BadInput("--try: knobs act on a compiled mode; add dynamic or static to --modes")
    check_backend(spec.tries, spec.backend)
    filtered = [k for k in spec.tries if any(kn.guard_filter for kn in parse_side(k))]
    if filtered and "reduce-overhead" in spec.modes:
        # torch.compile refuses mode= beside options=, and a guard filter travels in options
        raise BadInput(f"--try {filtered[0]} with --modes reduce-overhead: torch.compile takes "
                       "a mode or options, not both, and a guard filter is an option")  # fmt: skip


@dataclass(frozen=True)
class WorkerSpec:
    """One mode's worker: what it builds, steps and times. Defaults are CompileSpec's."""

    model: str  # a checkpoint directory or preset name, resolved by the command
    mode: str = "off"
    rows: int = CompileSpec.rows
    max_batch: int = CompileSpec.max_batch
    prompt_len: int = CompileSpec.prompt_len
    steps: int = CompileSpec.steps
    bucketed: bool = CompileSpec.bucketed
    width_multiple: int = CompileSpec.width_multiple
    max_model_len: int = CompileSpec.max_model_len
    block_size: int = CompileSpec.block_size
    cache: str = CompileSpec.cache
    backend: str = CompileSpec.backend
    device: str = CompileSpec.device
    dtype: str = "float32"  # what --dtype auto is on a CPU; the command resolves auto first
    seed: int = 0
    decode_path: str = CompileSpec.path
    threads: int = CompileSpec.threads
    target: str = CompileSpec.target
    trace: str = ""  # the TORCH_TRACE root ("" untraced): each mode traces under root/mode
    process: int = 1  # which of the mode's workers: a later one skips what only the row needs
    knob: str = ""  # the side's --try knob, applied for the whole process ("" plain)

    def step_shapes(self) -> list[tuple[int, int]]:
        """(rows, width) each decode step presents: open, or through the bucket ladder."""
        shapes = open_shapes(self.rows, self.prompt_len, self.steps)
        if not self.bucketed:
            return shapes
        buckets = DecodeBuckets(self.max_batch, self.max_model_len, self.width_multiple)
        return [buckets.shape_for(r, w) for r, w in shapes]
