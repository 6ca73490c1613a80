"""The machine's run history on disk: a key per comparison of one code on one machine.

What it is: `KeyFacts` (what makes two runs' ratios the same quantity: the command, the
comparison, the machine's facts, the run's settings and the `CodeIdentity` of what it measured;
`key()` hashes them), `RunHistory` (under NANOBENCH_HISTORY or the nanobench cache, a key's runs
as JSON lines in `<key>.jsonl` beside its facts in `<key>.meta.json`; appends under an exclusive
lock, reads under a shared one; a torn or foreign line skipped and counted; `listing` and
`clear` for `nanobench history`), `unsound` (why a finished run is not recorded) and `HistoryUse`
(what one run read and recorded: `<command>-history.json` beside its CSV).
What it is not: the statistics (`history.Calibration`) or which runs a command counts
(`compile/history.py`, `decode/history.py`).
Invariant: a run of other code, another model or another machine never reads this key's runs;
a file that cannot be read or written costs the run its history (one warning), never the run.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from nanobench.harness.runs.code_identity import CodeIdentity
from nanobench.harness.statistics.history import Calibration, Past

HISTORY_ENV = "NANOBENCH_HISTORY"


def history_root() -> Path:
    """NANOBENCH_HISTORY, else `history/` under the nanobench cache."""
    if os.environ.get(HISTORY_ENV):
        return Path(os.environ[HISTORY_ENV])
    from engine.config import cache_root  # no torch: `history` answers at once

    return cache_root() / "history"


def machine_facts() -> dict:
    """What makes two runs the same machine: CPU model, usable cores, torch's version."""
    from importlib.metadata import version

    from nanobench.harness.workers.inductor_cache import cpu_model

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cores": cores, "torch": version("torch")}


@dataclass(frozen=True)
class KeyFacts:
    """One comparison of one code on one machine under one set of settings."""

    command: str
    comparison: str  # "dynamic speedup", "engine-eager ratio_vs_floor"
    target: str  # as the user named it; "" for the engine
    model: str  # the checkpoint directory; "" for a target's own model
    code: CodeIdentity
    machine: dict
    settings: dict

    def key(self) -> str:
        doc = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(doc.encode()).hexdigest()[:20]

    def elsewhere(self, found) -> KeyFacts:
        """These facts for a run whose workers ran under another interpreter or variables
        (`environments.Probed`): its torch, its interpreter and its variables key it."""
        machine = {**self.machine, "torch": found.torch_version, "python": found.python,
                   "variables": [list(v) for v in found.variables]}  # fmt: skip
        return replace(self, machine=machine)

    @classmethod
    def from_json(cls, doc: dict) -> KeyFacts:
        return cls(**{**doc, "code": CodeIdentity(**doc["code"])})


@dataclass(frozen=True)
class Borrowed:
    """One key a run read: how many earlier runs, from when to when, and whether its interval
    was lent to the row."""

    key: str
    comparison: str
    lent: bool
    runs: int
    since: str  # "" with no run in band
    until: str
    kept_out: tuple[str, ...]  # when each out-of-band run finished
    skipped: int

    @classmethod
    def of(cls, key: str, comparison: str, calibration: Calibration, lent: bool) -> Borrowed:
        pasts = calibration.pasts
        return cls(key, comparison, lent, len(pasts), pasts[0].at if pasts else "",
                   pasts[-1].at if pasts else "", tuple(p.at for p in calibration.out),
                   calibration.skipped)  # fmt: skip


@dataclass(frozen=True)
class HistoryUse:
    """What one run read from the history and whether it recorded itself (and if not, why)."""

    root: str
    read: tuple[Borrowed, ...]
    recorded: int
    not_recorded: str  # "" when recorded; else the reason

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> HistoryUse:
        doc = json.loads(path.read_text())
        read = tuple(Borrowed(**{**b, "kept_out": tuple(b["kept_out"])}) for b in doc["read"])
        return cls(**{**doc, "read": read})


