"""The decode step recorded once per shape and replayed after: recorders, graphs and their gates.

What it is: `CapturedGraph`, one recorded shape (a `replay()` that takes no arguments, the
output buffer it writes, the input addresses it was recorded against, the rows of the plan it
was recorded on), and `CapturedDecode`, the wrapper in front of `CompiledDecode`: the first
sighting of a shape records, every sighting replays, a view without a plan falls through to
eager and is counted. `capture_all` walks a whole capture list up front, largest shape first,
off synthetic all-padding batches (`padding_plan`) that write only to the sink slot.
With an `output_buffer` ([max rows, V], allocated once by the engine outside any pool) every
graph writes its logits into a window of that one buffer, so a list of N graphs holds one
logits buffer, not N (each graph's own logits would live as long as the graph and no later
recording could reuse them). The recorder is the seam (`recorders.py`).
What it is not: a sampler or a scheduler. Sampling runs outside the recorded region, on
logits the caller consumes before the next replay (`check_output_not_held`).
Invariant: gates that read tensor values run once, before a graph exists
(`check_capture_preconditions`); the two that run on every replay read only `data_ptr()`s
and a Python tuple (`check_addresses_stable`, `check_replay_rows`), so a replay never
synchronises with the device. A step always returns a replay's output, never the values the
recording call produced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from engine.buckets import DecodeBuckets, check_shape_in_set
from engine.inputs import StepInputs, check_step_inputs_persistent
from engine.padding import check_pad_inert
from engine.plan import DecodePlan
from engine.recorders import default_recorder, ordinary_pool_bytes, warm_library_state
from engine.slots import check_mapping_is_window

Shape = tuple[int, int]


class CaptureUnsound(RuntimeError):
    """A replay that would compute something other than the step it stands for."""


# -- one recorded shape ------------------------------------------------------------------------


def step_addresses(input_ids: torch.Tensor, plan: DecodePlan) -> tuple[int, ...]:
    """The storage a decode forward reads off its arguments, as data_ptr()s (no device read)."""
    return (
        input_ids.data_ptr(),
        plan.write_slots.data_ptr(),
        plan.slot_mapping.data_ptr(),
        plan.context_lens.data_ptr(),
        plan.positions.data_ptr(),
    )


@dataclass
class CapturedGraph:
    """One recorded shape.

    rows is the recorded plan's rows tuple for a graph recorded lazily on a real step, and
    None for one recorded up front on a synthetic all-padding batch (it covers no row, so any
    prefix of its row count may replay it; see `check_replay_rows`).
    """

    shape: Shape
    replay: Callable[[], object]
    output: torch.Tensor  # (B, V) the buffer every replay writes (a window when shared)
    addresses: tuple[int, ...]
    rows: tuple[int, ...] | None
    pool: Hashable
    # Wall seconds of the recorder's call, the device synchronised on both ends, and its name.
    record_s: float
    recorder: str
    # CUDA only: reserved-memory growth of the pool and the recording's peak workspace, each
    # less what a library took outside every graph's pool in that window (`library_bytes`).
    pool_growth_bytes: int | None = None
    peak_bytes: int | None = None
    library_bytes: int | None = None
    replays: int = 0
    keepalive: object = None


# -- gates --------------------------------------------------------------------------------------

_HOST_READS = ("item", "tolist", "__int__", "__float__", "__bool__", "__index__")


@contextmanager
def host_reads_refused():
    """Make every Python read of a tensor's value raise CaptureUnsound while the block runs."""
    saved = {name: getattr(torch.Tensor, name) for name in _HOST_READS}

    def refuse(name: str):
        def read(self, *args, **kwargs):
            raise CaptureUnsound(
                f"the decode forward read a tensor value on the host (Tensor.{name}): that is a "
                "graph break under dynamo and an illegal synchronisation inside a CUDA capture; "
                "move the read to plan_decode"
            )

        return read

    try:
        for name in _HOST_READS:
            setattr(torch.Tensor, name, refuse(name))
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def check_forward_is_one_graph(fn: Callable, args: tuple, mode: str = "trap") -> None:
    """The forward is one graph with no breaks (check_single_graph, engine side).

    mode "trap" (the default) runs the forward once with every host read of a tensor value
    made to raise. The breaks Days 47-49 found in this forward were all such reads, and the
    same read is exactly what a CUDA capture cannot contain, so the trap is the check that
    matters for recording, at the cost of one eager forward (~8 ms on the tiny model against
    ~5 s for dynamo.explain). It cannot see a break dynamo takes for another reason, e.g. a
    function dynamo skips: mode "explain" runs torch._dynamo.explain over the raw forward and
    needs (1, 0) graphs and breaks.
    """
    # A CompiledDecode's own forward: the code it traces, without compiling it under the trap.
    raw = getattr(fn, "fn", fn)
    if mode == "trap":
        with host_reads_refused(), torch.no_grad():
            raw(*args)
        return
    if mode != "explain":
        raise ValueError(f"single-graph check {mode!r}: expected trap or explain")
    with torch.no_grad():
        out = torch._dynamo.explain(raw)(*args)
    if (out.graph_count, out.graph_break_count) != (1, 0):
        first = out.break_reasons[0].reason.splitlines()[0] if out.break_reasons else "?"
        raise CaptureUnsound(
            f"decode forward traced to {out.graph_count} graphs with {out.graph_break_count} "
            f"breaks, expected 1 and 0 (first: {first}); run `nanobench explain`"
        )


