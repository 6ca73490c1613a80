"""`capture`'s row types: one frozen dataclass per table of `capture.csv`.

What it is: `RunTiming` (a run length's timed rounds), `RunRow` (a run length, eager against
replayed: its counts and logits, its recordings' seconds, and its `RunTiming`), `RecordRow`
(one graph a run recorded: its seconds, the recorder that took them, on CUDA its memory),
`PoolRow` (a capture list's pool,
formula, traced and on CUDA measured), `WorkspaceRow` (one shape's traced workspace beside the
formula), `HeldRow` (what a step holds at the top of the list), and `capture_columns()`, the
CSV's columns: the union of their fields in this order.
What it is not: the measurement (`nanobench.capture.bench`) or the gates (`cmd_capture.gates`).
Invariant: a field has the same name as the key the JSON document carried before the rows were
typed; a default (None) stands only for what a row legitimately lacks (CPU: nothing measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from nanobench.harness.runs.rows import columns


@dataclass(frozen=True)
class RunTiming:
    """One run length's timed rounds: step ms per side (median, quartiles) and the ratio."""

    rounds: int
    run_ms_eager: float | None  # median over rounds of one run's decode ms
    run_ms_replayed: float | None
    step_ms_eager: float | None  # median of every timed step of every round
    step_ms_eager_q1: float | None
    step_ms_eager_q3: float | None
    step_ms_eager_iqr: float | None
    step_ms_replayed: float | None
    step_ms_replayed_q1: float | None
    step_ms_replayed_q3: float | None
    step_ms_replayed_iqr: float | None
    ratio_vs_eager: float | None  # replayed / eager step time, geometric mean over rounds
    ratio_vs_eager_low: float | None  # its 95% bootstrap interval, paired by round
    ratio_vs_eager_high: float | None
    replay_not_slower: str  # pass / fail / inconclusive: ratio_vs_eager <= 1.0 on the interval


@dataclass(frozen=True)
class RunRow(RunTiming):
    """One run length: counts and logits of the capturing engine against eager, and its timing.

    The timing fields (`RunTiming`, timed in interleaved rounds after the correctness drive by
    `nanobench.capture.timing`) come first in the CSV, then these.
    """

    status: str
    steps: int
    captures_open: int
    captures_closed: int
    predicted_closed: int
    recorded_mid_run: int
    replays: int
    reuse: float
    max_abs_diff: float
    replay_tolerance: float
    mode: str
    captured_up_front: int
    capture_s: float | None
    capture_pool_bytes: int | None
    kernel: str
    device: str
    rows: int
    prompt_len: int
    width_multiple: int
    max_model_len: int
    # The checks that need the run's graphs, decided in the bench: "ok" or the broken promise.
    pool_shared: str
    output_not_held: str
    all_shapes_captured: str | None  # None: a lazy run has no list to walk
    threads: int  # torch.get_num_threads() in the process that drove and timed both engines
    # The graphs the correctness drive (or the up-front walk) recorded: their record seconds
    # summed and per graph, and the recorder those seconds belong to (eager_recorder on a CPU).
    graphs_recorded: int
    record_s_total: float
    record_s_per_graph: float | None  # None: nothing recorded
    recorder: str | None
    table: str = "run"


@dataclass(frozen=True)
class RecordRow:
    """One graph a run recorded, in recording order: the wall seconds of its recorder's call
    (the device synchronised on both ends) and, on CUDA, the memory it took."""

    steps: int
    mode: str  # up-front or lazy
    rows: int
    width: int
    record_s: float
    recorder: str  # cuda_graph_recorder or eager_recorder: whose seconds these are
    kernel: str
    device: str
    pool_growth_bytes: int | None  # CUDA only, each less what a library took (library_bytes)
    peak_bytes: int | None
    library_bytes: int | None
    table: str = "record"


@dataclass(frozen=True)
class PoolRow:
    """One capture list's pool: the score-rectangle formula, traced and (CUDA) measured."""

    kernel: str
    width_multiple: int | None  # None: Triton's list is rows only
    shapes: int
    shared_pool_bytes: int
    private_pools_bytes: int
    sharing_ratio: float | None
    heads: int
    capture_rows: int
    capture_tokens: int
    capture_sizes: list[int]
    traced_shared_pool_bytes: int | None = None
    traced_private_pools_bytes: int | None = None
    graph_outputs_bytes: int | None = None
    # The engine's capture (capture_output="shared"): the pool's largest traced peak, logits
    # counted as a transient, and the one logits buffer every graph writes; their sum beside
    # a capture keeping each graph's logits (traced shared pool + graph outputs).
    shared_output_pool_bytes: int | None = None
    shared_output_bytes: int | None = None
    capture_bytes: int | None = None
    per_graph_capture_bytes: int | None = None
    shared_pool_measured_bytes: int | None = None
    shared_pool_diff_pct: float | None = None
    private_pools_measured_bytes: int | None = None
    private_pools_diff_pct: float | None = None
    measured_capture_s: float | None = None
    note: str | None = None
    table: str = "pool"


@dataclass(frozen=True)
class WorkspaceRow:
    """One shape at the list's widest width: traced workspace beside the formula."""

    kernel: str
    rows: int
    width: int
    traced_bytes: int
    formula_bytes: int
    difference_bytes: int
    outputs_bytes: int
    peak_bytes: int
    heads: int
    dtype: str
    table: str = "workspace"


@dataclass(frozen=True)
class HeldRow:
    """One thing a decode step holds at the top of the list, per kernel."""

    item: str
    reference_bytes: int
    triton_bytes: int
    table: str = "held"


# one row of capture.csv, by table
CaptureTableRow = RunRow | RecordRow | PoolRow | WorkspaceRow | HeldRow


def capture_columns() -> list[str]:
    """capture.csv's columns: `table`, then each row type's fields not already named."""
    found = ["table"]
    for row_type in (RunRow, RecordRow, PoolRow, WorkspaceRow, HeldRow):
        found += [c for c in columns(row_type) if c not in found]
    return found
