"""The bucket bench's rows: one frozen dataclass per table of `nanobench buckets`, and the result.

What it is: `RunRow` (one run length priced open and bucketed, read off real plans), `CaptureRow`
(the capture list at a serving configuration for one width multiple), `RecommendedRow` (a
capture list priced over a served batch trace: the one chosen for it, and vLLM's and SGLang's),
`RunTrace` (per-step shapes the diagram draws); a list's startup seconds are its graphs x one
graph's record seconds (`cost.capture.capture_startup_s`), the figure's source named in the row and `BucketsResult` (what
`buckets.bench.measure` returns).
What it is not: the measurement (`nanobench.buckets.bench`) or the formatting (`reports.buckets`).
Invariant: the JSON document's and the CSV's keys are these fields; a row never gains a key
outside its type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nanobench.harness.runs.rows import as_dicts

if TYPE_CHECKING:
    from nanobench.buckets.spec import BucketsSpec


@dataclass
class RunTrace:
    """Per-step shapes of one run, read off the plans (the diagram draws these)."""

    steps: int
    real_rows: int
    open_shapes: list[tuple[int, int]] = field(default_factory=list)
    bucketed_shapes: list[tuple[int, int]] = field(default_factory=list)
    lens: list[int] = field(default_factory=list)
    owned_blocks: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class RunRow:
    """One run length priced open and bucketed, every count read off real plans."""

    table: str  # "run"
    kernel: str
    steps: int
    rows: int  # B real rows
    max_batch: int
    prompt_len: int
    max_model_len: int
    width_multiple: int
    pad_rows: int
    shapes_open: int
    shapes_bucketed: int
    waste: float  # share of bucketed cells that is padding
    cells_open: int
    cells_bucketed: int
    plan_ms_open: float
    plan_ms_bucketed: float
    plan_us_open_median: float
    plan_us_bucketed_median: float
    bucket_shapes: list  # [[B, W], ...] distinct bucketed shapes, in order of first use
    bucketed_open_cells: int
    arith_shapes_open: int
    arith_shapes_bucketed: int
    arith_cells_open: int
    arith_cells_bucketed: int
    pool_slots: int
    sink_slot: int
    blocks_used: int
    num_blocks: int
    block_size: int


@dataclass(frozen=True)
class CaptureRow:
    """The capture list at a serving configuration for one width multiple, both kernels."""

    table: str  # "capture"
    kernel: str
    width_multiple: int
    capture_rows: int
    capture_tokens: int
    row_buckets: int
    width_buckets: int
    shapes: int
    shapes_triton: int
    waste: float  # a typical run's padding share through the reference kernel's buckets
    typical_rows: int
    typical_prompt_len: int
    typical_steps: int
    heads: int
    largest_shape: list  # [B, W] the list's top row and width bucket
    workspace_bytes: int
    workspace_bytes_triton: int
    chosen: bool
    fits_budget: bool
    capture_sizes: list
    size_padding: list  # per listed size: batches served, max pad rows, mean pad share
    mix_batches: int
    mix_pad_share: float
    # Recording the list up front: its graphs x one graph's seconds, per kernel's list.
    startup_s: float
    startup_s_triton: float
    record_s_per_graph: float
    record_s_source: str  # "measured: --record-s-per-graph" or the model and its source


@dataclass(frozen=True)
class RecommendedRow:
    """One capture list priced over a served batch trace (`--batch-trace`, `--max-graphs`)."""

    table: str  # "recommended"
    list_name: str  # "recommended" (chosen for the trace), "vllm" or "sglang"
    capture_sizes: list
    graphs: int
    max_graphs: int
    mix_pad_share: float  # padded rows / computed rows over the trace's covered steps
    padded_rows: int
    computed_rows: int
    mean_pad_rows: float  # padded rows per covered step
    trace_steps: int
    trace_max_rows: int
    uncovered_steps: int  # steps above the list's largest size: they run eagerly
    max_batch: int  # the --max-batch the servers' lists are built for
    startup_s: float  # graphs x record_s_per_graph: recording the list up front
    record_s_per_graph: float
    record_s_source: str
    # With --target and --device-memory (the recommended row only; the servers' lists hold
    # sizes the trace does not, which are not priced): the cap, the list's need, the verdict.
    usable_bytes: int | None = None
    need_bytes: int | None = None  # state + shared pool + outputs of this list
    fits: bool | None = None


@dataclass
class BucketsResult:
    runs: list[RunRow]
    capture: list[CaptureRow]
    traces: list[RunTrace]
    spec: BucketsSpec
    recommended: list[RecommendedRow] = field(default_factory=list)

    @property
    def rows(self) -> list[dict]:
        """Every table as dicts, run rows first: the JSON document's and the CSV's rows."""
        return as_dicts([*self.runs, *self.capture, *self.recommended])

    @property
    def chosen(self) -> CaptureRow:
        """The capture row at the chosen width multiple."""
        return next(r for r in self.capture if r.width_multiple == self.spec.multiple)
