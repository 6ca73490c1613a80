"""What `nanobench compile` is asked for, and what each mode's worker is handed.

What it is: `CompileSpec` (every option's one default, a `harness.runs.run_spec.MeasuredSpec`:
`checked()` for compile's rules across options, what its sides are made of, `plan` for its
estimate) and `WorkerSpec` (the frozen spec a mode's worker process reads: the shape, the cache,
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
from nanobench.harness.runs.change import check_sides
from nanobench.harness.runs.run_spec import MeasuredSpec
from nanobench.harness.step.knobs import parse_side
from nanobench.harness.step.self_compiled import SELF_COMPILED, target_modes, vllm_reachable


@dataclass(frozen=True)
class CompileSpec(MeasuredSpec):
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
    history: bool = True  # earlier runs' spread on this machine (harness.statistics.history)
    rel_ci: float = 0.03
    budget_s: float = 120.0
    bucketed: bool = False
    width_multiple: int = 128
    max_model_len: int = 2048
    block_size: int = 16
    cache: str = "cold"
    path: str = "planned"
    device: str = "cpu"
    dtype: str = "auto"
    horizon: int = 10000
    timeout: int = 600
    target: str = ""
    trace: bool = False
    vs: str = ""  # the before side's target; the after side is --target
    vs_path: str | None = None  # the before side: the engine on this path; after: --path

    COUNTS = ("graphs", "breaks", "break_sites", "builds", "recompiles", "fell_back", "shapes")
    TIMINGS = ("step_ms", "speedup")  # and --no-slower: a cold compile is one sample a side
    COMPARED_BY = "--vs or --vs-path or --try"
    BEFORE_BY = "--vs or --vs-path"
    KNOBBED = "a compiled mode; add dynamic or static to --modes"
    BORROW_WHY = "eager off reads no knob: a knob side's speedup and breakeven are over plain's"
    OWNS = ("TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO", "TORCH_TRACE")  # `bench.cache_env`, --trace
    KNOB_UNGATED = {
        "speedup": "--no-slower speedup with --try: a knob's speedup change is its step time's, "
        "inverted (both over plain's off); use --no-slower step_ms"
    }

    def members(self) -> tuple[str, ...]:
        return tuple(self.modes)

    def knob_members(self) -> tuple[str, ...]:
        return tuple(m for m in self.modes if m != "off")

    def before(self) -> CompileSpec | None:
        """--vs's target, or the engine on --vs-path, as the before side."""
        if self.vs:
            return replace(self, target=self.vs, vs="", vs_path=None)
        if self.vs_path:
            return replace(self, path=self.vs_path, vs="", vs_path=None)
        return None

    def typed_as(self) -> tuple[tuple[str, str], ...]:
        return (("--target", "--vs"),) if self.vs else (("--path", "--vs-path"),)

    def plan(self, sides, cores: int):
        """The run's estimate (`harness.runs.eta`): each member's first worker alone, then
        --processes - 1 more each side by side; every side's own modes."""
        from nanobench.harness.runs.eta import Plan

        planned = sides.planned()
        compiled = len([m for m in planned if m.name != "off"])
        cold = compiled if self.cache == "cold" and self.backend == "inductor" else 0
        later = len(planned) * (min(self.processes, self.max_rounds) - 1)
        return Plan(len(planned), cold, compiled - cold, later, cores, len(planned), self.steps,
                    self.max_rounds, self.budget_s)  # fmt: skip

    def checked(self) -> CompileSpec:
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
        if self.target in SELF_COMPILED and self.modes == type(self).modes:
            # the default's compiled modes are nanobench's: such a target's default is its own
            self = replace(self, modes=o.Names(SELF_COMPILED[self.target]))
        target_modes(self.target, self.modes)
        check_modes(list(self.modes), self.device, self.backend)
        if "reduce-overhead" in self.modes and not self.target:
            # the engine compiles off, dynamic or static; it records its CUDA graphs itself
            raise BadInput("--modes reduce-overhead: a --target's mode; the engine records its "
                           "own CUDA graphs (nanobench capture, decode --systems engine-captured)")  # fmt: skip
        device_option(self.device)
        if self.target and (self.bucketed or self.path != "planned"):
            raise BadInput("--target: --bucketed and --path apply to the engine, not to a target")
        check_sides(self.vs, self.vs_path, self.target)
        knob_rules(self)
        if self.target in SELF_COMPILED:  # after every rule of the options themselves
            vllm_reachable(f"--target {self.target}", self.python)
        return replace(self, max_model_len=width)

    def heading(self, sides, dtype: str, rows: list) -> str:
        """The table's and the figure's title: what ran, on what, how often."""
        from nanobench.harness.step.targets import BUILTINS
        from reports.style import counted, title

        rounds_run = max((r.rounds or 0 for r in rows), default=0)
        of = f" of target {self.target}" if self.target else ""
        after = of or f" on the {self.path} path"
        return title(
            sides.worded(
                f"compiled decode{of}",
                lambda knobs: f"knobs {knobs} against plain torch.compile{of}",
                lambda b: (
                    f"compiled decode{after} (after) vs {b.spec.target or b.spec.path} (before)"
                ),
                f"compiled decode{of}",
            ),
            # A target of the user's own takes no --model: the title names the target alone.
            model=self.model if not self.target or self.target in BUILTINS else None,
            device=self.device,
            dtype=dtype,
            rows=self.rows,
            steps=f"{self.steps} x {counted(rounds_run, 'round')} in "
            f"{counted(self.processes, 'process')}",
            shapes="bucketed" if self.bucketed else "open",
            inductor_cache=self.cache,
            backend=self.backend,
        )

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


