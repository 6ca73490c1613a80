"""`nanobench startup`'s rows: one per start, one per graph a start compiled or loaded.

What it is: `StartRow` (a start's wall time to ready and to its first token, its phases, cache
facts, the steady step, and what a cache saved against the clock) and `GraphRow` (one graph's
phases and cache answers), both built by `rows_of(ready, launched, wall_s, cold)` from a
worker's ready row; `missed(...)` (a warm or hot graph that missed what its cold start saved,
and what torch's FX cache key says changed); `with_saved(rows)`, each start's mode and kind's
ready seconds over the runs (their geometric mean) and, for a warm or hot start, the
cold-less-this seconds paired by run (their mean), each with its t interval, the variance pooled
over the side's modes of that kind (`t_intervals.pooled_t_intervals`: two runs leave each mode
one degree of freedom, t = 12.7).
What it is not: a measurement (`startup.session`), the phase arithmetic (`startup.phases`) or
an interval's (`harness.statistics.t_intervals`).
Invariant: time saved is cold's wall time less this start's, by the clock, never the ledger's
`remote_cache_time_saved_s`; a failed start derives nothing and is never shown as its kind; a
pooled interval pools only modes of one side and start kind whose variances agree, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nanobench.startup.phases import (
    first_pass_s,
    start_phases,
    step_graphs,
)

if TYPE_CHECKING:  # the statistics load numpy and scipy: a start's rows are built without them
    from nanobench.harness.statistics.stats import Interval


@dataclass(frozen=True)
class StartRow:
    mode: str
    kind: str  # cold | warm | hot
    run: int
    side: str = ""  # before | after in a --vs run; "" (and no CSV column) in a plain run
    status: str = "ok"
    ready_s: float | None = None  # launch to the first pass's end: every graph built or loaded
    first_token_s: float | None = None  # launch to the first step's output
    bookkeeping_s: float | None = None  # the worker reading torch between steps: not in ready_s
    wall_s: float | None = None  # the process, launch to exit (the parent's clock)
    python_s: float | None = None
    import_s: float | None = None
    artifacts_s: float | None = None
    make_s: float | None = None
    warm_up_s: float | None = None  # a target that compiles itself (vllm): its warm-up, its clock
    prefill_s: float | None = None
    trace_s: float | None = None
    guards_s: float | None = None
    cache_key_s: float | None = None
    aot_s: float | None = None
    passes_s: float | None = None
    lowering_s: float | None = None
    codegen_s: float | None = None
    build_s: float | None = None
    cache_load_s: float | None = None
    runtime_s: float | None = None  # first calls: CUDA graph recording, Triton's autotuning
    steps_s: float | None = None
    unattributed_s: float | None = None
    compile_s: float | None = None  # the ledger's frame seconds, every graph
    graphs: int | None = None
    fx_hits: int | None = None
    fx_misses: int | None = None
    fx_bypasses: int | None = None
    aot_hits: int | None = None
    aot_misses: int | None = None
    aot_bypasses: int | None = None
    aot_saved: int | None = None
    cache_write_errors: int | None = None
    kernels_built: int | None = None  # shared libraries this start wrote to its cache
    rebuilt: bool | None = None  # a graph that hit the FX cache yet built its kernel again
    missed: str | None = None  # a cache this start should have hit, per graph, and what changed
    artifact_bytes: int | None = None  # cold: saved for the hot starts; hot: loaded
    pgo: str | None = None  # dynamo's automatic-dynamic PGO: off (pinned) | on
    pgo_state_found: bool | None = None
    step_ms: float | None = None  # the steady step after, a second pass over the same steps
    ready_gm_s: float | None = None  # ready_s of this mode and kind, geometric mean over runs
    ready_gm_s_low: float | None = None
    ready_gm_s_high: float | None = None
    ready_gm_s_df: float | None = None
    ready_gm_s_variance: str | None = None  # own: its runs, or pooled over the side's modes
    saved_s: float | None = None  # cold's ready_s less this start's, mean over runs
    saved_s_low: float | None = None
    saved_s_high: float | None = None
    saved_s_df: float | None = None
    saved_s_variance: str | None = None  # own: its runs, or pooled over the side's modes
    torch_version: str | None = None
    cpu_capability: str | None = None
    aten_cpu_capability: str | None = None
    threads: int | None = None

    @property
    def start(self) -> str:
        """The start as a member's name: "dynamic warm 2"."""
        return f"{self.mode} {self.kind} {self.run}"


@dataclass(frozen=True)
class GraphRow:
    mode: str
    kind: str
    run: int
    graph: int  # in compile order within the start
    step: int  # the first-pass step that built or loaded it
    side: str = ""
    name: str = ""  # code object:first line
    trace_s: float = 0.0
    guards_s: float = 0.0
    cache_key_s: float = 0.0
    aot_s: float = 0.0
    passes_s: float = 0.0
    lowering_s: float = 0.0
    codegen_s: float = 0.0
    build_s: float = 0.0
    cache_load_s: float = 0.0
    frame_s: float = 0.0  # the ledger's whole frame
    fx_hit: bool = False
    fx_miss: bool = False  # looked up, not found: the cache saved this graph
    aot_hit: bool = False
    rebuilt: bool = False
    missed: str = ""


