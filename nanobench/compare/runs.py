"""Two saved runs of one command, compared: what changed, and what the machine did between them.

What it is: `SavedRun` and `load(path)` (a saved output directory, `compile.csv` with its samples
and env record, `decode.csv` or `explain.csv`, or a `--json` document, as typed rows, the
command's pieces from `kinds.COMPARERS`), `compile_changes(old, new)` (per mode: the counts
exact, step ms and speedup as new / old with an interval from each run's per-process means,
`t_intervals.apart_interval`; compile seconds, breakeven and the verdict beside them; a
`--try` run's members by side and mode, a plain run beside one as its plain side),
`decode_changes` and `explain_changes` (each with what is on one side only) and
`drift_notes(old, new)` (the line saying that runs taken apart carry the
machine's drift, and each env fact or setting that differs, named).
What it is not: `--vs` (one interleaved run, every change paired by round): a comparison of runs
taken apart says so, and says more loudly when the machines or settings differ.
Invariant: every figure is a saved row's or a saved sample's; a run without samples (a JSON
document) compares its counts and gives its timings no interval.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from nanobench.compare.kinds import COMPARERS, comparer
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import Change, count_change, timing_change, value_change
from nanobench.harness.runs.env_record import EnvRecord
from nanobench.harness.runs.saved import read_document, read_rows, read_windows
from nanobench.harness.statistics.t_intervals import apart_interval
from nanobench.harness.step.knobs import PLAIN
from nanobench.harness.workers.member import SIDES
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
        found = [c for c, k in COMPARERS.items() if (where / k.csv).is_file()]
        if not found:
            saved = ", ".join(k.csv for k in COMPARERS.values())
            raise BadInput(f"{path}: no {saved} here: expected the --out directory of "
                           f"{', '.join(COMPARERS)}, or a --json file")  # fmt: skip
        return _from_dir(where, found[0])
    if where.is_file():
        return _from_document(where)
    raise BadInput(f"{path}: no such directory or file")


def _from_dir(where: Path, command: str) -> SavedRun:
    from nanobench.harness.runs.env_record import read_env

    kind = comparer(command)
    rows = read_rows(where / kind.csv, kind.load("row_type"), unwritten=("tokens", "outputs"))
    samples = where / f"{command}-samples.csv"
    windows = read_windows(samples, kind.label) if samples.is_file() else []
    env_path = where / f"{command}-env.json"
    env = read_env(env_path) if env_path.is_file() else None
    return SavedRun(str(where), command, rows, windows, env)


def _from_document(path: Path) -> SavedRun:
    from nanobench.harness.runs.rows import rebuild

    doc = read_document(path)
    row_type = comparer(doc["command"]).load("row_type")
    rows = [rebuild(row_type, r) for r in doc["rows"]]
    env = rebuild(EnvRecord, doc["env"]) if doc.get("env") else None
    return SavedRun(str(path), doc["command"], rows, [], env)


def check_comparable(old: SavedRun, new: SavedRun) -> None:
    if old.command != new.command:
        raise BadInput(f"{old.where} is {article(old.command)} run and {new.where} {article(new.command)} run: "
                       "compare reads two runs of one command")  # fmt: skip
    for run in (old, new):
        if any(getattr(r, "side", "") in SIDES for r in run.rows):
            raise BadInput(f"{run.where}: a --vs run is a comparison already (its "
                           f"{run.command}-changes.csv)")  # fmt: skip


def per_process(windows: list[Window], system: str) -> list[list[float]]:
    """A system's window medians, one list per process: the units of `apart_interval`."""
    by: dict[int, list[float]] = {}
    for w in sorted(windows, key=lambda w: (w.process, w.round)):
        median = w.median_ms() if w.system == system else None
        if median:
            by.setdefault(w.process, []).append(median)
    return list(by.values())


def speedups(windows: list[Window], mode: str, off_name: str = "off") -> list[list[float]]:
    """Each round's off / mode ratio (paired within its run), one list per process."""
    medians = {(w.system, w.round): (w.median_ms(), w.process) for w in windows}
    by: dict[int, list[float]] = {}
    for (system, r), (ms, process) in sorted(medians.items(), key=lambda kv: kv[0][1]):
        off = medians.get((off_name, r), (None, None))[0]
        if system == mode and ms and off:
            by.setdefault(process, []).append(off / ms)
    return list(by.values())


