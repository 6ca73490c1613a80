"""The lines to paste for a configuration: its config settings and its torch.compile call.

What it is: `paste_lines(config, backend)`, the Python a user puts in production to run the
step as the race's workers ran it: each `torch._inductor.config` / `torch._dynamo.config`
setting its knobs make (as the installed torch typed them, `knobs.checked_side`), then
`step = torch.compile(step, ...)` with the mode's arguments (`reduce_overhead.compile_kwargs`)
and a guard filter where a knob hands one (`knobs.compile_options`); eager off is no call; a
capture list's sizes as the engine, vLLM and SGLang take them (comments: no torch call records).
What it is not: what a worker applies (`knobs.applied`, `dynamo.compiler_for`): these lines are
made from the same settings, and a test executes them against what a worker sets.
Invariant: a line names only what the worker's own settings name: nothing added, nothing left.
"""

from __future__ import annotations

from nanobench.compile.reduce_overhead import compile_kwargs
from nanobench.harness.step.knobs import checked_side, parse_side, unsafe_of
from nanobench.tune.space import OFF, Config


def paste_lines(config: Config, backend: str) -> list[str]:
    """The lines that run the step as `config` did: `step` is the user's decode step."""
    if config.mode == OFF:
        return ["# eager: no torch.compile call (step stays as it is)"]
    # an unsafe knob is named as such where it is pasted, with what it assumes
    lines = [f"# {line}" for line in unsafe_of(config.knobs)] + ["import torch"]
    for s in checked_side(config.knobs) if config.knobs else ():
        lines.append(f"torch._{s.config}.config.{s.key} = {s.value!r}")
    args = [f"{k}={v!r}" for k, v in compile_kwargs(config.mode, backend).items()]
    filters = [k.guard_filter for k in parse_side(config.knobs) if k.guard_filter] if \
        config.knobs else []  # fmt: skip
    if filters:
        args.append(f'options={{"guard_filter_fn": torch.compiler.{filters[0]}}}')
    lines.append(f"step = torch.compile(step, {', '.join(args)})")
    return lines + graph_lines(config.sizes)


def graph_lines(sizes: tuple[int, ...]) -> list[str]:
    """A capture list as the engine recorded it, and as vLLM and SGLang take one
    (docs: ../shared/reference/capture-in-real-engines.md)."""
    if not sizes:
        return []
    listed = ", ".join(map(str, sizes))
    return [
        f"# then a CUDA graph per batch size, recorded up front and replayed: [{listed}]",
        f"# nanobench's engine: Engine.from_checkpoint(..., bucket_decode=True, "
        f"capture_decode=True, capture_sizes=({listed},))",
        f'# vLLM: compilation_config={{"cudagraph_capture_sizes": [{listed}]}}',
        f"# SGLang: --cuda-graph-bs {' '.join(map(str, sizes))}",
    ]
