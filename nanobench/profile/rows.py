"""What `nanobench profile` measures: the profiler's events, and a mode's step by category and kernel.

What it is: `Event` (one profiler event as plain numbers: what the worker reads off
torch.profiler, and all the attribution reads), `CategoryRow` (one category of a mode's steady
step: ms a step, share, calls a step; once the run derives it, net of the profiler's own cost,
`profile.overhead`), `KernelRow` (one kernel or op: its time, bytes and flops
from its shapes, its rate and its distance to the probed floor, where it comes from, and the
user's lines it was called from),
`ProfileRow` (one mode as the CSV and JSON hold it: its unprofiled step with its interval, its
profiled step, the profiler's overhead, the forward's and the host's shares, and the words naming
what caps it; the fields it shares with compile's row are marked so at their declaration,
`TIMING_FIELDS`, and copied from it by name), `Profile` (a first worker's profile as it came
back: its categories, kernels and facts), `ProfiledCompileRow` (compile's row of a mode carrying
its `Profile` through the fleet) and `JoinedRow` (a `ProfileRow` as the run derives it, composed
from the compile row it extends: that row, its categories and kernels beside its columns).
What it is not: the attribution (`profile.attribution`), the worker or the report.
Invariant: rows are frozen and rebuilt from a worker's payload by field name
(`runs.rows.rebuild`): a missing or renamed field fails loudly, never reads as 0; a timing field
is declared once, on `ProfileRow`, and fails at import where compile's row lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from nanobench.compile.rows import CompileRow
from nanobench.harness.runs.rows import rebuild

# Every category a step's time is put in, in the order the table and the bar stack them.
# "unattributed" is the step's time no event covered: shown, never dropped.
CATEGORIES = (
    "guards",  # TorchDynamo Cache Lookup: the guard check every call
    "dynamo entry",  # compiled region, pre-graph bytecode, the AOT wrapper's prologue/epilogue
    "wrapper python",  # the generated module's own Python (`## Call CompiledFxGraph ##` self)
    "fused kernels",  # Inductor's generated kernels (cpp_fused_*, triton_*)
    "extern kernels",  # GEMMs, attention, library calls compiling leaves alone
    "eager ops",  # every other op inside the forward: `off`, and a broken graph's gaps
    "copies and allocation",  # copy_, empty, to, clone, fill_ ... inside the forward
    "forward python",  # the forward's own Python between its ops
    "outside the forward",  # the step's host code around the forward: planning, sampling
    "unattributed",  # the step's wall time no event covered
)
# What a recorded graph could remove: the host's work around and between the kernels.
HOST_CATEGORIES = (
    "guards",
    "dynamo entry",
    "wrapper python",
    "forward python",
    "outside the forward",
)
# What compiling does not change: the library kernels it calls as they are.
UNCHANGED_BY_COMPILING = ("extern kernels",)

STEP_RANGE = "nanobench::step"  # the worker's record_function around each decode step
FORWARD_RANGE = "nanobench::forward"  # ... and around the forward inside it


@dataclass(frozen=True)
class Event:
    """One profiler event on the host: a range [start_us, end_us] on one thread."""

    name: str
    start_us: float
    end_us: float
    thread: int = 0
    shapes: tuple = ()  # each input's shape as a tuple of ints; () for a non-tensor input
    dtypes: tuple = ()  # each input's dtype as the profiler names it ("float", "c10::BFloat16")
    stack: tuple = ()  # "file.py:line" frames of the user's code, innermost first
    device: bool = False  # a record on the GPU (a kernel, a copy): its own clock's span
    correlation: int = 0  # the id a runtime call shares with the device records it made


@dataclass(frozen=True)
class CategoryRow:
    """One category of one mode's steady step, per step."""

    category: str
    ms_per_step: float
    share: float  # of the profiled step; once derived, of the unprofiled step
    calls_per_step: float
    mode: str = ""
    side: str = ""
    profiled_ms_per_step: float | None = None  # as measured under the profiler, its cost in
    profiler_ms_per_step: float | None = None  # the profiler's cost charged to it (`overhead`)


@dataclass(frozen=True)
class KernelRow:
    """One kernel (or op) of one mode's steady step; bytes and flops from its input shapes."""

    name: str
    kind: str  # its category
    calls_per_step: float
    ms_per_step: float
    bytes: int | None = None  # per call; None where its shapes do not say (a fused kernel)
    flops: int | None = None  # per call
    gbs: float | None = None  # achieved: bytes / time per call
    gflops: float | None = None
    floor_ms: float | None = None  # per step, at the run's probed peaks: max(bytes/bw, flops/rate)
    floor_ratio: float | None = None  # ms_per_step / floor_ms
    source: str = ""  # the user's file:line (the op's stack), or the fused kernel's nodes
    # the lines of the user's code it came from ("gptfast.py:31,32"), or why none ("none: ..."):
    # an op's call site, a compiled kernel's FX nodes' (`profile.user_lines`); required
    user_line: str = field(kw_only=True)
    device_ms_per_step: float | None = None  # on a GPU: its device records' time (`device`)
    mode: str = ""
    side: str = ""


COMPILED = {"compiled": True}  # a ProfileRow field's metadata: its compile row's, copied by name


def compiled(default=None):
    """A ProfileRow field that is its compile row's (`TIMING_FIELDS`)."""
    return field(default=default, metadata=COMPILED)


