"""`nanobench explain`: graphs, breaks, ops and break reasons of one decode forward."""

from __future__ import annotations

import typer

from nanobench.common import Gate, choice, finish, fits_option, int_list, model_option, positive
from nanobench.console import run_command, stdout_console


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
) -> None:
    """Explain one decode forward with torch._dynamo.explain: graphs, breaks, ops, guards.

    Example: nanobench explain --layers 2,4 --path unplanned
    """
    with run_command(quiet) as status:
        from nanobench.common import device_option

        _, config = model_option(model)
        fits_option(config, "float32", device)
        depths = int_list("--layers", layers) if layers else [config.num_layers]
        positive("--rows", rows)
        positive("--prompt-len", prompt_len)
        choice("--path", path, ("planned", "unplanned"))
        choice("--attention", attention, ("reference", "triton", "auto"))
        device_option(device)

        from nanobench.cost.compile import check_single_graph
        from nanobench.explain import explain_forward, scaling
        from reports.explain import render_explain

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
        gates: list[Gate] = []
        for r in found:
            try:
                check_single_graph(r["graphs"], r["graph_breaks"])
                gates.append(Gate(f"check_single_graph[{r['layers']}]", True, "ok"))
            except RuntimeError as e:
                gates.append(Gate(f"check_single_graph[{r['layers']}]", False, str(e)))
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
