"""What `nanobench tune` is asked for: the space, the race's limits and the user's workload.

What it is: `TuneSpec` (every option's one default; `validate()` checks the rules across
options and the knob names before torch loads; `compile_spec()` is the same step as `compile`
would run it, whose `worker()` builds what each configuration's workers read) and `plan` (the
run's estimate in `harness.runs.eta`'s units).
What it is not: the space (`tune.space`), the race (`tune.race`, `tune.bench`) or the answer.
Invariant: a spec that validated races without another check; one mistake is one `BadInput`
line before any worker starts; importing this loads no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.compile.spec import CompileSpec
from nanobench.harness.cli import options as o
from nanobench.harness.cli.validate import device_option
from nanobench.harness.errors import BadInput
from nanobench.harness.step.knobs import parse_side
from nanobench.harness.step.self_compiled import SELF_COMPILED

C = CompileSpec()


@dataclass(frozen=True)
class TuneSpec:
    model: str = "tiny"
    modes: tuple[str, ...] = o.Names(("dynamic",))
    knobs: tuple[str, ...] = o.Names(("cpp-wrapper", "guard-filter", "freezing"))
    max_knobs: int = 2
    rows: int = C.rows
    max_batch: int = C.max_batch
    prompt_len: int = C.prompt_len
    steps: int = C.steps
    processes: int = 3  # the most a configuration gets: it starts with one
    max_rounds: int = 150  # rounds are cheap beside processes (`bench.GROW_EVERY`)
    margin: float = 0.02  # a configuration within 2% of the best cannot be told from it
    budget_s: float = 900.0  # the whole race, compiles included
    compile_budget_s: float = 240.0  # one configuration's cold compile
    steps_per_start: int = 10000  # decode steps a process serves before it restarts
    cache: str = C.cache
    backend: str = C.backend
    device: str = C.device
    dtype: str = C.dtype
    threads: int = C.threads
    timeout: int = C.timeout
    out: str = C.out
    target: str = ""
    export_json: str = ""  # also the configurations as PyTorch OSS benchmark records
    history: bool = True  # the machine's earlier races lend each ratio to eager their spread
    batch_trace: str | None = None  # the served batch sizes a window decodes (`tune.workload`)
    max_graphs: int = 4  # the most sizes the trace's recommended capture list holds
    capture_lists: tuple[str, ...] = o.Names(())  # CUDA graph lists raced (`tune.workload`)

    def validate(self) -> TuneSpec:
        """The rules across options, and the knobs' names (their settings are held against
        torch when the space is built, still before any worker)."""
        if self.rows > self.max_batch:
            raise BadInput(f"--rows {self.rows}: above --max-batch {self.max_batch}")
        if not 0 < self.margin < 1:
            raise BadInput(f"--margin {self.margin}: expected a fraction between 0 and 1, "
                           "e.g. 0.02")  # fmt: skip
        if self.budget_s < self.compile_budget_s:
            raise BadInput(f"--budget-s {self.budget_s:g}: smaller than one compile may take "
                           f"(--compile-budget-s {self.compile_budget_s:g}); expected at least "
                           "that")  # fmt: skip
        if self.max_rounds < 5:
            raise BadInput(f"--max-rounds {self.max_rounds}: the race's first test is after 5 "
                           "rounds; expected at least 5")  # fmt: skip
        if self.target in SELF_COMPILED:
            raise BadInput(f"--target {self.target}: it compiles itself (vLLM's compilation_config), "
                           "and tune races nanobench's torch.compile configurations; compare its "
                           f"modes with nanobench compile --target {self.target}")  # fmt: skip
        for knob in self.knobs:
            parse_side(knob)
        if self.target and (self.batch_trace or self.capture_lists):
            what = "--batch-trace" if self.batch_trace else "--capture-lists"
            raise BadInput(f"{what} with --target: the built-in engine's workload and capture "
                           "list; a target's step decides its own batch (and --modes "
                           "reduce-overhead records its graphs)")  # fmt: skip
        self.graphs()
        device_option(self.device)
        self.compile_spec().checked()
        return self

    def load(self):
        """The workload a window decodes: --rows every step, or --batch-trace's mix."""
        from nanobench.tune.workload import workload

        return workload(self.rows, self.batch_trace or "", self.max_batch)

    def graphs(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(name, sizes) of each --capture-lists list."""
        from nanobench.tune.workload import capture_lists

        return capture_lists(self.capture_lists, self.load(), self.max_graphs, self.max_batch)

    def compile_spec(self) -> CompileSpec:
        """The step as `compile` runs it: the same shape, model, backend and cache."""
        return CompileSpec(
            model=self.model, modes=("off",), rows=self.rows, max_batch=self.max_batch,
            prompt_len=self.prompt_len, steps=self.steps, max_rounds=self.max_rounds,
            processes=self.processes, cache=self.cache, backend=self.backend,
            device=self.device, dtype=self.dtype, threads=self.threads, timeout=self.timeout,
            out=self.out, target=self.target, history=False,
        )  # fmt: skip

    def plan(self, configs: int, modes: tuple[str, ...], cores: int):
        """The estimate: each configuration's first worker alone (a cold compile each compiled
        one, `modes` theirs, with the graphs the workload adds), about one more process each
        side by side, the rounds up to their bound; a window decodes `--steps` at each batch
        size of the workload."""
        from nanobench.harness.runs.eta import Plan
        from nanobench.tune.workload import further_graphs

        compiled = len(modes)
        cold = compiled if self.cache == "cold" and self.backend == "inductor" else 0
        load, one_size = self.load(), self.compile_spec().worker()
        mixed = replace(one_size, batch_mix=load.mix).step_shapes()
        graphs = 1 + further_graphs(mixed, one_size.step_shapes(), modes)
        return Plan(configs, cold, compiled - cold, configs, cores, configs,
                    self.steps * len(load.mix), self.max_rounds, self.budget_s,
                    round(graphs, 3))  # fmt: skip
