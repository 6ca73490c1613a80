"""`nanobench explain`: graphs, breaks, ops and break reasons of one decode forward.

What it is: `ExplainSpec` (every option's default, and `validate()` for the rules across
options), `gates(spec, rows)` (one graph per explained forward, and `--no-more` against the
before side) and the command, which writes `<out>/explain.csv` (every row, its side named).
What it is not: the explaining itself (`nanobench.harness.step.dynamo_explain`, `target_bench.explain_target`),
a remedy's dry run (`explain/checked.py`), the before and after (`explain/before_after.py`), reading a saved CSV back (`harness/runs/saved.py`) or
the tables (`reports.explain`).
Invariant: explain runs in this process (one `torch._dynamo.explain` call a side, nothing
compiled), in `--dtype` (`auto` resolved first) and under `--threads` (undone after); every input
is checked before anything is built or written; each row carries the dtype it was built in and
the thread count torch reported while it ran. A mistake in a name (the model, a target's file or
factory, --out) is said before torch is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import typer

from nanobench.explain.before_after import COLUMNS
from nanobench.harness.cli import options as o
from nanobench.harness.cli.console import run_command, stdout_console
from nanobench.harness.cli.registry import Command
from nanobench.harness.cli.validate import (
    device_option,
    dtype_option,
    fits_option,
    model_option,
    out_dir,
    step_named,
)
from nanobench.harness.errors import BadInput, as_vs
from nanobench.harness.runs.gates import Gate, gate
from nanobench.harness.runs.output import finish
from nanobench.harness.workers.threads import threads_applied

if TYPE_CHECKING:  # the row's module imports torch, which the CLI must not pay for at start
    from nanobench.explain.before_after import Explained
    from nanobench.harness.step.dynamo_explain import ExplainRow

MEASURED = tuple(COLUMNS)  # what --no-more may name: every count explain compares


@dataclass(frozen=True)
class ExplainSpec:
    """One forward to explain: the engine's at some depths, or a --target's at one step."""

    model: str = "tiny"
    layers: tuple[int, ...] | None = None  # None: the model's own depth
    rows: int = 4
    prompt_len: int = 16
    path: str = "planned"
    prefill: bool = False
    kernel: str = "reference"
    device: str = "cpu"
    dtype: str = "auto"
    threads: int = 0
    target: str = ""
    step: int = 0
    vs: str = ""  # the before side: a target spec (the after side is --target)
    vs_path: str | None = None  # the before side: the engine on this path (the after: --path)
    no_more: tuple[str, ...] | None = None
    out: str = "nanobench-out"

    def validate(self) -> ExplainSpec:
        """Rules across options; returns the spec with `auto` resolved to a concrete dtype."""
        from nanobench.harness.runs.change import check_columns, check_sides

        if self.target and (self.layers or self.prefill):
            raise BadInput("--target: --layers and --prefill apply to the engine, not to a target")
        check_sides(self.vs, self.vs_path, self.target, bool(self.no_more))
        if self.vs_path and self.prefill:
            raise BadInput(f"--vs-path {self.vs_path}: --prefill has no decode path to compare")
        check_columns("--no-more", self.no_more, MEASURED)
        device_option(self.device)
        sides_named(self)
        return replace(self, dtype=dtype_option(self.dtype, self.model, self.device))


def sides_named(spec: ExplainSpec) -> None:
    """The model and each side's target: first as named, with nothing imported (a preset or a
    path; a file that binds its factory), then each target imported and its factory checked."""
    from nanobench.harness.step.targets import target_option

    step_named(spec.model, spec.target, spec.vs)
    if spec.vs:
        try:
            target_option(spec.vs)
        except BadInput as e:
            raise as_vs(e) from None
    if spec.target:
        target_option(spec.target)


def gates(spec: ExplainSpec, rows: list[ExplainRow], changes=()) -> list[Gate]:
    """check_single_graph per row handed in (the after side's, with a before side), named by
    depth (the engine) or by step (a target); with a before side, `--no-more` per member and
    named column."""
    from nanobench.cost.compile import check_single_graph
    from nanobench.harness.runs.change import no_more_gates

    return [
        gate(
            f"check_single_graph[{r.layers if r.layers is not None else r.path}]",
            check_single_graph,
            r.graphs,
            r.graph_breaks,
        )
        for r in rows
    ] + no_more_gates(list(changes), spec.no_more)


def explain_target_rows(spec: ExplainSpec, status) -> list[ExplainRow]:
    """Build the target here (explain has no worker) and explain step `spec.step`."""
    from nanobench.compile.dynamo import quiet_dynamo
    from nanobench.harness.step.target_bench import explain_target
    from nanobench.harness.step.targets import BUILTINS, TargetError, make_target, target_option

    target_option(spec.target)
    directory = ""
    if spec.target in BUILTINS:
        directory, config = model_option(spec.model)
        fits_option(config, spec.dtype, spec.device)
    quiet_dynamo()
    status(f"explaining {spec.target} at step {spec.step}")
    try:
        made = make_target(
            spec.target, model=str(directory), rows=spec.rows, prompt_len=spec.prompt_len,
            steps=spec.step + 2, device=spec.device, dtype=spec.dtype,
        )  # fmt: skip
        row = explain_target(made, spec.step)
    except TargetError as e:
        raise BadInput(str(e)) from None
    from nanobench.explain.checked import checked_remedies

    return [checked_remedies(row, spec, str(directory), status)]


def explain_engine_rows(spec: ExplainSpec, status) -> list[ExplainRow]:
    """The engine's forward at each depth, with the plan-outside remedies for what it found."""
    from nanobench.harness.step.dynamo_explain import explain_forward
    from nanobench.harness.step.remedies import plan_outside

    _, config = model_option(spec.model)
    fits_option(config, spec.dtype, spec.device)
    found = []
    for n in spec.layers or (config.num_layers,):
        what = "prefill" if spec.prefill else "decode"
        status(f"explaining {spec.path} {what} at {n} layers")
        row = explain_forward(
            config,
            layers=n,
            rows=spec.rows,
            prompt_len=spec.prompt_len,
            path=spec.path,
            prefill=spec.prefill,
            attention=spec.kernel,
            device=spec.device,
            dtype=spec.dtype,
        )
        fixes = plan_outside(row.break_reasons, row.value_guard_text)
        found.append(replace(row, remedies=[m.text() for m in fixes]))
    return found


D = ExplainSpec()


def explain(
    model: o.Model = D.model,
    layers: o.Layers = D.layers,
    rows: o.Rows = D.rows,
    prompt_len: o.PromptLen = D.prompt_len,
    path: o.DecodePath = D.path,
    prefill: o.Prefill = D.prefill,
    kernel: o.Kernel = D.kernel,
    device: o.Device = D.device,
    dtype: o.Dtype = D.dtype,
    threads: o.Threads = D.threads,
    target: o.Target = D.target,
    step: o.Step = D.step,
    vs: o.Vs = D.vs,
    vs_path: o.VsPath = D.vs_path,
    no_more: o.NoMore = D.no_more,
    out: o.Out = D.out,
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Explain one decode forward with torch._dynamo.explain: graphs, breaks, ops, guards.

    With --vs (a target before, --target after) or --vs-path (the engine on that path before,
    --path after), both are explained: the change in each count, the break reasons and value
    guards gone and new, and --no-more gates for --check.

    Example: nanobench explain --layers 2,4 --path unplanned
    Example: nanobench explain --target my_step.py:factory --step 3
    Example: nanobench explain --target new.py:factory --vs old.py:factory --check --no-more breaks
    Example: nanobench explain --vs-path unplanned --layers 2
    Example: nanobench explain --kernel triton --device cuda --check
    Example: nanobench explain --target my_step.py:factory --dtype bfloat16 --threads 1
    """
    with run_command(quiet) as status:
        spec = ExplainSpec(
            model=model,
            layers=layers,
            rows=rows,
            prompt_len=prompt_len,
            path=path,
            prefill=prefill,
            kernel=kernel,
            device=device,
            dtype=dtype,
            threads=threads,
            target=target,
            step=step,
            vs=vs,
            vs_path=vs_path,
            no_more=no_more,
            out=out,
        ).validate()
        directory = out_dir(spec.out)
        code = run_explain(spec, directory, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def run_explain(spec: ExplainSpec, directory, status, *, json_mode: bool, check: bool) -> int:
    """Explain one side or both, write explain.csv, print (or --json) and pick the exit code."""
    from nanobench.explain.before_after import changes, differences, explain_sides
    from nanobench.harness.runs.rows import as_dicts, columns
    from nanobench.harness.step.dynamo_explain import ExplainRow, scaling
    from nanobench.harness.step.third_party import to_log
    from reports.csvio import write_rows

    with (
        to_log(directory / "explain-warnings.log") as logged,
        threads_applied(spec.threads) as threads,
    ):
        if spec.vs or spec.vs_path:
            sides = explain_sides(spec, status, explain_target_rows, explain_engine_rows)
        else:
            sides, found = (
                None,
                (explain_target_rows if spec.target else explain_engine_rows)(spec, status),
            )

    def stamped(rows: list[ExplainRow]) -> list[ExplainRow]:
        return [replace(r, dtype=spec.dtype, threads=threads) for r in rows]

    if sides is not None:
        sides = replace(sides, before=stamped(sides.before), after=stamped(sides.after))
        found = sides.rows
    else:
        found = stamped(found)
    changed = changes(sides) if sides else []
    checked = gates(spec, sides.after if sides else found, changed)
    csv_path = write_rows(directory / "explain.csv", as_dicts(found), columns(ExplainRow))
    outputs = {"csv": str(csv_path), **side_outputs(spec, found, directory, threads)}
    if logged.by_source:
        outputs["warnings"] = str(logged.path)  # torch's and transformers' own, kept whole
    extra = None
    if sides is not None:
        extra = {"changes": as_dicts(changed), **differences(sides)}
    return finish(
        "explain",
        as_dicts(found),
        checked,
        outputs,
        json_mode=json_mode,
        check=check,
        render=lambda: render(spec, found, sides, changed, checked, outputs, scaling),
        extra=extra,
    )


def side_outputs(spec: ExplainSpec, found, directory, threads: int) -> dict[str, str]:
    """What --out holds beside the CSV: the diagram and the env record (which `compare` reads
    to say whether two explain runs ran on the same machine and software)."""
    import sys

    from nanobench.harness.runs.env_record import collect_env, write_env
    from reports.explain import draw_explain

    what = spec.target or f"the engine, {spec.path} path"
    png = draw_explain(found, directory / "explain.png", f"explain: {what}")
    env = write_env(directory / "explain-env.json", collect_env(threads, sys.argv))
    return {"png": str(png), "env": str(env)}


def render(spec: ExplainSpec, found, sides: Explained | None, changed, checked, outputs, scaling):
    from nanobench.explain.before_after import differences
    from reports.explain import render_before_after, render_explain

    console = stdout_console()
    if sides is None:
        verdict = "" if spec.target else scaling(found)
        render_explain(console, found, verdict, checked, outputs)
        return
    render_before_after(
        console, sides.before_spec, sides.after_spec, sides.pairs, changed,
        differences(sides), checked, outputs,
    )  # fmt: skip


def explain_kind() -> type:
    """explain's kind, imported when asked for: it loads the statistics."""
    from nanobench.explain.saved import ExplainKind

    return ExplainKind


COMMAND = Command("explain", explain, doc="docs/measuring.md", kind=explain_kind, comparable=True)
