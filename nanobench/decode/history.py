"""`decode`'s ratios in the machine's run history: which earlier runs count, and recording this one.

What it is: `settings_of` (what makes two decode runs the same: the worker's run minus its
system, the processes, the dtype resolved), `keys` (each (system, ratio column)'s `KeyFacts`,
the code it measures included: the model's files, nanobench's and the engine's sources and
transformers' version), `load` (each key's calibration, `harness.statistics.history`; `by_comparison`, the
same under the stop rule's names), `record` (a sound finished run's every ratio, its estimate
and within-process variance) and `use` (what the run read and recorded, for its history file).
What it is not: the interval (`harness.statistics.history.Calibration.interval`), the files
(`harness.runs.history_store`) or the rows.
Invariant: only a plain run (one side) reads or writes history, and only a sound one is
recorded: an interrupted run, a failed row or probe, or a row without the ratio records nothing.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.decode.derive import COMPARED
from nanobench.decode.rows import DecodeRow, RunSpec
from nanobench.harness.runs.code_identity import code_identity
from nanobench.harness.runs.history_store import Borrowed, KeyFacts, RunHistory, machine_facts
from nanobench.harness.statistics.history import Calibration, past_of
from nanobench.harness.workers.rounds import Window, paired_rounds

Name = tuple[str, str]  # (system, ratio column)


def settings_of(run: RunSpec, processes: int) -> dict:
    """The run as its history key reads it: every field the workers get but their system."""
    return {**{k: v for k, v in asdict(run).items() if k != "system"}, "processes": processes}


def keys(run: RunSpec, processes: int, systems: tuple[str, ...]) -> dict[Name, KeyFacts]:
    """Every system's every ratio column's key; the code identity is read once, from the files."""
    code = code_identity("", run.model)
    machine, settings = machine_facts(), settings_of(run, processes)
    return {
        (s, c): KeyFacts("decode", f"{s} {c}", "", run.model, code, machine, settings)
        for s in systems
        for c, theirs in COMPARED.items()
        if s != theirs and (theirs in systems or c == "ratio_vs_floor")
    }


def load(store: RunHistory, facts: dict[Name, KeyFacts]) -> dict[Name, Calibration]:
    """Every key's earlier runs (an empty calibration lends nothing)."""
    return {name: store.calibration(f.key()) for name, f in facts.items()}


def by_comparison(loaded: dict[Name, Calibration]) -> dict[str, Calibration]:
    """The same calibrations under the names the rounds give their comparisons
    (`bench.comparisons`: "engine-eager/hf-eager", "engine-eager/floor"), for the stop rule."""
    return {
        f"{s}/{'floor' if column == 'ratio_vs_floor' else COMPARED[column]}": c
        for (s, column), c in loaded.items()
    }


def record(
    store: RunHistory, facts: dict[Name, KeyFacts], rows: list[DecodeRow], windows: list[Window]
) -> int:
    """Append each ok row's every ratio this run measured; how many were recorded."""
    timed = [w for w in windows if w.status == "ok"]
    entries = []
    for row in rows:
        if row.status != "ok" or not row.ms_per_step:
            continue
        for column, theirs in COMPARED.items():
            if row.system == theirs or getattr(row, f"{column}_low") is None:
                continue
            past = past_of(*paired_rounds(timed, row.system, theirs))
            if past is not None and (row.system, column) in facts:
                entries.append((facts[(row.system, column)], past))
    return store.record_all(entries)


def use(
    facts: dict[Name, KeyFacts], loaded: dict[Name, Calibration], rows: list[DecodeRow]
) -> tuple[Borrowed, ...]:
    """Each key the run read, and whether its row's interval came from it."""
    lent = {
        (r.system, c): (getattr(r, f"{c}_variance") or "").startswith("history")
        for r in rows
        for c in COMPARED
    }
    return tuple(
        Borrowed.of(f.key(), f.comparison, loaded[n], lent.get(n, False)) for n, f in facts.items()
    )