def timings(old: SavedRun, new: SavedRun, mode: str, before, after, off: str = "off"
            ) -> list[Change]:  # fmt: skip
    """A mode's step ms and (compiled) speedup over `off` (a --try run's: plain's), with their
    runs-apart intervals; `mode` is the member's name in the samples."""
    timed = old.windows and new.windows
    why = "" if timed else "a --json document carries no samples"
    step = apart_interval(per_process(old.windows, mode), per_process(new.windows, mode))
    found = [timing_change(mode, "step_ms", before.step_ms, after.step_ms,
                           step if timed else None, why)]  # fmt: skip
    if before.mode != "off":
        gain = apart_interval(speedups(old.windows, mode, off), speedups(new.windows, mode, off))
        found.append(timing_change(mode, "speedup", before.speedup, after.speedup,
                                   gain if timed else None, why))  # fmt: skip
    return found


def tried_names(old: SavedRun, new: SavedRun) -> tuple[dict, dict, list[list[Window]], str]:
    """Each run's rows by member name, its windows so named, and off's name: a --try run's
    members are "plain dynamic", "cpp-wrapper dynamic"; a plain run beside one is its plain."""
    tried = any(r.side for r in (*old.rows, *new.rows))
    if not tried:
        return {r.mode: r for r in old.rows}, {r.mode: r for r in new.rows}, [
            old.windows, new.windows], "off"  # fmt: skip
    named, windows = [], []
    for run in (old, new):
        sided = any(r.side for r in run.rows)
        named.append({f"{r.side or PLAIN} {r.mode}": r for r in run.rows})
        windows.append(run.windows if sided else [replace(w, system=f"{PLAIN} {w.system}")
                                                  for w in run.windows])  # fmt: skip
    return named[0], named[1], windows, f"{PLAIN} off"


def compile_timings(old: SavedRun, new: SavedRun) -> list[Change]:
    """Per mode both runs timed: step ms and speedup (a profile's rows carry both too)."""
    a, b = {r.mode: r for r in old.rows}, {r.mode: r for r in new.rows}
    return [c for mode in a if mode in b for c in timings(old, new, mode, a[mode], b[mode])]


def compile_changes(old: SavedRun, new: SavedRun) -> tuple[list[Change], dict]:
    """Per mode both runs measured: counts, timings with their runs-apart intervals, verdicts;
    nothing is on one side only."""
    from nanobench.compile.vs import count_columns

    a, b, (old_w, new_w), off = tried_names(old, new)
    old, new = replace(old, windows=old_w), replace(new, windows=new_w)
    found: list[Change] = []
    for mode in [m for m in a if m in b]:
        before, after = a[mode], b[mode]
        for column, field in count_columns(before.mode).items():
            found.append(count_change(mode, column, getattr(before, field), getattr(after, field)))
        found += timings(old, new, mode, before, after, off)
        for column in ("compile_s", "compile_warm_s"):
            found.append(timing_change(mode, column, getattr(before, column),
                                       getattr(after, column), None, "one compile a run"))  # fmt: skip
        for column in ("breakeven_steps", "worth_compiling"):
            found.append(
                value_change(mode, column, getattr(before, column), getattr(after, column))
            )
    return found, {}


def decode_changes(old: SavedRun, new: SavedRun) -> tuple[list[Change], dict]:
    """Per system both runs measured: step ms with its runs-apart interval, frames compiled,
    compile seconds, and the rest beside them; nothing is on one side only."""
    from nanobench.decode.vs import VALUES

    a = {r.system: r for r in old.rows}
    b = {r.system: r for r in new.rows}
    timed = old.windows and new.windows
    found: list[Change] = []
    for system in [s for s in a if s in b]:
        before, after = a[system], b[system]
        step = apart_interval(per_process(old.windows, system), per_process(new.windows, system))
        why = "" if timed else "a --json document carries no samples"
        found.append(timing_change(system, "step_ms", before.ms_per_step, after.ms_per_step,
                                   step if timed else None, why))  # fmt: skip
        if before.frames_compiled is not None or after.frames_compiled is not None:
            found.append(count_change(system, "builds", before.frames_compiled,
                                      after.frames_compiled))  # fmt: skip
        for column in VALUES:
            found.append(value_change(system, column, getattr(before, column),
                                      getattr(after, column)))  # fmt: skip
    return found, {}


def explain_changes(old: SavedRun, new: SavedRun) -> tuple[list[Change], dict]:
    """explain's counts per member, and what is on one side only; members must match."""
    from nanobench.explain.before_after import Sides, changes, differences, member

    ours, theirs = [member(r) for r in old.rows], [member(r) for r in new.rows]
    if ours != theirs:
        raise BadInput(f"{old.where} explained {', '.join(ours)} and {new.where} "
                       f"{', '.join(theirs)}: compare needs the same depths or steps")  # fmt: skip
    sides = Sides(old.where, new.where, old.rows, new.rows)
    return changes(sides), differences(sides)


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
