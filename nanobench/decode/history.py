"""`decode`'s ratios in the machine's run history: which earlier runs count, and recording this one.

What it is: `settings_of` (what makes two decode runs the same: the worker's run minus its
system, the processes, the dtype resolved), `load` (each (system, ratio column)'s calibration,
`harness.history`; `by_comparison`, the same under the stop rule's names) and `record` (a finished run's every ratio, its estimate and within-process
variance, appended under the same keys).
What it is not: the interval (`harness.history.Calibration.interval`) or the rows.
Invariant: only a plain run (one side) reads or writes history, and only one that finished:
an interrupted run, a failed row or a row without the ratio records nothing.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.decode.derive import COMPARED
from nanobench.decode.rows import DecodeRow, RunSpec
from nanobench.harness.history import Calibration, RunHistory, history_key, past_of
from nanobench.harness.rounds import Window, paired_rounds


def settings_of(run: RunSpec, processes: int) -> dict:
    """The run as its history key reads it: every field the workers get but their system."""
    return {**{k: v for k, v in asdict(run).items() if k != "system"}, "processes": processes}


def key_of(run: RunSpec, processes: int, system: str, column: str) -> str:
    return history_key("decode", settings_of(run, processes), f"{system} {column}")


def load(
    store: RunHistory, run: RunSpec, processes: int, systems: tuple[str, ...]
) -> dict[tuple[str, str], Calibration]:
    """Every system's every ratio column's earlier runs (an empty calibration uses none)."""
    return {
        (s, c): store.calibration(key_of(run, processes, s, c)) for s in systems for c in COMPARED
    }


def by_comparison(loaded: dict[tuple[str, str], Calibration]) -> dict[str, Calibration]:
    """The same calibrations under the names the rounds give their comparisons
    (`bench.comparisons`: "engine-eager/hf-eager", "engine-eager/floor"), for the stop rule."""
    return {
        f"{s}/{'floor' if column == 'ratio_vs_floor' else COMPARED[column]}": c
        for (s, column), c in loaded.items()
    }


def record(
    store: RunHistory, run: RunSpec, processes: int, rows: list[DecodeRow], windows: list[Window]
) -> int:
    """Append each ok row's every ratio this run measured; how many were recorded."""
    timed = [w for w in windows if w.status == "ok"]
    recorded = 0
    for row in rows:
        if row.status != "ok" or not row.ms_per_step:
            continue
        for column, theirs in COMPARED.items():
            if row.system == theirs or getattr(row, f"{column}_low") is None:
                continue
            past = past_of(*paired_rounds(timed, row.system, theirs))
            if past is not None:
                store.record(key_of(run, processes, row.system, column), past)
                recorded += 1
    return recorded
