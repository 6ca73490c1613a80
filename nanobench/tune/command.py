"""`nanobench tune`: race the step's configurations; name the ones that cannot be told apart.

What it is: the command: its options (each defaulting to `TuneSpec`'s; the race's own declared
here, the rest shared from `harness.cli.options`), validated into a spec and handed to
`tune/run.py`.
What it is not: the spec (`tune.spec`), the space, the race, the answer or the report.
Invariant: every input is checked before a worker starts, an unknown knob's name before torch
loads and its settings before any worker; importing this loads no torch.
"""

from __future__ import annotations

from typing import Annotated

import typer

from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.registry import Command
from nanobench.harness.cli.validate import out_dir_tried, out_file, step_named
from nanobench.tune.spec import TuneSpec

D = TuneSpec()

Knobs = Annotated[
    o.Names,
    typer.Option(
        parser=o.parse_listed,
        help="--try knobs the race combines (subsets up to --max-knobs), or listed sets "
        "joined by + (then exactly those sets).",
    ),
]
MaxKnobs = Annotated[int, typer.Option(min=1, help="The most knobs one configuration sets.")]
RaceMargin = Annotated[
    float,
    typer.Option(
        "--margin", min=0.0, max=0.5,
        help="Within this fraction of the best, a configuration cannot be told from it.",
    ),
]  # fmt: skip
RaceBudgetS = Annotated[
    float, typer.Option("--budget-s", min=1.0, help="The whole race's seconds, compiles included.")
]
CompileBudgetS = Annotated[
    float, typer.Option(min=1.0, help="A configuration whose cold compile takes longer is out.")
]
StepsPerStart = Annotated[
    int,
    typer.Option(
        min=1, help="Decode steps a process serves before it restarts: the horizon the "
        "decision prices compile seconds over."
    ),
]  # fmt: skip
CaptureLists = Annotated[
    o.Names,
    typer.Option(
        parser=o.parse_listed,
        help="On CUDA, capture lists raced with each compiled mode (the engine records a graph "
        "per size up front): trace (what buckets recommends for --batch-trace within "
        "--max-graphs), vllm, sglang, or sizes joined by + (1+2+4+8).",
    ),
]
TuneMaxGraphs = Annotated[
    int, typer.Option(min=1, help="The most sizes --capture-lists trace may hold.")
]
MostProcesses = Annotated[
    int, typer.Option("--processes", min=1, help="The most processes a configuration gets.")
]


def tune_command(
    model: o.Model = D.model,
    modes: o.Modes = D.modes,
    knobs: Knobs = D.knobs,
    max_knobs: MaxKnobs = D.max_knobs,
    rows: o.Rows = D.rows,
    max_batch: o.MaxBatch = D.max_batch,
    prompt_len: o.PromptLen = D.prompt_len,
    steps: o.Steps = D.steps,
    processes: MostProcesses = D.processes,
    max_rounds: o.MaxRounds = D.max_rounds,
    margin: RaceMargin = D.margin,
    budget_s: RaceBudgetS = D.budget_s,
    compile_budget_s: CompileBudgetS = D.compile_budget_s,
    steps_per_start: StepsPerStart = D.steps_per_start,
    cache: o.Cache = D.cache,
    backend: o.Backend = D.backend,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    timeout: o.Timeout = D.timeout,
    out: o.Out = D.out,
    target: o.Target = D.target,
    export_json: o.ExportJson = D.export_json,
    history: o.History = D.history,
    batch_trace: o.BatchTrace = D.batch_trace,
    capture_lists: CaptureLists = D.capture_lists,
    max_graphs: TuneMaxGraphs = D.max_graphs,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """What to ship: race the step's configurations (compiled modes x --try knob sets, eager off
    as the reference) in one interleaved fleet and name the ones that cannot be told from the
    best, with the choice for your --steps-per-start and the lines to paste.

    Each configuration gets one fresh worker (its cold compile timed alone); its output is held
    to eager's and a fall-back disqualifies it. After 5 rounds, each round drops a survivor
    whose step is, by a paired test against the best, beyond 1 + --margin (Holm across the
    survivors, the 5% spent across the looks); survivors get more processes as the race goes
    on. It stops when one is left, when the rest are within the margin of the best, or at
    --budget-s, and says which.

    Example: nanobench tune --modes dynamic --knobs cpp-wrapper,guard-filter,freezing
    Example: nanobench tune --target my_step.py:factory --knobs freezing --steps-per-start 2000
    Example: nanobench tune --modes dynamic,static --knobs freezing --check
    Example: nanobench tune --device cuda --batch-trace served.csv --capture-lists trace,vllm
    """
    with run_command(quiet) as status:
        spec = TuneSpec(
            model=model, modes=modes, knobs=knobs, max_knobs=max_knobs, rows=rows,
            max_batch=max_batch, prompt_len=prompt_len, steps=steps, processes=processes,
            max_rounds=max_rounds, margin=margin, budget_s=budget_s,
            compile_budget_s=compile_budget_s, steps_per_start=steps_per_start, cache=cache,
            backend=backend, device=device, dtype=dtype, threads=threads, timeout=timeout,
            out=out, target=target, export_json=export_json, history=history,
            batch_trace=batch_trace, capture_lists=capture_lists, max_graphs=max_graphs,
        ).validate()  # fmt: skip
        out_dir_tried(spec.out)
        out_file(spec.export_json, "--export-json")
        step_named(spec.model, spec.target, "")
        # Heavy on purpose: torch and the workers' code load once the names are checked.
        from nanobench.tune.run import run_tune

        code = run_tune(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def tune_kind() -> type:
    """What compare reads of tune's saved races, imported when asked for."""
    from nanobench.tune.saved import TuneKind

    return TuneKind


COMMAND = Command("tune", tune_command, (), "docs/measuring.md", kind=tune_kind, comparable=True)
