"""`nanobench explain`: graphs, breaks, ops and break reasons of one decode forward."""

from __future__ import annotations

import typer

from nanobench.common import (
    Gate,
    choice,
    finish,
    fits_option,
    gate,
    int_list,
    model_option,
    positive,
)
from nanobench.console import run_command, stdout_console
from nanobench.errors import BadInput


def explain_target_command(
    target: str, *, model: str, rows: int, prompt_len: int, step: int, device: str,
    layers: str, prefill: bool, status,
) -> list[dict]:  # fmt: skip
    """Validate, build the target here (explain has no worker) and explain step `step`."""
    from nanobench.common import device_option
    from nanobench.compile_bench import quiet_dynamo
    from nanobench.target_bench import explain_target
    from nanobench.targets import BUILTINS, TargetError, make_target, target_option

    if layers or prefill:
        raise BadInput("--target: --layers and --prefill apply to the engine, not to a target")
    positive("--rows", rows)
    positive("--prompt-len", prompt_len)
    device_option(device)
    target_option(target)
    directory = ""
    if target in BUILTINS:
        directory, config = model_option(model)
        fits_option(config, "float32", device)
        directory = str(directory)
    quiet_dynamo()
    status(f"explaining {target} at step {step}")
    try:
        made = make_target(
            target, model=directory, rows=rows, prompt_len=prompt_len, steps=step + 2,
            device=device, dtype="float32",
        )  # fmt: skip
        return [explain_target(made, step)]
    except TargetError as e:
        raise BadInput(str(e)) from None


def graph_gates(found: list[dict]) -> list[Gate]:
    """check_single_graph per row, named by depth (the engine) or by step (a target)."""
    from nanobench.cost.compile import check_single_graph

    gates = []
    for r in found:
        name = f"check_single_graph[{r['layers'] if r['layers'] is not None else r['path']}]"
        gates.append(gate(name, check_single_graph, r["graphs"], r["graph_breaks"]))
    return gates


def explain(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    layers: str = typer.Option(
        "", help="Comma-separated depths to rebuild at (default: the model's)."
    ),
    rows: int = typer.Option(4, help="Rows in the decode batch."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row before the step."),
    path: str = typer.Option(
        "planned", help="planned | unplanned (addressing inside the forward)."
    ),
    prefill: bool = typer.Option(
        False, "--prefill", help="Explain the prefill instead of a decode step."
    ),
    attention: str = typer.Option("reference", help="reference | triton | auto."),
    device: str = typer.Option("cpu", help="cpu | cuda."),
    json_mode: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables."
    ),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when the planned path is not one graph."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
    target: str = typer.Option(
        "",
        help="Your decode step: package.module:factory, path/file.py:factory, hf-static or "
        "hf-dynamic (README: the target protocol).",
    ),
    step: int = typer.Option(0, help="With --target: the decode step to explain (0-based)."),
) -> None:
    """Explain one decode forward with torch._dynamo.explain: graphs, breaks, ops, guards.

    Example: nanobench explain --layers 2,4 --path unplanned
    Example: nanobench explain --target my_step.py:factory --step 3
    """
    with run_command(quiet) as status:
        from nanobench.common import device_option
        from reports.explain import render_explain

        if step < 0:
            raise BadInput(f"--step {step}: expected 0 or more (a 0-based decode step)")
        if target:
            found = explain_target_command(
                target, model=model, rows=rows, prompt_len=prompt_len, step=step,
                device=device, layers=layers, prefill=prefill, status=status,
            )  # fmt: skip
            gates = graph_gates(found)
            code = finish(
                "explain",
                found,
                gates,
                {},
                json_mode=json_mode,
                check=check,
                render=lambda: render_explain(stdout_console(), found, "", gates),
            )
            raise typer.Exit(code)
        _, config = model_option(model)
        fits_option(config, "float32", device)
        depths = int_list("--layers", layers) if layers else [config.num_layers]
        positive("--rows", rows)
        positive("--prompt-len", prompt_len)
        choice("--path", path, ("planned", "unplanned"))
        choice("--attention", attention, ("reference", "triton", "auto"))
        device_option(device)

        from nanobench.explain import explain_forward, scaling
        from nanobench.remedies import plan_outside

        found = []
        for n in depths:
            status(f"explaining {path} {'prefill' if prefill else 'decode'} at {n} layers")
            found.append(
                explain_forward(
                    config,
                    layers=n,
                    rows=rows,
                    prompt_len=prompt_len,
                    path=path,
                    prefill=prefill,
                    attention=attention,
                    device=device,
                )
            )
        for r in found:
            r["remedies"] = [
                m.text() for m in plan_outside(r["break_reasons"], r["value_guard_text"])
            ]
        gates = graph_gates(found)
        verdict = scaling(found)
        code = finish(
            "explain",
            found,
            gates,
            {},
            json_mode=json_mode,
            check=check,
            render=lambda: render_explain(stdout_console(), found, verdict, gates),
        )
    raise typer.Exit(code)
