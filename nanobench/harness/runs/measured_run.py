"""One owner for a measured run of `compile`, `decode`, `startup` or `profile`.

What it is: `MeasuredRun(kind, status, check, plan)`, which owns the out directory, the env
record before and after (with the load seen around the timing), the files written as rows and
windows arrive (`<command>.csv`, `-samples.csv`, `-changes.csv`), history, an interrupt (what
is on disk and what did not run), the gates that apply (a plain run's, or a comparison's:
each failed member and the columns its user named), the outputs, figure, export and `finish`.
It is the listener a sweep reports to (`on_row`, `on_window`, `on_round`, `decided`), and
`run(measure)` is the whole run around the command's own measuring; `measured(kind, ...)` is a
command's whole run entry. A side is a parameter of the same run (the kind's `sides`,
`harness.runs.sides.Sides`, built once), never a copy: it may borrow another's members
(`Side.borrows`), its rows checked across sides (`RunKind.across`).
What it is not: what a command supplies (`run_kind.RunKind`), the measuring itself (the fleet,
`fleet.sweep`; startup's starts), a command's rows or the statistics.
Invariant: every row and window is on disk before the next one is measured; a comparison's
gates, its stop rule and its table read one set of changes, derived at one level per look.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from nanobench.harness.cli.console import interrupted, say_warning, stdout_console
from nanobench.harness.cli.validate import out_dir, out_file
from nanobench.harness.errors import BadInput
from nanobench.harness.runs import environments
from nanobench.harness.runs.change import Change, comparison_gates
from nanobench.harness.runs.env_record import collect_env, with_load, write_env
from nanobench.harness.runs.eta import announce
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rounds_ended import Ended, ended_lines
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.samples import sample_columns
from nanobench.harness.runs.samples import sample_rows as window_samples
from nanobench.harness.statistics.verdicts import INCONCLUSIVE
from nanobench.harness.step.targets import raised_by_target
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import RoundPlan, Window, describe, look_confidence
from reports.csvio import write_rows


@dataclass
class MeasuredRun:
    """One run of one command: its files, env record, rows and windows so far, and its end."""

    kind: RunKind
    status: Callable[[str], None]
    check: bool = False
    plan: RoundPlan | None = None
    done: dict[Member, object] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    history: dict = field(default_factory=dict)  # what earlier runs lend, by the kind's keys
    store: object = None  # the history store (`history_store.RunHistory`), in a plain run
    note: str | None = None  # the crowded machine's note, on every row
    _looked: tuple | None = field(default=None, init=False, repr=False)
    where: Path = field(init=False)
    record: object = field(init=False)
    ended: Ended | None = field(default=None, init=False)  # why the rounds stopped, what was open
    timer: object = field(default=None, init=False)  # the run's clock and estimate (`eta.Timer`)
    _found: dict = field(default_factory=dict, init=False, repr=False)  # the last round's
    _rounds_from: float | None = field(default=None, init=False, repr=False)
    probed: dict = field(default_factory=dict, init=False)  # each side's environment (elsewhere)
    differences: list[str] = field(default_factory=list, init=False)  # what differs, a line each

    def __post_init__(self) -> None:
        spec = self.kind.spec
        if self.check and self.kind.sides.compared and not (spec.no_more or spec.no_slower):
            raise BadInput("--check on a comparison gates the columns you name: give --no-more "
                           "and/or --no-slower")  # fmt: skip
        self.where = out_dir(spec.out)
        out_file(spec.export_json, "--export-json")

    def path(self, suffix: str = "", ext: str = "csv") -> Path:
        """`<out>/<command><suffix>.<ext>`: decode.csv, decode-samples.csv, decode-env.json."""
        return self.where / f"{self.kind.command}{suffix}.{ext}"

    def open(self, look: Callable | None = None) -> None:
        """Each side's environment asked for, what differs said; the env record, with the
        load seen before timing (`look` returns it and the crowded note; without one, a plain
        sample)."""
        from nanobench.harness.workers import load

        self.probed = environments.probed(self.kind.sides)
        self.differences = environments.differences(self.probed)
        if self.differences and not getattr(self.status, "quiet", False):
            sys.stderr.write("".join(f"{line}\n" for line in self.differences))
        record = collect_env(self.kind.spec.threads, sys.argv)
        if self.probed:
            record = environments.recorded(record, self.probed)
        before, self.note = look(record.threads) if look else (load.sample_load(), None)
        self.record = with_load(record, before)
        write_env(self.path("-env", "json"), self.record)

    # -- the rows as they come ------------------------------------------------------------

    def level(self) -> float:
        if self.plan is None:
            return 0.95
        return look_confidence(self.plan, max((w.round for w in self.windows), default=0))

    def derived(self, windows: list[Window], level: float) -> list:
        """Each side's rows derived from its own windows (and those another side lends it), as
        a run of its own; then what the kind checks across sides."""
        out = []
        for side in self.kind.sides:
            lent = [m for m in side.lent() if m in self.done]
            rows = [r for m, r in self.done.items() if m.side == side.name]
            rows += [replace(self.done[m], side=side.name) for m in lent]
            # each side derived as a run of its own: its members by their names alone
            mine = [replace(w, side="") for w in windows if w.side == side.name or w.member in lent]
            derived = self.kind.derive(side.name, rows, mine, level, self.history)
            lent_names = {m.name for m in lent}  # derived beside this side's, not its own rows
            out += [r for r in derived if not lent or getattr(r, self.kind.label) not in lent_names]
        return self.kind.across(out)

    def gates(self, rows: list, found: list[Change]) -> list:
        """A plain run's gates; a comparison's: its failed members and the columns named."""
        if not self.kind.sides.compared:
            return self.kind.gates(rows)
        failed = {str(self.kind.member(r)): r.status for r in rows if r.status != "ok"}
        return comparison_gates(failed, self.kind.spec, found)

    def look(self, level: float) -> tuple[list, list[Change]]:
        """The rows and changes as the run stands, at `level`: derived once per look (the
        windows only grow, so their count and the rows' mark one), so the files, the stop
        rule and the gates read the same intervals."""
        key = (len(self.windows), level, tuple(self.done.values()), self.note)
        if self._looked is None or self._looked[0] != key:
            rows = self.derived(self.windows, level)
            rows = [replace(r, load_note=self.note) for r in rows] if self.note else rows
            self._looked = (key, rows, self.kind.changes(rows, self.windows, level))
        return self._looked[1], self._looked[2]

    def save(self) -> list:
        """Every file as the run stands; the rows as derived now."""
        rows, found = self.look(self.level())
        compared = self.kind.sides.compared  # a comparison's samples and changes carry sides
        write_rows(self.path(), self.kind.public(rows), self.kind.csv_columns())
        if self.plan is not None:
            label = self.kind.label
            write_rows(self.path("-samples"), window_samples(self.windows, label, compared),
                       sample_columns(label, compared))  # fmt: skip
        if compared:
            write_rows(self.path("-changes"), as_dicts(found), columns(Change))
        for name, (found, row_type) in self.kind.tables(rows).items():
            write_rows(self.path(f"-{name}"), *self.kind.written(found, row_type))
        return rows

    def more_outputs(self) -> dict[str, str]:
        """The paths of the command's own files, by their names."""
        return {name: str(self.path(f"-{name}")) for name in self.kind.tables([])}

    def on_row(self, row) -> None:
        """A member's row, kept and on disk; where the user's own target raised in its worker,
        the run ends there as their bad input (one line, exit 2), what ran before it kept."""
        row = self.kind.arrived(row)
        self.done[self.kind.member(row)] = row
        self.save()
        raised = raised_by_target(getattr(row, "status", "ok") or "ok")
        if raised is not None:
            raise raised
        if self.timer is not None:  # a --target's estimate, held until its factory ran
            self.timer.say()

    def on_window(self, window: Window) -> None:
        if window.round >= 1 and self._rounds_from is None:
            self._rounds_from = time.monotonic()
        self.windows.append(window)

    def on_round(self, r: int, found: dict) -> None:
        self._found = found
        self.save()
        self.status(f"round {r}: " + "; ".join(describe(n, i) for n, i in found.items()))

    def on_stop(self, why: str, r: int) -> None:
        """Why the rounds stopped, and the ratios still open (their interval holds 1, or there
        is none yet)."""
        seconds = time.monotonic() - (self._rounds_from or time.monotonic())
        held = [(n, i) for n, i in self._found.items() if not (i.low > 1 or i.high < 1)]
        self.ended = Ended(why, r, seconds, tuple(held))

    def decided(self, timed: list[Window], level: float) -> bool:
        """Every gate of the run passes or fails at this look's level: no round can change it.
        Read from every window kept (`timed`, the rounds', are among them), as the files are."""
        rows, found = self.look(level)
        return all(g.verdict != INCONCLUSIVE for g in self.gates(rows, found))

    # -- history -----------------------------------------------------------------------------

    def open_history(self) -> dict | None:
        """A plain run's earlier figures on this machine (its command keeps them, and
        --history is on): lent to its rows; what the stop rule borrows, returned."""
        from nanobench.harness.runs.history_store import RunHistory

        kind = self.kind
        if kind.history is None or not kind.spec.history or self.kind.sides.compared:
            return None
        self.store, self.facts = RunHistory(), kind.history_keys()
        if self.probed:  # a plain run under --python: its interpreter's versions key it
            found = next(iter(self.probed.values()))
            self.facts = {k: f.elsewhere(found) for k, f in self.facts.items()}
        self.history = kind.history.load(self.store, self.facts)
        return kind.history.by_comparison(self.history)

    def settle_history(self, rows: list, gates: list) -> str | None:
        """A sound run's figures recorded; what it read and recorded written beside its CSV
        (the file's path); the store's problems said, one line each (`settle`)."""
        from nanobench.harness.runs.history_store import settle

        if self.store is None:
            return None
        mod = self.kind.history
        return settle(
            self.store, self.path("-history", "json"), self.kind.statuses(self, rows), gates,
            partial(mod.record, self.store, self.facts, rows, self.windows),
            mod.use(self.facts, self.history, rows), say_warning,
        )  # fmt: skip

    # -- the run, whole ---------------------------------------------------------------------

    def measure(self, body: Callable[[], None], planned: list[Member]) -> None:
        """The command's measuring; an interrupt saves, says what is on disk and what of
        `planned` did not run."""
        try:
            body()
        except KeyboardInterrupt:
            self.save()
            missing = [str(m) for m in planned if m not in self.done]
            paths = [self.path()] + ([self.path("-samples")] if self.plan else [])
            paths += list(self.more_outputs().values())
            raise interrupted(len(self.done), len(self.windows), missing, *paths) from None

    def run(self, body: Callable[[], None], planned: list[Member], *, json_mode: bool,
            crowded: Callable | None = None) -> int:  # fmt: skip
        """Announce, measure, then the env record after, the files, gates and report; the
        exit code `finish` picks. `crowded(threads, after)` words a load seen after timing."""
        from nanobench.harness.workers import load

        timer = announce(self.kind.command, self.kind.spec, self.kind.estimate, self.status)
        self.timer = timer
        self.measure(body, planned)
        after = load.sample_load()
        self.record = with_load(self.record, after=after)
        write_env(self.path("-env", "json"), self.record)
        if crowded is not None:
            self.note = self.note or crowded(self.record.threads, after)
        rows = self.kind.finished(self.save())
        code = self.finish(rows, json_mode)
        ended = self.ended or Ended("", 0, 0.0)  # no rounds: startup's starts
        compile_s = sum(getattr(r, "compile_s", None) or 0.0 for r in rows)
        timer.done(all(r.status == "ok" for r in rows), compile_s, ended.rounds, ended.seconds)
        return code

    def finish(self, rows: list, json_mode: bool) -> int:
        """The changes, gates, history, figure, table and export of the finished rows."""
        found = self.look(self.level())[1]  # the changes the files and the stop rule read
        gates = self.gates(rows, found)
        head = self.kind.heading(rows)
        outputs = {"csv": str(self.path())}
        if self.plan is not None:
            outputs["samples"] = str(self.path("-samples"))
        outputs.update(self.more_outputs())
        outputs["env"] = str(self.path("-env", "json"))
        used = self.settle_history(rows, gates)
        if used:
            outputs["history"] = used
        report, extra = self.kind.report, None
        if (
            self.kind.sides.compared
        ):  # a comparison: its changes are a file, its table and part of --json
            outputs["changes"] = str(self.path("-changes"))
            report, extra = self.kind.compare_report, {"changes": as_dicts(found)}
        png, table = report(self, rows, gates, found, head)
        ended = ended_lines(self.ended, self.plan) if self.plan is not None else []
        render = partial(said_after, table, ended)
        if ended:
            extra = {**(extra or {}), "rounds_ended": ended}
        # the command's own tables (profile's categories and kernels), whole, as their files hold
        tables = {name: as_dicts(table) for name, (table, _) in self.kind.tables(rows).items()}
        if tables:
            extra = {**(extra or {}), **tables}
        outputs["png"] = str(png)
        if self.kind.spec.export_json:
            outputs["export_json"] = str(self.kind.export(rows, self.record))
        return finish(
            self.kind.command, self.kind.public(rows), gates, outputs, json_mode=json_mode,
            check=self.check, render=render, failed=self.kind.failed(rows),
            env=asdict(self.record), extra=extra,
        )  # fmt: skip


def said_after(render: Callable[[], None], lines: list[str]) -> None:
    """The command's report, then how its rounds ended, where a limit ended them."""
    render()
    for line in lines:
        stdout_console().print(line, markup=False)


def measured(kind: RunKind, status: Callable[[str], None], body: Callable, *, check: bool,
             json_mode: bool, plan: RoundPlan | None = None, look: Callable | None = None,
             crowded: Callable | None = None) -> int:  # fmt: skip
    """A command's whole measured run: opened (the env record, with `look`'s load), its history
    lent, `body(run, lent)` measured around, finished; the exit code `finish` picks."""
    run = MeasuredRun(kind, status, check, plan)
    run.open(look)
    lent = run.open_history()
    return run.run(partial(body, run, lent), kind.planned(), json_mode=json_mode,
                   crowded=crowded)  # fmt: skip