def unsound(statuses: list[str], gates: list) -> str:
    """Why a finished run's ratios do not belong in the history ("" when they do): a row or
    probe that did not finish ok, or a timing gate with no interval at all."""
    bad = [s for s in statuses if s != "ok"]
    if bad:
        return f"{len(bad)} of {len(statuses)} rows or probes not ok ({bad[0]})"
    broken = [g.name for g in gates if g.verdict == "inconclusive" and g.ci_low is None]
    return f"gate {broken[0]} had no interval" if broken else ""


def settle(store: RunHistory, path: Path, statuses: list[str], gates: list, record,
           read: tuple[Borrowed, ...], say) -> str:  # fmt: skip
    """A finished run's end with the history: `record()` (which appends, and says how many)
    only where the run is sound; what it read and recorded written to `path`; each problem
    the store met `say`'d once (the command's warning line); the path."""
    why_not = unsound(statuses, gates)
    recorded = 0 if why_not else record()
    written = str(HistoryUse(str(store.root), read, recorded, why_not).write(path))
    for problem in dict.fromkeys(store.problems):
        say(problem)
    return written


@contextmanager
def locked(f, exclusive: bool):
    """flock on an open file: two runs' appends never interleave, a read never sees half."""
    try:
        import fcntl
    except ImportError:  # no flock: one write() of one line under O_APPEND is all there is
        yield
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def parse_lines(text: str) -> tuple[list[Past], int]:
    """The runs in a key's file, and how many lines were torn, corrupt or not a run's."""
    pasts, skipped = [], 0
    for line in text.splitlines():
        try:
            pasts.append(Past(**json.loads(line)))
        except (TypeError, ValueError):
            skipped += 1  # a line cut short by a killed run, or another tool's
    return pasts, skipped


@dataclass
class RunHistory:
    """A folder of keys. `problems` collects what could not be read or written, one line each."""

    root: Path = field(default_factory=history_root)
    problems: list[str] = field(default_factory=list)

    def _path(self, key: str, suffix: str = ".jsonl") -> Path:
        return Path(self.root) / f"{key}{suffix}"

    def runs(self, key: str) -> tuple[list[Past], int]:
        """Every run recorded under `key`, oldest first, and the lines skipped."""
        path = self._path(key)
        if not path.exists():
            return [], 0
        with open(path) as f, locked(f, exclusive=False):
            return parse_lines(f.read())

    def calibration(self, key: str) -> Calibration:
        """The key's latest runs, screened; empty (and a problem said) where unreadable."""
        try:
            return Calibration.of(*self.runs(key))
        except OSError as e:
            self.problems.append(f"history {self.root} unreadable ({e.strerror or e})")
            return Calibration(())

    def record(self, facts: KeyFacts, past: Past) -> None:
        """Append one run under its key; its facts beside it, for `nanobench history`."""
        Path(self.root).mkdir(parents=True, exist_ok=True)
        key = facts.key()
        with open(self._path(key), "a") as f, locked(f, exclusive=True):
            f.write(json.dumps(asdict(past)) + "\n")
        meta, scratch = self._path(key, ".meta.json"), self._path(key, f".meta.{os.getpid()}")
        scratch.write_text(json.dumps(asdict(facts), sort_keys=True, default=str) + "\n")
        os.replace(scratch, meta)  # whole or not at all, whoever writes it last

    def record_all(self, entries: list[tuple[KeyFacts, Past]]) -> int:
        """Each (facts, run) appended; how many. An unwritable folder is one problem said."""
        for done, (facts, past) in enumerate(entries):
            try:
                self.record(facts, past)
            except OSError as e:
                self.problems.append(
                    f"history {self.root} not writable ({e.strerror or e}): this run not recorded"
                )
                return done
        return len(entries)

    def facts(self, key: str) -> KeyFacts | None:
        try:
            return KeyFacts.from_json(json.loads(self._path(key, ".meta.json").read_text()))
        except (OSError, TypeError, ValueError, KeyError):
            return None

    def keys(self) -> list[str]:
        """Every key in the folder, by name; raises OSError where the folder is unreadable."""
        root = Path(self.root)
        if not root.exists():
            return []
        return sorted(p.name[: -len(".jsonl")] for p in root.iterdir() if p.suffix == ".jsonl")

    def clear(self, key: str) -> None:
        for suffix in (".jsonl", ".meta.json"):
            self._path(key, suffix).unlink(missing_ok=True)