def check_ids_persistent(input_ids: torch.Tensor, inputs: StepInputs) -> None:
    if input_ids.data_ptr() != inputs.input_ids.data_ptr():
        raise CaptureUnsound("input_ids is a fresh tensor, not a window on the persistent ids")


def check_capture_preconditions(
    fn: Callable,
    input_ids: torch.Tensor,
    plan: DecodePlan,
    *,
    cache,
    buckets: DecodeBuckets,
    inputs: StepInputs,
    single_graph: str = "trap",
) -> None:
    """The earlier days' gates, in their order, once per capture, before a graph exists.

    single graph -> the mapping is a window of the slot table -> shape in set and pad inert ->
    inputs persistent. Each raises its own module's exception (SlotsUnsound, BucketsUnsound,
    PadUnsound, InputsUnsound) so the error names the promise that broke; the single-graph
    and ids checks, which have no engine module of their own, raise CaptureUnsound. The value
    gates (pad inert reads context_lens and write_slots) run here only, never per replay.
    """
    check_forward_is_one_graph(fn, (input_ids, plan), single_graph)
    check_mapping_is_window(plan.slot_mapping, cache.slots)
    check_shape_in_set(buckets, (plan.graph_rows, plan.graph_width))
    check_pad_inert(plan, cache)
    check_step_inputs_persistent(plan, inputs)
    check_ids_persistent(input_ids, inputs)


def check_addresses_stable(graph: CapturedGraph, input_ids: torch.Tensor, plan: DecodePlan) -> None:
    """Every replay: the step's tensors live where the recording read them (data_ptr only)."""
    now = step_addresses(input_ids, plan)
    if now != graph.addresses:
        names = ("input_ids", "write_slots", "slot_mapping", "context_lens", "positions")
        moved = [n for n, a, b in zip(names, now, graph.addresses, strict=True) if a != b]
        raise CaptureUnsound(
            f"shape {graph.shape}: {', '.join(moved)} moved since the recording; a replay "
            "would read the recorded storage, not this step's"
        )


def check_replay_rows(graph: CapturedGraph, plan: DecodePlan) -> None:
    """Every replay: the rows are the ones the graph stands for (a Python tuple, no device read).

    A lazily recorded graph keeps its plan's rows forever (the held plan is frozen Python
    around live storage, and rows is the one field that is Python): it replays only for those
    rows. A graph recorded up front covers no row (rows None): any prefix 0..n-1 with n at most
    its row count replays it, padded rows being inert.
    """
    if graph.rows is None:
        n = len(plan.rows)
        if plan.rows != tuple(range(n)) or n > graph.shape[0]:
            raise CaptureUnsound(
                f"rows {plan.rows} are not a prefix of the {graph.shape[0]} rows graph "
                f"{graph.shape} was recorded for"
            )
        return
    if plan.rows != graph.rows:
        raise CaptureUnsound(
            f"shape {graph.shape} was recorded for rows {graph.rows}, this step decodes "
            f"{plan.rows}; recording up front (Engine.capture) covers any prefix"
        )


def check_all_shapes_captured(shapes: Iterable[Shape], graphs: Iterable[Shape]) -> None:
    """Every shape of the capture list has a recorded graph."""
    have = set(graphs)
    missing = [tuple(s) for s in shapes if tuple(s) not in have]
    if missing:
        raise CaptureUnsound(
            f"{len(missing)} shapes of the capture list have no graph, e.g. {missing[:3]}: a step "
            "at one of them records mid-run, in front of a request; call Engine.capture() first"
        )


def check_replays_dominate(captures: int, replays: int, min_share: float = 0.5) -> None:
    """At least min_share of replays reused a graph rather than following its own recording."""
    if replays < 1:
        raise CaptureUnsound("no replays: nothing was served from a recorded graph")
    share = 1.0 - captures / replays
    if share < min_share:
        raise CaptureUnsound(
            f"{captures} recordings for {replays} replays: only {share:.1%} reused a graph, "
            f"expected at least {min_share:.0%}; the run does not stay inside its bucket set"
        )


