"""`nanobench explain`: graphs, breaks, ops and break reasons of one decode forward.

What it is: `ExplainSpec` (every option's default, and `validate()` for the rules across
options), `gates(spec, rows)` (one graph per explained forward) and the command.
What it is not: the explaining itself (`nanobench.harness.dynamo_explain`, `target_bench.explain_target`) or
the tables (`reports.explain`).
Invariant: explain runs in this process (one `torch._dynamo.explain` call, nothing compiled),
in `--dtype` (`auto` resolved first) and under `--threads` (undone after); every input is checked
before anything is built; each row carries the dtype it was built in and the thread count torch
reported while it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import typer

from nanobench.harness import options as o
from nanobench.harness.console import run_command, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.gates import Gate, gate
from nanobench.harness.output import finish
from nanobench.harness.threads import threads_applied
from nanobench.harness.validate import device_option, dtype_option, fits_option, model_option

if TYPE_CHECKING:  # the row's module imports torch, which the CLI must not pay for at start
    from nanobench.harness.dynamo_explain import ExplainRow


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

    def validate(self) -> ExplainSpec:
        """Rules across options; returns the spec with `auto` resolved to a concrete dtype."""
        if self.target and (self.layers or self.prefill):
            raise BadInput("--target: --layers and --prefill apply to the engine, not to a target")
        device_option(self.device)
        return replace(self, dtype=dtype_option(self.dtype, self.model, self.device))


def gates(spec: ExplainSpec, rows: list[ExplainRow]) -> list[Gate]:
    """check_single_graph per row, named by depth (the engine) or by step (a target)."""
    from nanobench.cost.compile import check_single_graph

    return [
        gate(
            f"check_single_graph[{r.layers if r.layers is not None else r.path}]",
            check_single_graph,
            r.graphs,
            r.graph_breaks,
        )
        for r in rows
    ]


def explain_target_rows(spec: ExplainSpec, status) -> list[ExplainRow]:
    """Build the target here (explain has no worker) and explain step `spec.step`."""
    from nanobench.compile.dynamo import quiet_dynamo
    from nanobench.harness.target_bench import explain_target
    from nanobench.harness.targets import BUILTINS, TargetError, make_target, target_option

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
        return [explain_target(made, spec.step)]
    except TargetError as e:
        raise BadInput(str(e)) from None


def explain_engine_rows(spec: ExplainSpec, status) -> list[ExplainRow]:
    """The engine's forward at each depth, with the plan-outside remedies for what it found."""
    from nanobench.harness.dynamo_explain import explain_forward
    from nanobench.harness.remedies import plan_outside

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
    json_mode: o.JsonOpt = False,
    check: o.CheckOpt = False,
    quiet: o.QuietOpt = False,
) -> None:
    """Explain one decode forward with torch._dynamo.explain: graphs, breaks, ops, guards.

    Example: nanobench explain --layers 2,4 --path unplanned
    Example: nanobench explain --target my_step.py:factory --step 3
    Example: nanobench explain --kernel triton --device cuda --check
    Example: nanobench explain --target my_step.py:factory --dtype bfloat16 --threads 1
    """
    options = {k: v for k, v in locals().items() if k not in ("json_mode", "check", "quiet")}
    with run_command(quiet) as status:
        from nanobench.harness.dynamo_explain import scaling
        from nanobench.harness.rows import as_dicts
        from reports.explain import render_explain

        spec = ExplainSpec(**options).validate()
        with threads_applied(spec.threads) as threads:
            rows = explain_target_rows if spec.target else explain_engine_rows
            found = [replace(r, dtype=spec.dtype, threads=threads) for r in rows(spec, status)]
        checked = gates(spec, found)
        verdict = "" if spec.target else scaling(found)
        code = finish(
            "explain",
            as_dicts(found),
            checked,
            {},
            json_mode=json_mode,
            check=check,
            render=lambda: render_explain(stdout_console(), found, verdict, checked),
        )
    raise typer.Exit(code)
