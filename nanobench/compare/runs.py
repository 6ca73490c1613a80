"""Two saved runs of one command, compared: what changed, and what the machine did between them.

What it is: `SavedRun` and `load(path)` (a saved output directory, `compile.csv` with its samples
and env record, `decode.csv`, `explain.csv` or `profile.csv` (the one written last, where a
directory holds more), or a `--json` document, as typed rows of the command's kind,
`kinds.comparer`), `check_comparable` and `drift_notes(old, new)` (the line saying that runs
taken apart carry the machine's drift, and each env fact or setting that differs, named). The
changes themselves are each command's, the same ones its in-run comparison makes
(`compile.vs.saved_changes`, `decode.vs.saved_changes`, `explain.saved.saved_changes`).
What it is not: `--vs` (one interleaved run, every change paired by round): a comparison of runs
taken apart says so, and says more loudly when the machines or settings differ.
Invariant: every figure is a saved row's or a saved sample's; a run without samples (a JSON
document) compares its counts and gives its timings no interval.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from nanobench.compare.kinds import comparer, readable
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.env_record import EnvRecord
from nanobench.harness.runs.saved import read_document, read_rows, read_windows
from nanobench.harness.runs.sides import saved_before_and_after
from nanobench.harness.workers.rounds import Window
from reports.style import article

APART = (
    "runs taken apart: each interval holds its own run's spread, not what the machine did "
    "between the two (drift, load, another core); for a paired answer run both sides at once "
    "with --vs"
)
# Env facts that make two runs different machines or settings when they differ.
FACTS = ("cpu_model", "cores", "threads", "aten_cpu_capability", "torch_version",
         "triton_version", "transformers_version", "cuda_device", "cuda_driver",
         "nanobench_version", "git_commit")  # fmt: skip
SETTINGS = ("model", "dtype", "device", "backend", "cache", "bucketed", "threads", "target",
            "rows", "steps")  # fmt: skip


@dataclass(frozen=True)
class SavedRun:
    where: str
    command: str
    rows: list
    windows: list[Window]
    env: EnvRecord | None


def load(path: str) -> SavedRun:
    """A saved directory or a --json document, as its command's typed rows."""
    where = Path(path)
    if where.is_dir():
        found = [c for c in readable() if (where / f"{c}.csv").is_file()]
        if not found:
            saved = ", ".join(f"{c}.csv" for c in readable())
            raise BadInput(f"{path}: no {saved} here: expected the --out directory of "
                           f"{', '.join(readable())}, or a --json file")  # fmt: skip
        # an out directory more than one command wrote to: the run written last
        return _from_dir(where, max(found, key=lambda c: (where / f"{c}.csv").stat().st_mtime))
    if where.is_file():
        return _from_document(where)
    raise BadInput(f"{path}: no such directory or file")


def _from_dir(where: Path, command: str) -> SavedRun:
    from nanobench.harness.runs.env_record import read_env

    kind = comparer(command)
    rows = read_rows(where / kind.csv(), kind.row_type, unwritten=("tokens", "outputs"))
    samples = where / f"{command}-samples.csv"
    windows = read_windows(samples, kind.label) if samples.is_file() else []
    env_path = where / f"{command}-env.json"
    env = read_env(env_path) if env_path.is_file() else None
    return SavedRun(str(where), command, rows, windows, env)


def _from_document(path: Path) -> SavedRun:
    from nanobench.harness.runs.rows import rebuild

    doc = read_document(path)
    row_type = comparer(doc["command"]).row_type
    rows = [rebuild(row_type, r) for r in doc["rows"]]
    env = rebuild(EnvRecord, doc["env"]) if doc.get("env") else None
    return SavedRun(str(path), doc["command"], rows, [], env)


def check_comparable(old: SavedRun, new: SavedRun) -> None:
    if old.command != new.command:
        raise BadInput(f"{old.where} is {article(old.command)} run and {new.where} {article(new.command)} run: "
                       "compare reads two runs of one command")  # fmt: skip
    for run in (old, new):
        if saved_before_and_after({getattr(r, "side", "") for r in run.rows}):
            raise BadInput(f"{run.where}: a --vs (or --vs-python, --vs-env) run is a comparison "
                           f"already (its "
                           f"{run.command}-changes.csv)")  # fmt: skip


def drift_notes(old: SavedRun, new: SavedRun) -> list[str]:
    """Runs apart carry the machine's drift; each differing env fact and row setting, named.
    Explain's counts have no interval, so the note about intervals is not theirs."""
    timed = old.command != "explain"
    notes = [APART] if timed else []
    if old.env and new.env:
        for fact in FACTS:
            x, y = getattr(old.env, fact), getattr(new.env, fact)
            if x != y:
                notes.append(f"differs: {fact}: {x} (old) vs {y} (new): not the same machine "
                             "or software; a change here may be that, not yours")  # fmt: skip
        loads = [(e.load_avg_1m_before, e.load_avg_1m_after) for e in (old.env, new.env)]
        if timed:
            notes.append(f"load (1 min average, before / after timing): old {_pair(loads[0])}, "
                         f"new {_pair(loads[1])}")  # fmt: skip
    else:
        missing = [r.where for r in (old, new) if r.env is None]
        notes.append(f"no env record in {', '.join(missing)}: the machines cannot be compared")
    names = {f.name for f in fields(type(old.rows[0]))} if old.rows else set()
    for setting in (s for s in SETTINGS if s in names):
        x = {getattr(r, setting) for r in old.rows}
        y = {getattr(r, setting) for r in new.rows}
        if x != y:
            notes.append(f"differs: {setting}: {_one(x)} (old) vs {_one(y)} (new)")
    return notes


def _pair(p) -> str:
    return " / ".join("-" if v is None else f"{v:.2f}" for v in p)


def _one(values: set) -> str:
    return ", ".join(sorted(str(v) for v in values))
