"""What `nanobench history` shows: the machine's keys, one key's runs, what a saved run borrowed.

What it is: the rows (`KeyRow`, `RunRow`, `BorrowedRow`, frozen) built from a `RunHistory`
(`key_rows`, `run_rows`) or from a saved run's `<command>-history.json` (`borrowed_rows`),
`find_key` (a key named by a prefix), `select` (the keys a `--clear` removes) and `clear`.
What it is not: the statistics (`harness.statistics.history`), the files' format (`harness.runs.history_store`)
or the table (`reports/history.py`).
Invariant: every figure is read from the files; an unknown or ambiguous key, an unreadable
folder or a saved run with no history file is a `BadInput` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nanobench.harness.errors import BadInput
from nanobench.harness.runs.history_store import HistoryUse, RunHistory
from nanobench.harness.statistics.history import Calibration, Past

HISTORY_FILES = ("compile-history.json", "decode-history.json")


@dataclass(frozen=True)
class KeyRow:
    """One key: its comparison, the code it belongs to, its runs and their spread."""

    key: str
    command: str
    comparison: str
    code: str  # the target as named (or "engine"), and the identity's short hash
    model: str
    runs: int  # in band, of the latest KEEP_RUNS
    kept_out: int
    skipped: int  # unreadable lines
    ratio: float | None  # the geometric mean of the runs in band
    spread_pct: float | None  # their standard deviation in log, as a percentage
    first: str
    last: str
    # its backend, and each setting or machine fact that tells it from a key that reads alike
    # (the same command, comparison, code and model): "backend inductor, threads 1"
    settings: str = ""


@dataclass(frozen=True)
class RunRow:
    """One recorded run of a key."""

    at: str
    ratio: float
    within_pct: float  # the run's own standard error in log, as a percentage
    rounds: int
    band: str  # in | out (kept out of the spread) | older (past the latest KEEP_RUNS)


@dataclass(frozen=True)
class BorrowedRow:
    """One key a saved run read, and whether its row's interval was lent from it."""

    key: str
    comparison: str
    lent: bool
    runs: int
    since: str
    until: str
    kept_out: int
    skipped: int


def _keys(store: RunHistory) -> list[str]:
    root = Path(store.root)
    if root.exists() and not root.is_dir():
        raise BadInput(f"history folder {root} is a file, expected a folder (NANOBENCH_HISTORY)")
    try:
        return store.keys()
    except OSError as e:
        raise BadInput(f"history folder {root} cannot be read: {e.strerror or e}") from None


def key_row(store: RunHistory, key: str, facts) -> KeyRow:
    """One key's row, from its facts (`KeyFacts`, None without a facts file) and its runs."""
    pasts, skipped = store.runs(key)
    found = Calibration.of(tuple(pasts), skipped)
    y = [p.log_ratio for p in found.pasts]
    return KeyRow(
        key=key,
        command=facts.command if facts else "?",
        comparison=facts.comparison if facts else "? (no facts file)",
        code=f"{facts.target or 'engine'} {facts.code.short()}" if facts else "?",
        model=Path(facts.model).name if facts and facts.model else "-",
        runs=found.runs,
        kept_out=len(found.out),
        skipped=skipped,
        ratio=round(math.exp(float(np.mean(y))), 4) if y else None,
        spread_pct=round(100 * float(np.std(y, ddof=1)), 2) if len(y) > 1 else None,
        first=found.pasts[0].when() if found.pasts else "",
        last=found.pasts[-1].when() if found.pasts else "",
    )


def key_rows(store: RunHistory, target: str | None = None) -> list[KeyRow]:
    """Every key in the folder (those of `target` alone, where given: maybe none), newest last,
    each with what tells it from the keys that read alike."""
    facts = {k: store.facts(k) for k in of_target(store, target)}
    rows = [key_row(store, k, f) for k, f in facts.items()]
    told = telling(facts)
    rows = [replace(r, settings=told.get(r.key, "")) for r in rows]
    return sorted(rows, key=lambda r: (r.last, r.key))