CACHE_COUNTS = {
    "fx_hits": ("inductor", "fxgraph_cache_hit"),
    "fx_misses": ("inductor", "fxgraph_cache_miss"),
    "fx_bypasses": ("inductor", "fxgraph_cache_bypass"),
    "cache_write_errors": ("inductor", "fxgraph_cache_write_error"),
    "aot_hits": ("aot_autograd", "autograd_cache_hit"),
    "aot_misses": ("aot_autograd", "autograd_cache_miss"),
    "aot_bypasses": ("aot_autograd", "autograd_cache_bypass"),
    "aot_saved": ("aot_autograd", "autograd_cache_saved"),
}


def graph_rows(ready: dict, side: str = "") -> list[GraphRow]:
    out = []
    # step 0: the graphs compiled while the step was made (a self-compiled target's warm-up)
    for step, found in enumerate([ready.get("made") or {"frames": []}, *ready["steps"]]):
        for g in step_graphs(found):
            out.append(
                GraphRow(
                    mode=ready["mode"],
                    kind=ready["kind"],
                    run=ready["run"],
                    graph=len(out) + 1,
                    step=step,
                    side=side,
                    name=g["graph"],
                    **{f"{k}_s": v for k, v in g["phases"].items()},
                    frame_s=round(g["frame_s"], 6),
                    fx_hit=bool(g["fx_hits"]),
                    fx_miss=bool(g["fx_misses"]),
                    aot_hit=bool(g["aot_hits"]),
                    rebuilt=g["rebuilt"],
                )
            )
    return out


def key_components(lines: list[str]) -> dict[str, tuple[str, list[str]]]:
    """The FX cache key's components: '[hash] name: value' lines, a value's further lines
    (a graph's code) joined to it; name -> (hash, value lines)."""
    found: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in lines:
        if line.startswith("[") and "] " in line:
            digest, _, rest = line[1:].partition("] ")
            name, _, value = rest.partition(": ")
            found[name] = (digest, [value])
        elif name is not None:
            found[name][1].append(line)
    return found


def changed_components(lines: list[str], cold_lines: list[str]) -> list[str]:
    """The components whose hash differs from cold's; where a value differs by a line, that
    line beside cold's (the constant a graph baked in)."""
    mine, theirs = key_components(lines), key_components(cold_lines)
    out = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name, ("", [])), theirs.get(name, ("", []))
        if a[0] == b[0]:
            continue
        differ = [(x.strip(), y.strip()) for x, y in zip(a[1], b[1]) if x != y]
        out.append(
            f"{name} ({differ[0][0][:80]!r}, cold {differ[0][1][:80]!r})" if differ else name
        )
    return out


def missed(graphs: list[GraphRow], ready: dict, cold: dict | None) -> list[GraphRow]:
    # `cold` is this start's own side's cold start: the caller keys it by side.
    """Warm and hot graphs that missed a cache their cold start saved, each with what changed."""
    if ready["kind"] == "cold" or cold is None:
        return graphs
    cold_graphs, cold_details = graph_rows(cold), cold.get("hash_details", [])
    aot_saved = cold["counters"]["aot_autograd"].get("autograd_cache_saved", 0)
    write_errors = cold["counters"]["inductor"].get("fxgraph_cache_write_error", 0)
    out = []
    for i, g in enumerate(graphs):
        reasons = []
        # Only a graph the cold start looked up can be missed (the eager backend looks up none).
        if not g.fx_hit and i < len(cold_graphs) and cold_graphs[i].fx_miss:
            lines = ready["hash_details"][i] if i < len(ready["hash_details"]) else []
            theirs = cold_details[i] if i < len(cold_details) else []
            changed = changed_components(lines, theirs)
            if write_errors:
                reasons.append(f"FX graph cache: the cold start could not write it "
                               f"({write_errors} write errors: a full or read-only cache?)")  # fmt: skip
            else:
                reasons.append(
                    "FX graph cache" + (f" (key changed: {', '.join(changed)})" if changed else "")
                )
        if aot_saved and not g.aot_hit:
            reasons.append("AOTAutograd cache")
        out.append(replace(g, missed="; ".join(reasons)))
    return out


