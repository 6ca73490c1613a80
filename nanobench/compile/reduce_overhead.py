"""`reduce-overhead`: torch's own CUDA graphs through Inductor, as a fourth compile mode.

What it is: `compile_kwargs(mode, backend)` (what `torch.compile` is called with in each mode),
`prediction_mode` (which build model predicts it), `check_modes` (refused without CUDA or with a
backend other than Inductor: one line, exit 2) and `cudagraph_counts` (skips and re-records from
torch's own bookkeeping: `counters["inductor"]["cudagraph_skips"]` and the cudagraph tree
manager's `num_rerecord`).
What it is not: nanobench's capture (`nanobench capture`), which records its own graphs.
Invariant: the counts are torch's, read after the run; off/dynamic/static rows carry none.
"""

from __future__ import annotations

from nanobench.harness.cli.choices import REDUCE_OVERHEAD
from nanobench.harness.errors import BadInput


def compile_kwargs(mode: str, backend: str) -> dict:
    """torch.compile's arguments: static is dynamic=False (None would generalise on a recompile)."""
    if mode == REDUCE_OVERHEAD:
        # Sizes as Inductor's default (None: automatic dynamic); a new size re-records a graph.
        return {"mode": REDUCE_OVERHEAD, "backend": "inductor"}
    return {"dynamic": mode == "dynamic", "backend": backend}


def prediction_mode(mode: str) -> str:
    """The build model that predicts a mode: reduce-overhead's sizes generalise like dynamic."""
    return "dynamic" if mode == REDUCE_OVERHEAD else mode


def check_modes(modes: list[str], device: str, backend: str) -> None:
    if REDUCE_OVERHEAD not in modes:
        return
    if device != "cuda":
        raise BadInput(
            "--modes reduce-overhead: needs --device cuda (it records CUDA graphs); "
            f"--device is {device}"
        )
    if backend != "inductor":
        raise BadInput(
            f"--modes reduce-overhead: needs --backend inductor (CUDA graphs are Inductor's), "
            f"got {backend}"
        )


def cudagraph_counts(mode: str) -> dict:
    """Skips and re-records of torch's CUDA graph trees, for a reduce-overhead row."""
    if mode != REDUCE_OVERHEAD:
        return {"cudagraph_skips": None, "cudagraph_rerecords": None}
    # torch loads here, not at import: the command's spec checks --modes with this module.
    import torch
    from torch._dynamo.utils import counters
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_manager(torch.cuda.current_device(), False)
    rerecords = (
        sum(n for per_node in manager.num_rerecord.values() for n in per_node.values())
        if manager is not None
        else 0
    )
    return {
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
        "cudagraph_rerecords": rerecords,
    }
