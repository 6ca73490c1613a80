"""What crosses decode's process boundary, typed: the run a worker gets and the rows it answers.

What it is: `RunSpec` (parent to worker: the checkpoint, the shape, the system; its JSON is the
worker's stdin), `ProbeRow` (the roofline probe's answer), `SystemRow` (a system worker's ready
and final rows) and `DecodeRow` (a system's row with everything `derive` adds: what `decode.csv`
and `--json` hold; its fields, minus `tokens` (`run.DecodeKind.unwritten`), are the CSV's
columns in order).
What it is not: arithmetic or measurement (`nanobench.decode.bench`, `nanobench.decode.roofline`).
Invariant: a worker's payload is rebuilt with `rows.rebuild`, so a renamed or dropped key is an
error naming it; a field defaults to None only where a failed or not-yet-finished row lacks it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSpec:
    """One worker's run. `system` is the decode system or the roofline probe."""

    model: str  # the checkpoint directory (a preset materialised)
    rows: int
    prompt_len: int
    steps: int
    max_model_len: int  # the engine's slot-table width (never 0 here: the run's own)
    width_multiple: int
    device: str
    dtype: str  # resolved: never "auto"
    threads: int  # 0: torch's default
    backend: str
    hf_attn: str
    weight_bytes: int
    kv_bytes: int
    step_flops: int
    seed: int = 0  # of the random prompts when the checkpoint ships no tokenizer
    system: str = ""
    knob: str = ""  # the side's --try knob, applied for the whole process ("" plain)


@dataclass(frozen=True)
class ProbeRow:
    """The roofline probe's rates; a failed probe has only its status."""

    status: str  # ok | error: <line> | timeout | crashed: <signal>
    system: str | None = None
    side: str = ""  # before | after in a before-and-after run (--vs-model, --vs-dtype)
    probe_bytes: int | None = None
    bandwidth_gbs: float | None = None
    bandwidth_median_gbs: float | None = None
    probe_ms: float | None = None
    gemm_flops: int | None = None
    gemm_side: int | None = None  # the square GEMM's n: 2 n^3 flops a pass
    gemm_gflops: float | None = None
    gemm_median_gflops: float | None = None
    gemm_ms: float | None = None
    threads: int | None = None
    worker_s: float | None = None
    rounds: int | None = None  # the rounds it measured the floor in (rates: their median)


@dataclass(frozen=True)
class SystemRow:
    """A system worker's row: set-up facts at ready, the rest at finish (None before, or failed)."""

    system: str
    status: str
    side: str = ""  # before | after in a before-and-after run
    compile_s: float | None = None  # compiled systems only
    frames_compiled: int | None = None
    build_s: float | None = None
    warmup_s: float | None = None
    torch_version: str | None = None
    threads: int | None = None
    attention: str | None = None
    linear_layout: str | None = None  # engine systems
    hf_version: str | None = None  # transformers systems
    vllm_version: str | None = None  # vLLM's systems
    recorder: str | None = None  # engine-captured
    capture_s: float | None = None  # engine-captured
    captured_shapes: int | None = None  # engine-captured
    builds_measured: int | None = None
    deterministic: bool | None = None
    tokens: list[list[int]] | None = None  # (B, steps) greedy tokens of the warm-up
    peak_rss_mb: float | None = None  # ru_maxrss in MiB (the name predates binary units)
    peak_rss_bytes: int | None = None
    prefill_ms: float | None = None
    mean_ms_per_step: float | None = None
    cpu_ms_per_step: float | None = None
    recorded_mid_run: int | None = None  # engine-captured
    worker_s: float | None = None
    setup_s: float | None = None  # the first worker's spawn to ready, the parent's clock
    later_setup_s: float | None = None  # a later worker's, median: what each process costs


