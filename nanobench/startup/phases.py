"""A start's seconds, by phase: wall-clock stamps and torch's ledger made to add up.

What it is: `graph_phases(frame, shares)` (one compiled graph: dynamo's trace, guards, cache keys,
AOTAutograd, Inductor's passes, lowering, code generation, the C++ or Triton build, and on an FX
cache hit the cache load in place of lowering and generation) and `start_phases(ready, launched)`
(the whole start: the interpreter, importing torch, a hot start's artifact load, building the
step, the prefill, every graph's phases summed, a first call's runtime costs (CUDA graph
recording, Triton's runtime autotuning), the steps' own run time, and "unattributed", the
first pass's wall time no phase holds). Pure: dicts of numbers in, dicts of seconds out.
What it is not: a reader of torch (`startup.ledger`, in the worker) or a row (`startup.rows`).
Invariant: a start's phases sum to its wall time from launch to the first pass's end, less the
worker's own reading of torch between steps (`first_pass_s`), exactly;
what the ledger does not explain is shown as unattributed, never dropped. A graph's phase is
never negative (a clamp lands in unattributed); unattributed itself is negative only when the
ledger claims more seconds than the clock saw, which is then shown, not hidden.
"""

from __future__ import annotations

GRAPH_PHASES = (
    "trace",
    "guards",
    "cache_key",
    "aot",
    "passes",
    "lowering",
    "codegen",
    "build",
    "cache_load",
)
START_PHASES = (
    "python",
    "import",
    "artifacts",
    "make",
    "warm_up",
    "prefill",
    *GRAPH_PHASES,
    "runtime",
    "steps",
    "unattributed",
)


def graph_phases(frame: dict, build_s: float, guards_s: float, cache_key_s: float) -> dict:
    """One graph's seconds by phase; `*_s` are its share of its step's timed regions.

    trace = frame - backend - guards; aot = backend - inductor - pre/joint passes - cache keys;
    passes = pre + joint + post grad; on a miss lowering = inductor - codegen - post and codegen
    = codegen - build; on an FX hit cache_load = inductor - post - build. On an AOTAutograd hit
    torch records no Inductor time (the compiled graph is loaded inside AOTAutograd's region), so
    cache_load = backend - pre/joint passes - cache keys - build, and aot is 0.
    """
    backend = frame["aot_s"] or frame.get("backend_s", 0.0)
    inductor, codegen = frame["inductor_s"], frame["codegen_s"]
    pre, joint, post = frame["pre_grad_s"], frame["joint_graph_s"], frame["post_grad_s"]
    aot_hit = bool(frame["aot_hits"]) and backend > 0
    # On CUDA the kernels are Triton's, built under their own ledger field, not compile_file.
    build_s = max(build_s, frame.get("triton_s", 0.0))
    build = min(build_s, inductor) if inductor else (build_s if aot_hit else 0.0)
    out = {
        "trace": frame["frame_s"] - backend - guards_s,
        "guards": guards_s,
        "cache_key": cache_key_s if backend else 0.0,
        "aot": backend - inductor - pre - joint - (cache_key_s if backend else 0.0),
        "passes": pre + joint + post,
        "lowering": 0.0,
        "codegen": 0.0,
        "build": build,
        "cache_load": 0.0,
    }
    if aot_hit:
        out["cache_load"] = out["aot"] + inductor - post - build
        out["aot"] = 0.0
    elif frame["fx_hits"]:
        out["cache_load"] = inductor - post - build
    elif inductor:
        out["lowering"] = inductor - codegen - post
        out["codegen"] = codegen - build
    return {k: round(max(0.0, v), 6) for k, v in out.items()}


def step_graphs(step: dict) -> list[dict]:
    """Each compiled graph of one first-pass step, its share of the step's regions beside it."""
    frames = [f for f in step["frames"] if not f["failed"]]
    if not frames:
        return []
    n = len(frames)
    shares = {k: step[k] / n for k in ("build_s", "guards_s", "cache_key_s")}
    return [
        {
            **f,
            "phases": graph_phases(f, **shares),
            "rebuilt": bool(f["fx_hits"]) and step.get("kernels_built", 0) > 0,
        }
        for f in frames
    ]


def first_pass_s(ready: dict) -> tuple[float, float]:
    """(the steps' own wall time, the worker's reading of torch between them): the first is the
    sum of each step's span, the second the gaps between spans, which no server spends."""
    prefilled, spans, gaps = ready["stamps"]["prefilled"], 0.0, 0.0
    for step in ready["steps"]:
        gaps += step["began"] - prefilled
        spans += step["ended"] - step["began"]
        prefilled = step["ended"]
    return spans, gaps


def start_phases(ready: dict, launched: float) -> dict:
    """The start's seconds by phase, from `launched` (the parent's clock at spawn) to ready.

    python = started - launched; import = imported - started, plus what a target's factory
    imported (vLLM, its own clock); artifacts, make and prefill are the worker's stamps in turn,
    make less what it imported and compiled; the graphs compiled while the step was made (a self-compiled target's warm-up) and in the
    first pass hold every graph's phases; warm_up = the target's own compile clock less the
    phases of the graphs made in it; steps = the first pass's steps at the steady step's time,
    and unattributed = the rest of the first pass.
    """
    s = ready["stamps"]
    out = {k: 0.0 for k in START_PHASES}
    out["python"] = s["started"] - launched
    out["import"] = s["imported"] - s["started"] + (ready.get("target_import_s") or 0.0)
    out["artifacts"] = s["artifacts"] - s["imported"]
    made = step_graphs(ready["made"]) if ready.get("made") else []
    for g in made + [g for step in ready["steps"] for g in step_graphs(step)]:
        for k, v in g["phases"].items():
            out[k] += v
    # a target that compiles itself did so inside make, by its own clock: its graphs' phases
    # are taken out of that clock, the rest (running its warm-up steps) is warm_up
    in_make = sum(sum(g["phases"].values()) for g in made)
    out["warm_up"] = max(0.0, (ready.get("target_compile_s") or 0.0) - in_make)
    out["make"] = s["built"] - s["artifacts"] - (ready.get("target_import_s") or 0.0)
    out["make"] -= out["warm_up"] + in_make
    out["prefill"] = s["prefilled"] - s["built"]
    out["runtime"] = sum(step.get("runtime_s", 0.0) for step in ready["steps"])
    first_pass, _ = first_pass_s(ready)
    steps = (ready["step_ms"] or 0.0) * len(ready["steps"]) / 1e3
    named = sum(out[k] for k in (*GRAPH_PHASES, "runtime"))
    named -= in_make  # inside make, not the first pass
    out["steps"] = min(steps, max(0.0, first_pass - named))
    out["unattributed"] = first_pass - named - out["steps"]
    return {k: round(v, 6) for k, v in out.items()}
