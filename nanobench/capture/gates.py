"""`nanobench capture`'s gates and notes: what a run of recordings and replays promises.

What it is: `gates(spec, runs)` (per run length: measured, replay equals eager, closed as
predicted, replays dominate, one shared pool, no held output; up front every shape captured;
on CUDA the tri-state `replay_not_slower`), `up_front_notes`, vLLM's capture line, and
`record_notes`, each run's recordings in seconds and the recorder they were timed on.
What it is not: the runs (`run.py`, `bench.py`) or their timing (`timing.py`).
Invariant: a gate reads only its row; on a CPU the replay ratio is a note, never a gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.captured import CaptureUnsound, check_replays_dominate
from nanobench.capture.rows import RunRow
from nanobench.capture.timing import REPLAY_TARGET, ratio_of
from nanobench.harness.runs.gates import Gate, gate, ratio_gate
from reports.style import binary_bytes

if TYPE_CHECKING:
    from nanobench.capture.spec import CaptureSpec


def gates(spec: CaptureSpec, rows: list[RunRow]) -> list[Gate]:
    """Per run length: measured, replay equals eager, closed as predicted, replays dominate,
    one shared pool, no held output; up front also every shape captured and none mid-run; on
    CUDA also replay_not_slower, tri-state on the ratio's interval (on CPU: `ratio_notes`)."""
    found = []
    for r in rows:
        n = r.steps
        found += [
            Gate(f"measured[{n}]", r.status == "ok", r.status),
            gate(f"replay_equals_eager[{n}]", check_close, r.max_abs_diff, r.replay_tolerance),
            gate(
                f"closed_as_predicted[{n}]",
                check_equal,
                "graphs the run used",
                r.captures_closed,
                r.predicted_closed,
            ),
            gate(f"check_replays_dominate[{n}]", check_replays_dominate, r.recorded_mid_run, n),
            Gate(f"check_pool_shared[{n}]", r.pool_shared == "ok", r.pool_shared),
            Gate(f"check_output_not_held[{n}]", r.output_not_held == "ok", r.output_not_held),
        ]
        if spec.up_front:
            shapes = r.all_shapes_captured
            found += [
                Gate(f"check_all_shapes_captured[{n}]", shapes == "ok", str(shapes)),
                gate(
                    f"first_decode_replayed[{n}]",
                    check_equal,
                    "graphs recorded mid-run",
                    r.recorded_mid_run,
                    0,
                ),
            ]
        if spec.device == "cuda" and r.status == "ok":
            found.append(replay_gate(r))
    return found


def replay_gate(r: RunRow) -> Gate:
    """replay_not_slower[n]: replayed / eager step time at most 1.0x on its 95% interval."""
    what = f"replayed / eager step time at {r.steps} steps"
    return ratio_gate(f"replay_not_slower[{r.steps}]", what, ratio_of(r), REPLAY_TARGET)


def check_close(diff: float, tol: float) -> None:
    if not diff <= tol:
        raise CaptureUnsound(f"replayed logits differ from eager by {diff:.3g} (tolerance {tol})")


def check_equal(what: str, got: int, expected: int) -> None:
    if got != expected:
        raise CaptureUnsound(f"{what}: {got}, predicted {expected}")


def record_notes(runs: list[RunRow]) -> list[str]:
    """Per run: the graphs recorded, their seconds in total and per graph, and whose they are."""
    notes = []
    for r in runs:
        if not r.graphs_recorded:
            notes.append(f"{r.steps} steps: no graph recorded")
            continue
        notes.append(
            f"{r.steps} steps: {r.graphs_recorded} graphs recorded ({r.mode}) in "
            f"{r.record_s_total:.3f} s, {r.record_s_per_graph:.4f} s per graph "
            f"({r.recorder} on {r.device})"
        )
    return notes


def up_front_notes(runs: list[RunRow]) -> list[str]:
    """vLLM's line for each up-front walk: "Graph capturing finished in X secs, took Y GiB"."""
    notes = []
    for r in runs:
        if r.mode != "up-front":
            continue
        took = r.capture_pool_bytes
        size = "n/a on cpu" if took is None else binary_bytes(took)
        notes.append(
            f"{r.steps} steps: graph capturing finished in {r.capture_s:.3f} secs "
            f"({r.captured_up_front} shapes, largest first, one pool), took {size}"
        )
    return notes
