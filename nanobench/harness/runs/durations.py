"""The wall seconds of this machine's finished runs, by the settings they ran under.

What it is: `settings_key` (a hash of the command, the machine's facts and the run's settings:
two runs with one key did the same work on the same machine) and `Durations`, one JSON-lines
file, `durations/runs.jsonl` under the history folder (`history_store.history_root`; in a folder
of its own, so `nanobench history` never lists it as a key): a line per
finished run, `{"key", "wall_s", "at"}` and, since the estimate scales one run to another, the
run's kind (`"kind"`, a coarser key: command, model, device, ...) and where its seconds went
(`"plan"`, `"compile_s"`, `"rounds"`, `"rounds_s"`: `harness.runs.eta.Figures`), appended
under an exclusive lock and read under a shared one, as the run history is
(`history_store.locked`).
What it is not: the run history (`history_store`: its files and their format are its own and
untouched here) or the estimate made from these seconds (`harness.runs.eta`).
Invariant: the file never costs a run: a torn or foreign line is skipped, an unreadable file is
no earlier run, an unwritable one is a run not recorded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from nanobench.harness.runs.history_store import history_root, locked, machine_facts

FILE = Path("durations") / "runs.jsonl"


def settings_key(command: str, settings: dict) -> str:
    """The key of `command` run with `settings` on this machine."""
    doc = {"command": command, "machine": machine_facts(), "settings": settings}
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def parse_walls(text: str, key: str) -> tuple[list[float], int]:
    """`key`'s wall seconds in the file's order, and how many lines could not be read."""
    walls, skipped = [], 0
    for line in text.splitlines():
        try:
            doc = json.loads(line)
            wall = float(doc["wall_s"])
            if not wall > 0 or wall == float("inf"):
                raise ValueError(wall)
        except (TypeError, ValueError, KeyError):
            skipped += 1  # a line cut short by a killed run, or another tool's
            continue
        if doc.get("key") == key:
            walls.append(wall)
    return walls, skipped


def parse_latest(text: str, kind: str) -> dict | None:
    """The newest line of `kind` (its fields as written), or None; torn lines skipped."""
    found = None
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed run
        if isinstance(doc, dict) and doc.get("kind") == kind:
            found = doc
    return found


@dataclass
class Durations:
    """The machine's file of finished runs' wall seconds."""

    root: Path = field(default_factory=history_root)

    @property
    def path(self) -> Path:
        return Path(self.root) / FILE

    def walls(self, key: str) -> list[float]:
        """`key`'s wall seconds, oldest first; none where the file is missing or unreadable."""
        try:
            with open(self.path) as f, locked(f, exclusive=False):
                return parse_walls(f.read(), key)[0]
        except (OSError, UnicodeDecodeError):
            return []

    def latest(self, kind: str) -> dict | None:
        """The newest finished run of `kind`, as written; None where none or unreadable."""
        try:
            with open(self.path) as f, locked(f, exclusive=False):
                return parse_latest(f.read(), kind)
        except (OSError, UnicodeDecodeError):
            return None

    def record(self, key: str, wall_s: float, more: dict | None = None) -> bool:
        """Append one finished run (`more`: its kind and figures); False where the folder
        cannot be written."""
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        doc = {"key": key, "wall_s": round(wall_s, 3), "at": at, **(more or {})}
        line = json.dumps(doc) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f, locked(f, exclusive=True):
                f.write(line)
        except OSError:
            return False
        return True
