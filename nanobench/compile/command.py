"""`nanobench compile` (alias compilebench): the sweep, one fresh process per mode, in rounds.

What it is: the command: its options (each defaulting to `CompileSpec`'s), which it validates
into a spec and hands to `compile/run.py`.
What it is not: the spec (`compile/spec.py`), the gates (`compile/gates.py`), the measurement
(`compile/bench.py`, `compile/session.py`), the row (`compile/rows.py`) or the report
(`reports.compile`).
Invariant: every input is checked before a worker starts, a mistaken name or path before torch
is imported; importing this loads no torch.
"""

from __future__ import annotations

import typer

from nanobench.compile.spec import CompileSpec
from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.registry import TIMED, Command
from nanobench.harness.cli.validate import out_dir_tried, out_file, step_named

D = CompileSpec()


def compile_command(
    model: o.Model = D.model,
    modes: o.Modes = D.modes,
    rows: o.Rows = D.rows,
    max_batch: o.MaxBatch = D.max_batch,
    prompt_len: o.PromptLen = D.prompt_len,
    steps: o.Steps = D.steps,
    rounds: o.Rounds = D.rounds,
    max_rounds: o.MaxRounds = D.max_rounds,
    processes: o.Processes = D.processes,
    history: o.History = D.history,
    rel_ci: o.RelCi = D.rel_ci,
    budget_s: o.BudgetS = D.budget_s,
    bucketed: o.Bucketed = D.bucketed,
    width_multiple: o.WidthMultiple = D.width_multiple,
    max_model_len: o.MaxModelLen = D.max_model_len,
    block_size: o.BlockSize = D.block_size,
    cache: o.Cache = D.cache,
    backend: o.Backend = D.backend,
    path: o.DecodePath = D.path,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    horizon: o.Horizon = D.horizon,
    timeout: o.Timeout = D.timeout,
    out: o.Out = D.out,
    target: o.Target = D.target,
    trace: o.Trace = D.trace,
    vs: o.Vs = D.vs,
    vs_path: o.VsPath = D.vs_path,
    no_more: o.NoMore = D.no_more,
    no_slower: o.NoSlower = D.no_slower,
    margin: o.Margin = D.margin,
    tries: o.Try = D.tries,
    python: o.Python = D.python,
    vs_python: o.VsPython = D.vs_python,
    vs_env: o.VsEnv = D.vs_env,
    export_json: o.ExportJson = D.export_json,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Sweep compile modes over the decode step, each mode in its own fresh process.

    Each worker builds once and runs a first pass (builds, reuse, fall-back measured and
    predicted, guard kind, recompile reasons, compile seconds); then the modes take turns at
    timed windows in rotating rounds, each mode's rounds dealt over --processes workers: step
    ms (median, IQR), speedup against off, saving and breakeven with 95% intervals (between-
    process variance inside them), worth compiling yes / no / can't tell.

    Example: nanobench compile --modes off,dynamic,static --steps 12 --bucketed
    Example: nanobench compile --target my_step.py:factory --steps 12 --backend eager
    Example: nanobench compile --modes off,static --cache warm --check
    Example: nanobench compile --target new.py:factory --vs old.py:factory --check --no-more breaks
    Example: nanobench compile --modes off,dynamic --try cpp-wrapper,guard-filter,freezing
    """
    with run_command(quiet) as status:
        spec = CompileSpec(
            model=model,
            modes=modes,
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            steps=steps,
            rounds=rounds,
            max_rounds=max_rounds,
            processes=processes,
            history=history,
            rel_ci=rel_ci,
            budget_s=budget_s,
            bucketed=bucketed,
            width_multiple=width_multiple,
            max_model_len=max_model_len,
            block_size=block_size,
            cache=cache,
            backend=backend,
            path=path,
            device=device,
            dtype=dtype,
            threads=threads,
            horizon=horizon,
            timeout=timeout,
            out=out,
            target=target,
            trace=trace,
            vs=vs,
            vs_path=vs_path,
            no_more=no_more,
            no_slower=no_slower,
            margin=margin,
            tries=tries,
            python=python,
            vs_python=vs_python,
            vs_env=vs_env,
            export_json=export_json,
        ).validate()
        names_checked(spec)
        # Heavy on purpose: torch and the workers' code load once the names are checked.
        from nanobench.compile.run import run_compile

        code = run_compile(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def names_checked(spec: CompileSpec) -> None:
    """What a typing mistake spoils, checked before torch loads (`run_compile` checks the rest,
    in this order): --out (tried, left as found), --export-json, each side's target, the model."""
    out_dir_tried(spec.out)
    out_file(spec.export_json, "--export-json")
    step_named(spec.model, spec.target, spec.vs)


def compile_kind() -> type:
    """compile's kind, imported when asked for: it loads the statistics."""
    from nanobench.compile.run import CompileKind

    return CompileKind


COMMAND = Command(
    "compile",
    compile_command,
    ("compilebench",),
    "docs/measuring.md",
    TIMED,
    compile_kind,
    comparable=True,
)