@dataclass(frozen=True)
class DecodeRow:
    """A system's row as written. Field order is the CSV's column order."""

    system: str
    status: str  # ok | error: <line> | timeout | crashed: <signal>
    side: str = ""  # before | after in a before-and-after run (--vs-model, --vs-dtype)
    tokens_match: bool | None = None  # the greedy tokens equal tokens_ref's, every row and step
    tokens_ref: str | None = None  # engine-eager, or hf-eager when engine-eager did not run
    first_mismatch: str | None = None  # "row r step s: a vs b" where they first differ
    ms_per_step: float | None = None  # median of every decode step of every round
    ms_q1: float | None = None
    ms_q3: float | None = None
    ms_iqr: float | None = None
    ms_cv: float | None = None  # std / mean of the same steps
    rounds: int = 0  # timed generations, interleaved with the other systems
    processes: int = 1  # the worker processes those rounds ran in
    tokens_per_s: float | None = None  # rows * 1000 / ms_per_step
    prefill_ms: float | None = None  # generate call to the first token on the host, median
    compile_s: float | None = None  # dynamo's ledger during the warm-up
    ratio_vs_hf_eager: float | None = None  # geometric mean over rounds of the paired ratio
    ratio_vs_hf_eager_low: float | None = None  # 95% bootstrap interval, paired by round
    ratio_vs_hf_eager_high: float | None = None
    ratio_vs_hf_eager_within_share: float | None = None  # of its variance, what more rounds shrink
    ratio_vs_hf_eager_df: float | None = None  # the t quantile's degrees of freedom
    ratio_vs_hf_eager_variance: str | None = None  # rounds, own processes, or pooled
    ratio_vs_hf_compiled: float | None = None  # the same against hf-static-compiled
    ratio_vs_hf_compiled_low: float | None = None
    ratio_vs_hf_compiled_high: float | None = None
    ratio_vs_hf_compiled_within_share: float | None = None  # what more rounds shrink
    ratio_vs_hf_compiled_df: float | None = None  # the t quantile's degrees of freedom
    ratio_vs_hf_compiled_variance: str | None = None  # rounds, own processes, or pooled
    floor_ms: float | None = None  # max(step_bytes / bandwidth, step_flops / GEMM rate)
    floor_bound: str | None = None  # memory | compute
    floor_probe: str | None = None  # ok, or failed: a measured step ran below the floor
    ratio_vs_floor: float | None = None
    ratio_vs_floor_low: float | None = None
    ratio_vs_floor_high: float | None = None
    ratio_vs_floor_within_share: float | None = None  # of its variance, what more rounds shrink
    ratio_vs_floor_df: float | None = None  # the t quantile's degrees of freedom
    ratio_vs_floor_variance: str | None = None  # rounds, own processes, or pooled
    history: str | None = None  # this code's earlier runs here: none yet, how many, since when
    ci_level: float | None = None  # the intervals' level: 0.95 less what earlier looks spent
    load_note: str | None = None  # timed while other processes held cores the threads needed
    peak_rss_mb: float | None = None  # the worker's ru_maxrss in MiB
    mean_ms_per_step: float | None = None  # decode wall time / decode steps, median of rounds
    cpu_ms_per_step: float | None = None  # thread CPU time per decode step, median of rounds
    bandwidth_gbs: float | None = None  # the probe: fastest full read of a weight-sized tensor
    bandwidth_median_gbs: float | None = None
    gemm_gflops: float | None = None  # the probe: a large square GEMM, fastest pass (a peak)
    step_flops: int | None = None  # 2 rows matmul_params + attention's scores and values
    step_bytes: int | None = None  # weight_bytes + kv_bytes
    weight_bytes: int | None = None  # every matrix once (a tied head counted once)
    kv_bytes: int | None = None  # K and V attended over, mean across the decode steps
    warmup_s: float | None = None  # the untimed first generation (where compiling happens)
    build_s: float | None = None  # loading the model (and capturing, for engine-captured)
    capture_s: float | None = None  # engine-captured: recording the capture list up front
    frames_compiled: int | None = None
    builds_measured: int | None = None  # frames compiled while timed: 0, or times include it
    recorded_mid_run: int | None = None  # engine-captured: graphs recorded on a real step
    recorder: str | None = None
    deterministic: bool | None = None  # the warm-up and every round made the same tokens
    tokens_digest: str | None = None
    sample: str | None = None  # row 0's generated tokens as text (a tokenizer shipped)
    attention: str | None = None
    linear_layout: str | None = None  # engine rows: packed or dense
    rows: int | None = None
    prompt_len: int | None = None
    steps: int | None = None
    threads: int | None = None
    dtype: str | None = None
    device: str | None = None
    model: str | None = None
    torch_version: str | None = None
    hf_version: str | None = None
    vllm_version: str | None = None
    worker_s: float | None = None
    setup_s: float | None = None  # the first worker's spawn to ready, the parent's clock
    later_setup_s: float | None = None  # a later worker's, median: what each process costs
    captured_shapes: int | None = None
    peak_rss_bytes: int | None = None
    tokens: list[list[int]] | None = None  # kept for samples; never written (its digest is)
