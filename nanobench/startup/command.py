"""`nanobench startup`: cold, warm and hot starts per mode, each in a fresh process, by phase.

What it is: the command: its options (each defaulting to `StartupSpec`'s), which it validates
into a spec and hands to `startup/run.py`.
What it is not: the spec (`startup/spec.py`), a start (`startup/session.py`), the phases
(`startup/phases.py`), the rows (`startup/rows.py`) or the report (`reports.startup`).
Invariant: every input is checked before a start runs, a mistaken name or path before torch is
imported; importing this loads no torch.
"""

from __future__ import annotations

import typer

from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.registry import Command
from nanobench.harness.cli.validate import out_dir_tried, out_file, step_named
from nanobench.startup.caches import artifact_bytes
from nanobench.startup.spec import StartupSpec

D = StartupSpec()


def startup_command(
    model: o.Model = D.model,
    modes: o.Modes = D.modes,
    starts: o.Starts = D.starts,
    runs: o.Runs = D.runs,
    rows: o.Rows = D.rows,
    max_batch: o.MaxBatch = D.max_batch,
    prompt_len: o.PromptLen = D.prompt_len,
    steps: o.Steps = D.steps,
    max_model_len: o.MaxModelLen = D.max_model_len,
    block_size: o.BlockSize = D.block_size,
    backend: o.Backend = D.backend,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    pgo: o.Pgo = D.pgo,
    max_warm_s: o.MaxWarmS = D.max_warm_s,
    artifacts: o.Artifacts = D.artifacts,
    cache_dir: o.CacheDir = D.cache_dir,
    timeout: o.Timeout = D.timeout,
    out: o.Out = D.out,
    target: o.Target = D.target,
    vs: o.Vs = D.vs,
    tries: o.Try = D.tries,
    python: o.Python = D.python,
    vs_python: o.VsPython = D.vs_python,
    vs_env: o.VsEnv = D.vs_env,
    no_more: o.NoMore = D.no_more,
    no_slower: o.NoSlower = D.no_slower,
    margin: o.Margin = D.margin,
    export_json: o.ExportJson = D.export_json,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Time what compiling costs before the first token: cold, warm and hot starts per mode.

    Each start is a fresh process timed from its launch to the end of its first pass (every
    shape of the run built or loaded), split into phases that add up: the interpreter, importing
    torch, loading artifacts, building the step, the prefill, dynamo's trace, guards, cache keys,
    AOTAutograd, Inductor's passes, lowering, code generation, the C++ or Triton build, cache
    loads, the steps themselves and what no phase holds (unattributed). Cold: every cache empty;
    warm: the caches its run's cold start filled; hot: empty caches, the cold start's
    torch.compiler cache artifacts loaded first. What a cache saved is cold less this start, by
    the clock, with its interval over --runs; each graph's FX-graph and AOTAutograd hits, and
    what changed in the cache key when a warm or hot start missed. With --vs OLD the before
    side is that target and the after side --target, their starts interleaved start by start,
    each side over its own caches; the change per mode and start kind is after / before paired
    by run, the counts exact. With --try KNOB[,KNOB...] each knob is a side of its own against
    plain torch.compile, its compiled modes' starts interleaved with plain's, start by start.

    Example: nanobench startup --modes dynamic,static --runs 3
    Example: nanobench startup --target my_step.py:factory --starts cold,warm --max-warm-s 10
    Example: nanobench startup --target new.py:factory --vs old.py:factory --check --no-slower ready_s
    Example: nanobench startup --modes off,dynamic --try cpp-wrapper,freezing
    """
    with run_command(quiet) as status:
        spec = StartupSpec(
            model=model,
            modes=modes,
            starts=starts,
            runs=runs,
            rows=rows,
            max_batch=max_batch,
            prompt_len=prompt_len,
            steps=steps,
            max_model_len=max_model_len,
            block_size=block_size,
            backend=backend,
            device=device,
            dtype=dtype,
            threads=threads,
            pgo=pgo,
            max_warm_s=max_warm_s,
            artifacts=artifacts,
            cache_dir=cache_dir,
            timeout=timeout,
            out=out,
            target=target,
            vs=vs,
            tries=tries,
            python=python,
            vs_python=vs_python,
            vs_env=vs_env,
            no_more=no_more,
            no_slower=no_slower,
            margin=margin,
            export_json=export_json,
        ).validate()
        names_checked(spec)
        # Heavy on purpose: torch loads once the names are checked, not at CLI start.
        from nanobench.startup.run import run_startup

        code = run_startup(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def names_checked(spec: StartupSpec) -> None:
    """What a typing mistake spoils, checked before torch loads (`run_startup` checks the rest,
    in this order): --artifacts read, --export-json, each side's target, the model, then the
    directories --out and --cache-dir (tried, left as found)."""
    if spec.artifacts:
        artifact_bytes(spec.artifacts)
    out_file(spec.export_json, "--export-json")
    step_named(spec.model, spec.target, spec.vs)
    out_dir_tried(spec.out)
    if spec.cache_dir:
        out_dir_tried(spec.cache_dir, "--cache-dir")


def startup_kind() -> type:
    """startup's kind, imported when asked for: it loads the statistics."""
    from nanobench.startup.run import StartupKind

    return StartupKind


COMMAND = Command("startup", startup_command, doc="docs/startup.md", kind=startup_kind)