def knob_rules(spec: CompileSpec) -> None:
    """Compile's own rules for --try and the gates: a guard filter is an option torch.compile
    refuses beside a mode; a speedup needs off to be over."""
    if spec.tries and spec.target in SELF_COMPILED:
        raise BadInput(f"--try with --target {spec.target}: it compiles itself (vLLM's "
                       "compilation_config); nanobench's knobs do not reach its compile")  # fmt: skip
    filtered = [k for k in spec.tries if any(kn.guard_filter for kn in parse_side(k))]
    if filtered and "reduce-overhead" in spec.modes:
        # torch.compile refuses mode= beside options=, and a guard filter travels in options
        raise BadInput(f"--try {filtered[0]} with --modes reduce-overhead: torch.compile takes "
                       "a mode or options, not both, and a guard filter is an option")  # fmt: skip
    if "off" not in spec.modes and "speedup" in (spec.no_slower or ()):
        raise BadInput("--no-slower speedup: a speedup is against off; add off to --modes")


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
    # the first worker's guard-kind probe (a target's: and its dry run of dynamo), what compile's
    # row reports beside its timings; tune's race reads neither, and skips their seconds
    probe: bool = True
    # tune's workload: (batch rows, share of steps) a window decodes, () --rows every step; and
    # a capture list's sizes, () none (the engine then records a CUDA graph per size up front)
    batch_mix: tuple[tuple[int, float], ...] = ()
    capture_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # rebuilt from JSON (lists) as from Python (tuples): the same frozen spec either way
        object.__setattr__(self, "batch_mix", tuple((int(b), float(s)) for b, s in self.batch_mix))
        object.__setattr__(self, "capture_sizes", tuple(self.capture_sizes))

    def batches(self) -> tuple[tuple[int, float], ...]:
        """(rows, share) each window decodes: the mix, or --rows every step."""
        return self.batch_mix or ((self.rows, 1.0),)

    def step_shapes(self) -> list[tuple[int, int]]:
        """(rows, width) each decode step presents, at each batch size of the workload in turn:
        open, or through the bucket ladder."""
        at = [open_shapes(rows, self.prompt_len, self.steps) for rows, _ in self.batches()]
        shapes = [s for size in at for s in size]
        if not self.bucketed:
            return shapes
        buckets = DecodeBuckets(self.max_batch, self.max_model_len, self.width_multiple)
        return [buckets.shape_for(r, w) for r, w in shapes]
