"""torch's compile ledger, read per step and per graph inside a start's worker.

What it is: `frame_record(metrics)` (the fields of one `CompilationMetrics` record a phase is built
from, in seconds, with the record's cache counts) and `StepLedger` (how much of dynamo's timed
regions, `torch._dynamo.utils.compilation_time_metrics`, a step added: the C++ or Triton builds
behind `compile_file`, guard building, the cache keys), so a graph's phases can use figures the
per-frame record does not split out.
What it is not: the phases (`startup.phases` does that arithmetic, away from torch).
Invariant: every figure is torch's own record of this process; nothing is estimated here.
"""

from __future__ import annotations

HASH_DETAILS = "FX graph cache hash details for key"

# dynamo_timed regions a step's graphs share, by the phase they feed.
REGIONS = {
    "build_s": ("compile_file",),  # the C++ compiler (CPU); Triton's is triton_compile_time_us
    "guards_s": ("build_guards",),
    "cache_key_s": ("inductor_codecache_torch_key", "CacheBase.get_system.triton_key"),
    # dynamo's AOT compile (vLLM's trace-once): its whole capture and its AOTAutograd region,
    # which its per-frame records leave out
    "capture_s": ("fullgraph_capture",),
    "aot_dispatch_s": ("create_aot_dispatcher_function",),
}

US = {
    "frame_s": "dynamo_cumulative_compile_time_us",
    "aot_s": "aot_autograd_cumulative_compile_time_us",
    "inductor_s": "inductor_cumulative_compile_time_us",
    "codegen_s": "inductor_code_gen_cumulative_compile_time_us",
    "pre_grad_s": "pre_grad_pass_time_us",
    "joint_graph_s": "joint_graph_pass_time_us",
    "post_grad_s": "post_grad_pass_time_us",
    "triton_s": "triton_compile_time_us",
    "autotune_s": "compile_time_autotune_time_us",
}

COUNTS = {
    "fx_hits": "inductor_fx_local_cache_hit_count",
    "fx_misses": "inductor_fx_local_cache_miss_count",
    "aot_hits": "aotautograd_local_cache_hit_count",
    "aot_misses": "aotautograd_local_cache_miss_count",
}


def frame_record(m) -> dict:
    """One compiled frame's figures (seconds; None where torch recorded nothing)."""
    record = {k: (getattr(m, f, None) or 0) / 1e6 for k, f in US.items()}
    # A backend that is not AOTAutograd (eager) records only its backend time.
    if not record["aot_s"] and m.backend_compile_time_s:
        record["backend_s"] = m.backend_compile_time_s
    record.update({k: int(getattr(m, f, 0) or 0) for k, f in COUNTS.items()})
    record["graph"] = f"{m.co_name}:{m.co_firstlineno}"
    record["compile_id"] = str(m.compile_id)
    record["failed"] = m.fail_type is not None
    record["runtime"] = bool(m.is_runtime)
    return record


def aot_compiled(records: list[dict], since: dict) -> list[dict]:
    """The frames of a span as one graph where dynamo compiled it ahead of time
    (`torch._dynamo.aot_compile`, vLLM's trace-once): its records carry no frame time and its
    Inductor figures sit on a record torch marks as runtime, so the graph is their sum, its
    frame the capture region and its AOTAutograd the dispatcher region. Other spans: as given."""
    if not since.get("capture_s") or any(r["frame_s"] for r in records):
        return [r for r in records if not r.get("runtime")]
    merged = {k: sum(r[k] for r in records) for k in (*US, *COUNTS)}
    merged.update(frame_s=since["capture_s"], aot_s=since["aot_dispatch_s"], failed=False,
                  graph="ahead of time (dynamo aot_compile)", compile_id=records[0]["compile_id"])  # fmt: skip
    return [merged]


class StepLedger:
    """What dynamo's timed regions added since the last `mark()`, over `metrics` (a dict of lists)."""

    def __init__(self, metrics: dict) -> None:
        self.metrics = metrics
        self.marks: dict[str, int] = {}

    def mark(self) -> None:
        self.marks = {r: len(self.metrics.get(r, ())) for rs in REGIONS.values() for r in rs}

    def since(self, frames: list[dict]) -> dict:
        """This step's frames and the seconds each region added while it ran."""
        added = {
            phase: round(sum(sum(self.metrics.get(r, [])[self.marks.get(r, 0) :]) for r in rs), 6)
            for phase, rs in REGIONS.items()
        }
        return {"frames": frames, **added}
