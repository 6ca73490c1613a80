"""The workload `tune` races on: `--rows` every step, or the batch mix of a served trace, and
the capture lists (`--capture-lists`) the race holds against each other on that mix.

What it is: `Workload` (the batch sizes a window decodes, each with its share of the trace's
steps; its largest), `workload(...)` (made from `--rows` or `--batch-trace`) and
`capture_lists(...)` (each named list's batch sizes: `trace` is the list `buckets` recommends
for the trace at `--max-graphs`, `cost.capture_list.optimal_sizes`; `vllm` and `sglang` those
servers' defaults for the largest batch; `1+2+4+8` a list as given), and `further_graphs` (the
graphs a mix adds to each compile, for the estimate).
What it is not: the space (`tune.space` prunes a list on a CPU or one that leaves the trace's
largest batch without a graph) or the timing (`compile.session` decodes the mix).
Invariant: pure; the shares sum to 1; a list is a ladder (ascending, positive); a bad name
or file is one `BadInput` line before any worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from nanobench.harness.errors import BadInput

TRACE = "trace"  # the list buckets recommends for --batch-trace


@dataclass(frozen=True)
class Workload:
    """What a window decodes: each batch size with its share of the served steps."""

    mix: tuple[tuple[int, float], ...]  # (batch rows, share of steps), ascending; shares sum to 1
    batches: tuple[int, ...] = ()  # the trace as read (empty: --rows every step)

    @property
    def top(self) -> int:
        return self.mix[-1][0]

    def line(self) -> str:
        """'rows 4 every step', or 'the batch trace's 1,200 steps: 1 (40%), 4 (35%), 8 (25%)'."""
        if not self.batches:
            return f"rows {self.top} every step"
        shares = ", ".join(f"{b} ({share:.0%})" for b, share in self.mix)
        return f"the batch trace's {len(self.batches):,} steps: {shares}"


def workload(rows: int, batch_trace: str, max_batch: int) -> Workload:
    """`--rows` every step, or `--batch-trace`'s mix, every batch within `--max-batch`."""
    if not batch_trace:
        return Workload(((rows, 1.0),))
    from nanobench.buckets.spec import read_batch_trace
    from nanobench.cost.capture_list import batch_histogram

    batches = read_batch_trace(batch_trace)
    if max(batches) > max_batch:
        raise BadInput(f"--batch-trace {batch_trace}: a step of {max(batches)} rows is above "
                       f"--max-batch {max_batch}; pass --max-batch {max(batches)} or more")  # fmt: skip
    mix = batch_histogram(batches)
    return Workload(tuple((b, n / len(batches)) for b, n in mix.items()), batches)


def further_graphs(mixed: list[tuple[int, int]], one_size: list[tuple[int, int]],
                   modes: tuple[str, ...]) -> float:  # fmt: skip
    """mean over the compiled modes of builds(the mix's step shapes) - builds(--rows'), each
    capped one past the recompile limit: what the mix adds to a compile (under dynamic a batch
    of 1 beside larger ones is a graph of its own, dynamo's 0/1 specialisation)."""
    from nanobench.compile.reduce_overhead import prediction_mode
    from nanobench.cost.compile import DEFAULT_RECOMPILE_LIMIT, MODES, requested_builds

    def builds(shapes: list[tuple[int, int]], mode: str) -> int:
        return min(requested_builds(shapes, mode), DEFAULT_RECOMPILE_LIMIT + 1)

    known = [prediction_mode(m) for m in modes if prediction_mode(m) in MODES[1:]]
    return sum(builds(mixed, m) - builds(one_size, m) for m in known) / max(len(known), 1)


def capture_lists(names: tuple[str, ...], load: Workload, max_graphs: int,
                  max_batch: int) -> tuple[tuple[str, tuple[int, ...]], ...]:  # fmt: skip
    """(name, sizes) of each list named: `trace`, `vllm`, `sglang` or sizes joined by +."""
    from engine.capture_sizes import CaptureSizesError, resolve
    from nanobench.cost.capture_list import batch_histogram, optimal_sizes

    found = []
    for name in names:
        if name == TRACE:
            if not load.batches:
                raise BadInput("--capture-lists trace: needs --batch-trace FILE.csv, the batch "
                               "sizes the list is chosen for")  # fmt: skip
            found.append((name, optimal_sizes(batch_histogram(load.batches), max_graphs)))
            continue
        try:
            found.append((name, resolve(name.replace("+", ","), max_batch)))
        except CaptureSizesError:
            raise BadInput(f"--capture-lists {name}: expected trace, vllm, sglang or batch "
                           "sizes joined by + (e.g. 1+2+4+8)") from None  # fmt: skip
    return tuple(found)