def rows_of(
    ready: dict, launched: float, wall_s: float, cold: dict | None, pgo: bool, side: str = ""
) -> tuple[StartRow, list[GraphRow]]:
    """A worker's ready row as the start's row and its graphs' rows, on its side."""
    phases = start_phases(ready, launched)
    graphs = missed(graph_rows(ready, side), ready, cold)
    c = ready["counters"]
    counts = {k: int(c.get(where, {}).get(name, 0)) for k, (where, name) in CACHE_COUNTS.items()}
    steps = ready["steps"]
    first = steps[0]["ended"] - steps[0]["began"] + ready["stamps"]["prefilled"] if steps else None
    misses = [f"graph {g.graph} ({g.name}): {g.missed}" for g in graphs if g.missed]
    own = counts["fx_misses"] + counts["aot_misses"]
    if not graphs and own and ready["kind"] != "cold":
        # a target that compiles itself (vllm) builds before the first step: no graph of the
        # steps names the miss, torch's counters do
        misses.append(f"its own warm-up, before the first step: {counts['fx_misses']} FX and "
                      f"{counts['aot_misses']} AOTAutograd cache misses")  # fmt: skip
    row = StartRow(
        mode=ready["mode"],
        kind=ready["kind"],
        run=ready["run"],
        side=side,
        ready_s=round(sum(phases.values()), 4),
        first_token_s=round(first - launched, 4) if steps else None,
        bookkeeping_s=round(first_pass_s(ready)[1], 4),
        wall_s=round(wall_s, 4),
        **{f"{k}_s": round(v, 4) for k, v in phases.items()},
        # a self-compiled target's graphs were built in its make: its warm-up is its compile
        compile_s=round(sum(g.frame_s for g in graphs) + phases["warm_up"], 4),
        graphs=len(graphs),
        **counts,
        kernels_built=ready["kernels_built"],
        rebuilt=any(g.rebuilt for g in graphs),
        missed="; ".join(misses) or None,
        artifact_bytes=ready["artifact_bytes_loaded"] or ready["artifact_bytes_saved"],
        pgo="on" if pgo else "off",
        pgo_state_found=ready["pgo_state_found"],
        step_ms=ready["step_ms"],
        torch_version=ready["torch_version"],
        cpu_capability=ready["cpu_capability"],
        aten_cpu_capability=ready["aten_cpu_capability"] or None,
        threads=ready["threads"],
    )
    return row, graphs


def failed_row(mode: str, kind: str, run: int, status: str, pgo: bool, side: str = "") -> StartRow:
    return StartRow(mode=mode, kind=kind, run=run, side=side, status=status,
                    pgo="on" if pgo else "off")  # fmt: skip


def by_mode(cells: dict[tuple, dict[int, float]], log: bool) -> dict[tuple, Interval]:
    """Each (side, mode, kind) cell's values by run as its mean and t interval, the variance
    pooled over the modes of its side and kind: a mode's cold start is not pooled with its warm
    one (compiling and loading vary unalike), nor one side with the other. `log`: seconds whose
    spread is a share of them, pooled as logs (their geometric mean)."""
    from nanobench.harness.statistics.t_intervals import pooled_t_intervals

    out = {}
    for side, kind in dict.fromkeys((s, k) for s, _, k in cells):
        mine = {m: runs for (s, m, k), runs in cells.items() if (s, k) == (side, kind)}
        found = pooled_t_intervals(mine, unit="modes", log=log)
        out.update({(side, mode, kind): i for mode, i in found.items()})
    return out


def interval_fields(prefix: str, interval: Interval) -> dict:
    """The row's `<prefix>`, `_low`, `_high`, `_df` and `_variance` of an interval (None: NaN)."""
    ends = (interval.estimate, interval.low, interval.high)
    value, low, high = (None if v != v else round(v, 4) for v in ends)
    df = interval.df if low is not None else None
    return {prefix: value, f"{prefix}_low": low, f"{prefix}_high": high, f"{prefix}_df": df,
            f"{prefix}_variance": interval.variance_from or None}  # fmt: skip


def with_saved(rows: list[StartRow]) -> list[StartRow]:
    """Each ok row's ready_gm_s (its mode and kind's ready_s over runs) and each warm and hot
    row's saved_s (its side's cold ready_s less its own, paired by run), with their intervals.

    Ready seconds pool as logs: a busy machine slows a start by a share of it, and a default run
    on a loaded 2-core box had every mode's cold start rise 39 to 81% from run 1 to run 2 (3.99
    to 7.23 s off, 41.2 to 57.1 s dynamic, 48.9 to 74.7 s static): variances within 3.3 times
    of each other as logs, 24 and 63 times off's as seconds. A saving, a difference that may be
    0 or below, pools in seconds.
    """
    ok = [r for r in rows if r.status == "ok"]
    cells: dict[tuple, dict[int, float]] = {}
    for r in ok:
        cells.setdefault((r.side, r.mode, r.kind), {})[r.run] = r.ready_s
    cold = {(r.side, r.mode, r.run): r for r in ok if r.kind == "cold"}
    saved: dict[tuple, dict[int, float]] = {}
    for r in ok:
        if r.kind != "cold" and (r.side, r.mode, r.run) in cold:
            mine = saved.setdefault((r.side, r.mode, r.kind), {})
            mine[r.run] = cold[(r.side, r.mode, r.run)].ready_s - r.ready_s
    ready, savings = by_mode(cells, log=True), by_mode(saved, log=False)
    out = []
    for r in rows:
        key = (r.side, r.mode, r.kind)
        if r.status == "ok":
            r = replace(r, **interval_fields("ready_gm_s", ready[key]))
        if r.status == "ok" and key in savings:
            r = replace(r, **interval_fields("saved_s", savings[key]))
        out.append(r)
    return out