def check_output_not_held(held: Iterable[object], outputs: Iterable[torch.Tensor]) -> None:
    """Nothing kept past a step shares storage with a replay's output buffer.

    A replay writes through the storage it was recorded against, so a view on an output has a
    one-step lifetime: the next replay of that graph overwrites it. Held objects that are not
    tensors (the sampler's token lists) pass.
    """
    buffers = {o.untyped_storage().data_ptr() for o in outputs}
    for i, obj in enumerate(held):
        if isinstance(obj, torch.Tensor) and obj.untyped_storage().data_ptr() in buffers:
            raise CaptureUnsound(
                f"held item {i} is a view on a replay's output buffer: the next replay writes "
                "through it; copy (clone) or consume it before the next step"
            )


# -- the synthetic batch ----------------------------------------------------------------------


def padding_plan(
    cache, inputs: StepInputs, rows: int, width: int
) -> tuple[torch.Tensor, DecodePlan]:
    """(input_ids, plan) of an all-padding batch of shape (rows, width) writing only the sink.

    Every field is a window on the persistent buffers (ids 0, positions 0, context_lens 0,
    write slots the sink) or on the slot table, so the recorded graph reads the same storage
    a real step of this shape writes. Nothing grows: no block is allocated and no table moves.
    """
    sink = cache.sink_slot
    inputs.write([0] * rows, [sink] * rows, [0] * rows)
    inputs.write_ids([0] * rows)
    plan = DecodePlan(
        write_slots=inputs.write_slots[:rows],  # (B,)
        slot_mapping=cache.slots.read(rows, width),  # (B, W)
        context_lens=inputs.context_lens[:rows],  # (B,)
        positions=inputs.positions[:rows],  # (B, 1)
        rows=(),
        lens=(),
        pad_rows=rows,
        sink_slot=sink,
        epoch=cache.epoch,
        bucketed=True,
    )
    return inputs.input_ids[:rows], plan  # (B, 1)


# -- the wrapper ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeCapture:
    shape: Shape
    record_s: float
    recorder: str
    pool_growth_bytes: int | None
    peak_bytes: int | None
    library_bytes: int | None


@dataclass(frozen=True)
class CaptureStats:
    """What capturing a list up front cost: per shape, and in total.

    total_s is the walk's wall time: each shape's gates, synthetic batch and recording.
    """

    shapes: tuple[ShapeCapture, ...]
    total_s: float
    # CUDA only: the pool's reserved growth and the device's free-memory drop over the walk,
    # less what a library took outside every graph's pool (`library_bytes`).
    pool_growth_bytes: int | None = None
    device_bytes: int | None = None
    library_bytes: int | None = None

    @property
    def count(self) -> int:
        return len(self.shapes)


@dataclass(frozen=True)
class DeviceMemory:
    """The allocator's figures at one moment; `library` is what is allocated outside every
    graph's pool (`recorders.ordinary_pool_bytes`), where library state such as cuBLAS
    workspaces lives."""

    reserved: int
    allocated: int
    free: int
    library: int