def telling(facts: dict) -> dict[str, str]:
    """By key: its backend, then every setting or machine fact whose value differs among the
    keys of the same command, comparison, code and model (two keys that print alike)."""
    alike: dict[tuple, list[str]] = {}
    for key, f in facts.items():
        if f is not None:
            alike.setdefault((f.command, f.comparison, f.target, f.code, f.model), []).append(key)
    told = {}
    for keys in alike.values():
        flat = {k: {**facts[k].machine, **facts[k].settings} for k in keys}
        names = sorted({n for d in flat.values() for n in d})
        differ = [n for n in names if len({str(d.get(n)) for d in flat.values()}) > 1]
        for k in keys:
            shown = ["backend", *(n for n in differ if n != "backend")]
            told[k] = ", ".join(f"{n} {flat[k][n]}" for n in shown if n in flat[k])
    return told


def of_target(store: RunHistory, target: str | None) -> list[str]:
    """The keys whose runs measured `target` as the user named it (every key with None)."""
    keys = _keys(store)
    if target is None:
        return keys
    return [k for k in keys if (f := store.facts(k)) is not None and f.target == target]


def find_key(store: RunHistory, prefix: str) -> str:
    """The one key that starts with `prefix`."""
    found = [k for k in _keys(store) if k.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    where = f"in {store.root} (nanobench history lists them)"
    if not found:
        raise BadInput(f"history key {prefix!r}: no such key {where}")
    raise BadInput(f"history key {prefix!r}: {len(found)} keys start so {where}; give more of it")


def run_rows(store: RunHistory, key: str) -> list[RunRow]:
    """A key's every recorded run, oldest first, each marked in band, out or older."""
    pasts, skipped = store.runs(key)
    found = Calibration.of(tuple(pasts), skipped)
    out = set(id(p) for p in found.out)
    latest = set(id(p) for p in found.pasts) | out

    def band(p: Past) -> str:
        return "out" if id(p) in out else "in" if id(p) in latest else "older"

    return [
        RunRow(p.at, round(math.exp(p.log_ratio), 4),
               round(100 * math.sqrt(max(p.within_var, 0.0)), 2), p.rounds, band(p))
        for p in pasts
    ]  # fmt: skip


def select(store: RunHistory, key: str | None = None, target: str | None = None) -> list[str]:
    """The keys a prefix or a target names (every key with neither); a target with none is
    bad input, since a --clear of it would remove nothing the user meant."""
    if key:
        return [find_key(store, key)]
    mine = of_target(store, target)
    if target is not None and not mine:
        raise BadInput(f"--target {target!r}: no history in {store.root} belongs to it")
    return mine


def clear(store: RunHistory, keys: list[str]) -> int:
    """Remove the keys; how many runs went with them."""
    runs = sum(len(store.runs(k)[0]) for k in keys)
    for k in keys:
        store.clear(k)
    return runs


def borrowed_rows(out: str) -> tuple[HistoryUse, list[BorrowedRow]]:
    """What the saved run in `out` read from the history, and its rows."""
    folder = Path(out)
    if not folder.is_dir():
        raise BadInput(f"--of {out!r}: no such folder; expected a compile or decode --out folder")
    found = [folder / name for name in HISTORY_FILES if (folder / name).is_file()]
    if not found:
        raise BadInput(
            f"--of {out!r}: holds no {' or '.join(HISTORY_FILES)} (a run with --no-history "
            "or --vs reads no history)"
        )
    try:
        used = HistoryUse.load(found[0])
    except (ValueError, TypeError, KeyError) as e:
        raise BadInput(f"--of {out!r}: {found[0].name} is not a history record ({e})") from None
    rows = [
        BorrowedRow(b.key, b.comparison, b.lent, b.runs, b.since[:16].replace("T", " "),
                    b.until[:16].replace("T", " "), len(b.kept_out), b.skipped)
        for b in used.read
    ]  # fmt: skip
    return used, rows
