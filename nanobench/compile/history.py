"""`compile`'s speedups in the machine's run history: which earlier runs count, recording this one.

What it is: `settings_of` (what makes two compile runs the same: the worker's spec but its mode,
process and trace root, and the processes), `load` (each compiled mode's speedup calibration,
`harness.history`, by the name its comparison has in the rounds: the mode) and `record` (a
finished run's every speedup, its estimate and within-process variance).
What it is not: the interval (`harness.history.Calibration.interval`) or the rows.
Invariant: only a plain run (no --vs, --vs-path) reads or writes history, and only one that
finished: an interrupted run or a failed row records nothing.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.history import Calibration, RunHistory, history_key, past_of
from nanobench.harness.rounds import Window, paired_rounds


def settings_of(worker: WorkerSpec, processes: int) -> dict:
    """The run as its history key reads it: every field a worker gets but its own."""
    skip = {"mode", "process", "trace"}
    return {**{k: v for k, v in asdict(worker).items() if k not in skip}, "processes": processes}


def key_of(worker: WorkerSpec, processes: int, mode: str) -> str:
    return history_key("compile", settings_of(worker, processes), f"{mode} speedup")


def load(
    store: RunHistory, worker: WorkerSpec, processes: int, modes: tuple[str, ...]
) -> dict[str, Calibration]:
    """Every compiled mode's earlier speedups (an empty calibration lends nothing)."""
    return {m: store.calibration(key_of(worker, processes, m)) for m in modes if m != "off"}


def record(
    store: RunHistory,
    worker: WorkerSpec,
    processes: int,
    rows: list[CompileRow],
    windows: list[Window],
) -> int:
    """Append each ok row's speedup this run measured with an interval; how many."""
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    recorded = 0
    for row in rows:
        if row.mode == "off" or row.status != "ok" or row.speedup_low is None:
            continue
        past = past_of(*paired_rounds(timed, "off", row.mode))
        if past is not None:
            store.record(key_of(worker, processes, row.mode), past)
            recorded += 1
    return recorded