def _memory_now(device: torch.device) -> DeviceMemory | None:
    if device.type != "cuda":
        return None
    # The libraries' per-stream state (cuBLAS workspaces on the recorder's streams) is made
    # before the first reading, so no recording's window pays it.
    warm_library_state(device)
    torch.cuda.synchronize(device)
    # Hand back what warm-ups cached in the ordinary pool, so reserved growth is the graph
    # pool's: a live graph's private segments are never released by empty_cache.
    torch.cuda.empty_cache()
    return DeviceMemory(
        torch.cuda.memory_reserved(device),
        torch.cuda.memory_allocated(device),
        torch.cuda.mem_get_info(device)[0],
        ordinary_pool_bytes(device),
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class CapturedDecode:
    """Record once per shape, replay after; a view with no plan falls through and is counted."""

    fn: Callable
    cache: object
    inputs: StepInputs
    buckets: DecodeBuckets
    recorder: Callable | None = None
    # What runs a view that has no plan (the engine's unplanned forward); default fn.
    fallback: Callable | None = None
    # (Bmax, V): the one logits buffer every graph writes a window of; None: one per graph.
    output_buffer: torch.Tensor | None = None
    single_graph: str = "trap"
    graphs: dict[Shape, CapturedGraph] = field(default_factory=dict)
    history: list[Shape] = field(default_factory=list)
    recorded_in_call: list[bool] = field(default_factory=list)
    fell_through: int = 0
    replays: int = 0
    pool: Hashable | None = None

    def __post_init__(self) -> None:
        if self.recorder is None:
            self.recorder = default_recorder

    def __call__(self, input_ids: torch.Tensor, view) -> torch.Tensor:
        if not isinstance(view, DecodePlan):
            self.fell_through += 1
            return (self.fallback or self.fn)(input_ids, view)
        shape = view.graph_shape
        self.history.append(shape)
        graph = self.graphs.get(shape)
        self.recorded_in_call.append(graph is None)
        if graph is None:
            graph = self.record(input_ids, view, rows=view.rows)
        else:
            check_addresses_stable(graph, input_ids, view)
            check_replay_rows(graph, view)
        graph.replay()
        graph.replays += 1
        self.replays += 1
        # A replay's output, never the recording call's (on a device nothing ran yet).
        return graph.output

    def record(
        self, input_ids: torch.Tensor, plan: DecodePlan, rows: tuple[int, ...] | None
    ) -> CapturedGraph:
        shape = (plan.graph_rows, plan.graph_width)
        check_capture_preconditions(
            self.fn,
            input_ids,
            plan,
            cache=self.cache,
            buckets=self.buckets,
            inputs=self.inputs,
            single_graph=self.single_graph,
        )
        device = input_ids.device
        before = _memory_now(device)
        if before is not None:
            torch.cuda.reset_peak_memory_stats(device)
        window = None
        if self.output_buffer is not None:
            window = self.output_buffer[: plan.graph_rows]  # (B, V) rows 0..B-1, never a copy
        _sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            recording = self.recorder(self.fn, (input_ids, plan), self.pool, window)
        _sync(device)  # the recording's work done, not only launched
        record_s = time.perf_counter() - start
        after = _memory_now(device)
        if self.pool is None:
            self.pool = recording.pool
        growth = peak = library = None
        if before is not None and after is not None:
            library = after.library - before.library
            growth = after.reserved - before.reserved - library
            peak = torch.cuda.max_memory_allocated(device) - before.allocated - library
        graph = CapturedGraph(
            shape=shape,
            replay=recording.replay,
            output=recording.output,
            addresses=step_addresses(input_ids, plan),
            rows=rows,
            pool=recording.pool,
            record_s=record_s,
            recorder=recording.recorder,
            pool_growth_bytes=growth,
            peak_bytes=peak,
            library_bytes=library,
            keepalive=recording.keepalive,
        )
        self.graphs[shape] = graph
        return graph

    def capture_all(self, shapes: Sequence[Shape] | None = None) -> CaptureStats:
        """Record every shape of the list before serving, largest first, into one pool.

        Largest first so the first recording sizes the shared pool and every later one fits in
        what it left. Shapes already recorded are skipped.
        """
        todo = sorted(
            shapes if shapes is not None else self.buckets.shapes,
            key=lambda s: (s[0] * s[1], s[0]),
            reverse=True,
        )
        device = self.cache.device
        start_mem = _memory_now(device)
        start = time.perf_counter()
        done = []
        for rows, width in todo:
            if (rows, width) in self.graphs:
                continue
            input_ids, plan = padding_plan(self.cache, self.inputs, rows, width)
            graph = self.record(input_ids, plan, rows=None)
            done.append(
                ShapeCapture(
                    graph.shape,
                    graph.record_s,
                    graph.recorder,
                    graph.pool_growth_bytes,
                    graph.peak_bytes,
                    graph.library_bytes,
                )
            )
        _sync(device)
        total_s = time.perf_counter() - start
        end_mem = _memory_now(device)
        growth = device_bytes = library = None
        if start_mem is not None and end_mem is not None:
            library = end_mem.library - start_mem.library
            growth = end_mem.reserved - start_mem.reserved - library
            device_bytes = start_mem.free - end_mem.free - library
        return CaptureStats(tuple(done), total_s, growth, device_bytes, library)

    # -- what the run did --------------------------------------------------------------------

    @property
    def recordings(self) -> int:
        return len(self.graphs)

    @property
    def recorded_mid_run(self) -> int:
        """Graphs recorded on a real step (in front of a request), not up front."""
        return sum(self.recorded_in_call)

    @property
    def calls(self) -> int:
        return len(self.history)

    @property
    def distinct(self) -> int:
        return len(set(self.history))

    @property
    def outputs(self) -> list[torch.Tensor]:
        return [g.output for g in self.graphs.values()]

    @property
    def output_bytes(self) -> int:
        """Bytes of the distinct storages the graphs' outputs live in: what the list keeps."""
        storages = {
            o.untyped_storage().data_ptr(): o.untyped_storage().nbytes() for o in self.outputs
        }
        return sum(storages.values())

    @property
    def pools(self) -> list[Hashable]:
        return [g.pool for g in self.graphs.values()]