@dataclass(frozen=True)
class ProfileRow:
    """One mode's steady step: timed without the profiler, profiled, and attributed."""

    mode: str = field(metadata=COMPILED)
    side: str = compiled("")
    status: str = compiled("ok")
    step_ms: float | None = compiled()  # unprofiled: median of the rounds' steady steps
    step_ms_q1: float | None = compiled()  # the steady steps' quartiles, over every round
    step_ms_q3: float | None = compiled()
    speedup: float | None = compiled()  # off's step over this mode's, paired by round
    speedup_low: float | None = compiled()
    speedup_high: float | None = compiled()
    profiled_step_ms: float | None = None  # mean of the profiled steady steps
    plain_step_ms: float | None = None  # mean of the same worker's steps beside them, unprofiled
    overhead: float | None = None  # the worker's profiled steps over its plain ones, less 1
    beside_spread: float | None = None  # the passes' noise, a share of a step (`passes.Kept`)
    attributed_ms: float | None = None  # every category but unattributed, the profiler's cost out
    unattributed_ms: float | None = None  # plain_step_ms less the attributed
    guard_us_per_call: float | None = None  # the guards category over its calls: one check
    guard_latency_us: float | None = None  # dynamo's own: one cold check timed at compile (median)
    event_cost_us: float | None = None  # the profiler's cost of one event of this step (`overhead`)
    event_inside_us: float | None = (
        None  # ... of it, what falls inside the event, the probe's split
    )
    probe_event_cost_us: float | None = None  # one no-work op's event cost, probed in the worker
    events_per_step: float | None = None
    forward_share: float | None = None  # of the profiled step, inside the forward
    host_share: float | None = None  # of the profiled step, in HOST_CATEGORIES
    forward_speedup: float | None = None  # off's forward ms (profiled) over this mode's
    amdahl_speedup: float | None = None  # the step speedup forward_speedup predicts at off's share
    steps_profiled: int | None = None
    device_ms_per_step: float | None = None  # on a GPU (`profile.device`), None elsewhere
    device_busy_share: float | None = None  # the device's busy time over the host's step wall
    launches_per_step: float | None = None
    graph_replays_per_step: float | None = None
    graph_device_share: float | None = None  # of the device time, inside replayed graphs
    cudagraph_skips: str = ""  # Inductor's reasons, "; "-joined, for each graph it did not record
    kernels: int | None = None  # distinct kernels and ops seen
    fused_kernels: int | None = None  # distinct fused kernels seen
    generated_kernels: int | None = None  # kernels the generated modules define
    bandwidth_gbs: float | None = None  # the peaks probed in the same worker
    gemm_gflops: float | None = None
    builds: int | None = compiled()
    breaks_per_call: int | None = compiled()
    fell_back: bool | None = compiled()
    compile_s: float | None = compiled()
    rounds: int | None = compiled()
    trace: str = ""  # the mode's chrome trace, for Perfetto or chrome://tracing
    words: str = ""  # what caps this mode, drawn from its rows
    load_note: str | None = compiled()


# ProfileRow's fields that are its compile row's, in column order: declared once, at each field
TIMING_FIELDS = tuple(f.name for f in fields(ProfileRow) if f.metadata.get("compiled"))
_LACKING = sorted(set(TIMING_FIELDS) - {f.name for f in fields(CompileRow)})
if _LACKING:
    raise TypeError(f"ProfileRow: {_LACKING[0]!r} is marked compile's, and CompileRow lacks it")


def fields_of(row, row_type: type) -> dict:
    """`row`'s values of `row_type`'s fields, by name (`row` is one, or extends one)."""
    return {f.name: getattr(row, f.name) for f in fields(row_type)}


@dataclass(frozen=True)
class Profile:
    """A mode's first worker's profile as it came back: its categories and kernels as measured
    (the profiler's cost in them), and the `ProfileRow` fields the profile fills (`facts`)."""

    categories: tuple[CategoryRow, ...]
    kernels: tuple[KernelRow, ...]
    facts: ProfileRow  # its mode's; every field the profile does not fill at its default


def profile_of(payload: Mapping, mode: str) -> Profile:
    """A worker's profile payload (`profile.session.profile_mode`) rebuilt row by row."""
    return Profile(
        tuple(rebuild(CategoryRow, c) for c in payload["categories"]),
        tuple(rebuild(KernelRow, k) for k in payload["kernels"]),
        rebuild(ProfileRow, {"mode": mode, **payload["facts"]}),
    )


@dataclass(frozen=True)
class ProfiledCompileRow(CompileRow):
    """Compile's row of a mode, carrying its first worker's profile (None: none came back)."""

    profile: Profile | None = None

    @classmethod
    def of(cls, row: CompileRow, profile: Profile | None) -> ProfiledCompileRow:
        return cls(**fields_of(row, CompileRow), profile=profile)


@dataclass(frozen=True)
class JoinedRow(ProfileRow):
    """A `ProfileRow` as the run derives it: its columns, and beside them the compile row its
    timing fields were copied from, its categories (net of the profiler's cost where it ran ok)
    and its kernels, each named by its mode and side. Written as `ProfileRow`'s columns alone."""

    compiled_row: CompileRow | None = field(default=None, repr=False)
    category_rows: tuple[CategoryRow, ...] = ()
    kernel_rows: tuple[KernelRow, ...] = ()  # (`kernels` is the column: how many)

    def written(self) -> ProfileRow:
        """The row as the CSV and the JSON hold it."""
        return ProfileRow(**fields_of(self, ProfileRow))
