"""`nanobench profile`: where each mode's steady step goes, category by category, kernel by kernel.

What it is: the command: its options (each defaulting to `ProfileSpec`'s), which it validates
into a spec and hands to `profile/run.py`.
What it is not: the spec (`profile/spec.py`), the worker (`profile/session.py`), the
attribution (`profile/attribution.py`), the gates or the report (`reports.profile`).
Invariant: every input is checked before a worker starts, a mistaken name or path before torch
is imported; importing this loads no torch.
"""

from __future__ import annotations

import typer

from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.registry import Command
from nanobench.harness.cli.validate import out_dir_tried, step_named
from nanobench.profile.spec import ProfileSpec

D = ProfileSpec()


def profile_command(
    model: o.Model = D.model,
    modes: o.Modes = D.modes,
    rows: o.Rows = D.rows,
    max_batch: o.MaxBatch = D.max_batch,
    prompt_len: o.PromptLen = D.prompt_len,
    steps: o.Steps = D.steps,
    passes: o.ProfiledPasses = D.passes,
    rounds: o.Rounds = D.rounds,
    max_rounds: o.MaxRounds = D.max_rounds,
    processes: o.Processes = D.processes,
    rel_ci: o.RelCi = D.rel_ci,
    budget_s: o.BudgetS = D.budget_s,
    backend: o.Backend = D.backend,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    timeout: o.Timeout = D.timeout,
    out: o.Out = D.out,
    target: o.Target = D.target,
    vs: o.Vs = D.vs,
    tries: o.Try = D.tries,
    python: o.Python = D.python,
    vs_python: o.VsPython = D.vs_python,
    vs_env: o.VsEnv = D.vs_env,
    top: o.Top = D.top,
    max_overhead_share: o.MaxOverheadShare = D.max_overhead_share,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Profile each compile mode's steady decode step, each mode in its own fresh process.

    Each worker builds its mode, warms up until nothing builds, then runs --passes pairs of passes,
    one under torch.profiler (Inductor's kernels named) and one without it, and one with Python
    stacks for where each op comes from; the same steps are timed without the profiler in
    interleaved rounds. Per mode: the step
    by category (guards, dynamo entry, wrapper Python, fused and extern kernels, eager ops, copies,
    the forward's Python, the step outside the forward, unattributed) adding up to the step, the
    profiler's overhead, the top kernels with bytes, flops and their floor at the peaks probed in
    the same worker, and the words naming what caps each speedup.

    Example: nanobench profile --modes off,dynamic --threads 1
    Example: nanobench profile --target my_step.py:factory --modes off,dynamic
    Example: nanobench profile --target new.py:factory --vs old.py:factory --modes off,dynamic
    Example: nanobench profile --check --max-overhead-share 0.5
    Example: nanobench profile --modes off,dynamic --try cpp-wrapper,guard-filter
    """
    with run_command(quiet) as status:
        spec = ProfileSpec(
            model=model,
            modes=modes,
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            steps=steps,
            passes=passes,
            rounds=rounds,
            max_rounds=max_rounds,
            processes=processes,
            rel_ci=rel_ci,
            budget_s=budget_s,
            backend=backend,
            device=device,
            dtype=dtype,
            threads=threads,
            timeout=timeout,
            out=out,
            target=target,
            vs=vs,
            tries=tries,
            python=python,
            vs_python=vs_python,
            vs_env=vs_env,
            top=top,
            max_overhead_share=max_overhead_share,
        ).validate()
        out_dir_tried(spec.out)
        step_named(spec.model, spec.target, spec.vs)
        # Heavy on purpose: torch and the workers' code load once the names are checked.
        from nanobench.profile.run import run_profile

        code = run_profile(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def profile_kind() -> type:
    """profile's kind, imported when asked for: it loads the statistics."""
    from nanobench.profile.run import ProfileKind

    return ProfileKind


COMMAND = Command(
    "profile", profile_command, doc="docs/profile.md", kind=profile_kind, comparable=True
)
