"""`compile`'s speedups in the machine's run history: which earlier runs count, recording this one.

What it is: `settings_of` (what makes two compile runs the same: the worker's spec but its mode,
process and trace root, and the processes), `keys` (each compiled mode's `KeyFacts`, the code it
measures included: the target's sources, the model's files, nanobench's and the engine's),
`load` (each mode's speedup calibration, `harness.statistics.history`, by the name its comparison has in
the rounds: the mode), `record` (a sound finished run's every speedup, its estimate and
within-process variance) and `use` (what the run read and recorded, for its history file).
What it is not: the interval (`harness.statistics.history.Calibration.interval`), the files
(`harness.runs.history_store`) or the rows.
Invariant: only a plain run (no --vs, --vs-path) reads or writes history, and only a sound one
is recorded: an interrupted run, a failed row or a gate with no interval records nothing.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.runs.code_identity import code_identity
from nanobench.harness.runs.history_store import Borrowed, KeyFacts, RunHistory, machine_facts
from nanobench.harness.statistics.history import Calibration, past_of
from nanobench.harness.workers.rounds import Window, paired_rounds


def settings_of(worker: WorkerSpec, processes: int) -> dict:
    """The run as its history key reads it: every field a worker gets but its own."""
    skip = {"mode", "process", "trace"}
    return {**{k: v for k, v in asdict(worker).items() if k not in skip}, "processes": processes}


def keys(worker: WorkerSpec, processes: int, modes: tuple[str, ...]) -> dict[str, KeyFacts]:
    """Each compiled mode's speedup key; the code identity is read once, from the files now."""
    code = code_identity(worker.target, worker.model)
    machine, settings = machine_facts(), settings_of(worker, processes)
    return {
        m: KeyFacts(
            "compile", f"{m} speedup", worker.target, worker.model, code, machine, settings
        )  # fmt: skip
        for m in modes
        if m != "off"
    }


def by_comparison(loaded: dict[str, Calibration]) -> dict[str, Calibration]:
    """What the stop rule borrows, by its comparisons' names: a mode's speedup is named by its
    mode, as the history keys it."""
    return loaded


def load(store: RunHistory, facts: dict[str, KeyFacts]) -> dict[str, Calibration]:
    """Every compiled mode's earlier speedups (an empty calibration lends nothing)."""
    return {m: store.calibration(f.key()) for m, f in facts.items()}


def record(
    store: RunHistory, facts: dict[str, KeyFacts], rows: list[CompileRow], windows: list[Window]
) -> int:
    """Append each ok row's speedup this run measured with an interval; how many."""
    timed = [w for w in windows if w.round >= 1 and w.status == "ok"]
    entries = []
    for row in rows:
        if row.mode not in facts or row.status != "ok" or row.speedup_low is None:
            continue
        past = past_of(*paired_rounds(timed, "off", row.mode))
        if past is not None:
            entries.append((facts[row.mode], past))
    return store.record_all(entries)


def use(
    facts: dict[str, KeyFacts], loaded: dict[str, Calibration], rows: list[CompileRow]
) -> tuple[Borrowed, ...]:
    """Each key the run read, and whether its row's interval came from it."""
    lent = {r.mode: (r.speedup_variance or "").startswith("history") for r in rows}
    return tuple(
        Borrowed.of(f.key(), f.comparison, loaded[m], lent.get(m, False)) for m, f in facts.items()
    )
