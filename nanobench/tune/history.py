"""`tune`'s configurations in the machine's run history: which earlier races count, recording one.

What it is: `keys` (each compiled configuration's `KeyFacts`: its step over eager off's, keyed
by the code it measures, the machine and every setting its workers get, its knobs included),
`load` (each one's calibration, `harness.statistics.history`: what its ratio to eager borrows
where the machine's earlier races spread more than this one's processes show) and `record`
(a finished race's every timed configuration, its estimate and within-process variance).
What it is not: the store (`harness.runs.history_store`), the interval or the race.
Invariant: only a race whose eager off finished ok is recorded, and only what it timed; the
ratio is the configuration's step over off's, as `ConfigRow.vs_off` reads it.
"""

from __future__ import annotations

from dataclasses import asdict

from nanobench.compile.spec import WorkerSpec
from nanobench.harness.runs.code_identity import code_identity
from nanobench.harness.runs.history_store import KeyFacts, RunHistory, machine_facts
from nanobench.harness.statistics.history import Calibration, past_of
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import paired_rounds
from nanobench.tune.bench import RaceResult
from nanobench.tune.space import OFF, Space


def keys(space: Space, workers: dict[str, WorkerSpec], processes: int) -> dict[Member, KeyFacts]:
    """Each compiled configuration's key; the code identity is read once, from the files now."""
    first = next(iter(workers.values()))
    code, machine = code_identity(first.target, first.model), machine_facts()
    found = {}
    for c in space.configs[1:]:
        settings = {k: v for k, v in asdict(workers[c.side]).items() if k not in ("process",)}
        found[c.member] = KeyFacts("tune", f"{c.name} over off", first.target, first.model,
                                   code, machine, {**settings, "mode": c.mode,
                                                   "processes": processes})  # fmt: skip
    return found


def load(store: RunHistory, facts: dict[Member, KeyFacts]) -> dict[Member, Calibration]:
    return {m: store.calibration(f.key()) for m, f in facts.items()}


def record(store: RunHistory, facts: dict[Member, KeyFacts], found: RaceResult) -> int:
    """Append each timed configuration's ratio to eager off; how many were recorded."""
    timed = [w for w in found.windows if w.round >= 1 and w.status == "ok"]
    off = Member("plain", OFF)
    if not any(w.member == off for w in timed):
        return 0
    entries = []
    for m, f in facts.items():
        past = past_of(*paired_rounds(timed, m, off))
        if past is not None:
            entries.append((f, past))
    return store.record_all(entries)
