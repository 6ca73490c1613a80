"""What a command brings to its runs: `SavedKind` (what `compare` reads of its saved runs) and
`RunKind` (what a measured command supplies to its measured run).

What it is: `SavedKind` (the command's name and saved CSV, the member column of its rows and
samples, its row type, the counts and timings `--no-more` and `--no-slower` may name, its
changes between two saved runs with what is on one side only, compare.png's panels and what a
saved row says under the table; explain's `ExplainKind` is one) and `RunKind` (a `SavedKind`
that also measures: its spec type, its sides, its members planned, its rows derived, changed,
gated, checked across sides, written, reported and exported; each default a plain row's).
What it is not: the run's owner (`measured_run.MeasuredRun`: files, env record, history,
interrupt, exit code) or a command's rows.
Invariant: a kind whose `saved_changes` is None is refused by `compare` by name; a kind reads
its comparison off `sides` (`harness.runs.sides.Sides`), never off a side's name.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.change import Change
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.runs.run_spec import MeasuredSpec
from nanobench.harness.runs.sides import Sides
from nanobench.harness.step.knobs import unsafe_of
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Window


class SavedKind:
    command: str  # names the files, the JSON document and the estimate
    label: str  # the member's name column in rows and samples: "mode", "system"
    row_type: type
    counts: tuple[str, ...] = ()  # what --no-more may name
    timings: tuple[str, ...] = ()  # what --no-slower may name
    panels = None  # compare.png's panels (`reports.change`); None: no figure
    saved_changes: Callable | None = None  # (old, new) -> (changes, what is on one side only)

    @classmethod
    def csv(cls) -> str:
        return f"{cls.command}.csv"

    @staticmethod
    def why(row) -> list[str]:
        """What a saved row says under compare's table."""
        return []


class RunKind(SavedKind):
    """What one command supplies to a measured run; the defaults are a plain row's. As a
    `SavedKind`, it is also what `compare` reads of the command's saved runs."""

    spec_type: type  # the command's spec (a `run_spec.MeasuredSpec`): its estimate, its sides

    change = None  # (rows, windows, level, sides) -> the changes of a comparison's pairs
    exporter = None  # (spec, sides, dtype, rows, record) -> the --export-json file written

    def __init__(self, spec: MeasuredSpec, sides: Sides, dtype: str) -> None:
        self.spec, self.sides, self.dtype = spec, sides, dtype

    def planned(self) -> list[Member]:
        """What the run will measure, in order: every side's own members."""
        return self.sides.planned()

    def estimate(self, cores: int):
        """The run's plan for its estimate (`harness.runs.eta.Plan`): the spec's."""
        return self.spec.plan(self.sides, cores)

    def member(self, row) -> Member:
        return Member(row.side, getattr(row, self.label))

    def derive(self, side: str, rows: list, windows: list[Window], level: float,
               history: dict) -> list:  # fmt: skip
        """One side's rows from its own members' rows and windows, as a run of its own."""
        return rows

    def changes(self, rows: list, windows: list[Window], level: float) -> list[Change]:
        return self.change(rows, windows, level, self.sides) if self.change else []

    def across(self, rows: list) -> list:
        """Every side's derived rows, checked against each other (a knob's output, plain's)."""
        return rows

    gate = None  # (spec, rows) -> a plain run's gates: the command's `gates.gates`

    def gates(self, rows: list) -> list:
        """A plain run's gates."""
        return self.gate(self.spec, rows) if self.gate else []

    unwritten: tuple[str, ...] = ()  # row fields kept in memory, never written out
    plain_side = True  # a plain run's rows keep their (empty) side column

    def hidden(self) -> tuple[str, ...]:
        """The fields a row is written without: the unwritten, and a plain run's side where
        the command's plain files never had one."""
        return self.unwritten + (() if self.sides.compared or self.plain_side else ("side",))

    def written(self, rows: list, row_type: type) -> tuple[list[dict], list[str]]:
        """Rows of `row_type` as written, and their columns: every field but the hidden."""
        hidden = self.hidden()
        found = [{k: v for k, v in d.items() if k not in hidden} for d in as_dicts(rows)]
        return found, [c for c in columns(row_type) if c not in hidden]

    def public(self, rows: list) -> list[dict]:
        """Rows as written (in the CSV and the JSON document)."""
        return self.written(rows, self.row_type)[0]

    def csv_columns(self) -> list[str]:
        return self.written([], self.row_type)[1]

    def failed(self, rows: list) -> bool:
        return any(r.status != "ok" for r in rows)

    def heading(self, rows: list) -> str:
        """The table's and the figure's title: the spec's, of the run's sides and dtype."""
        return self.spec.heading(self.sides, self.dtype, rows)

    def report(self, run, rows: list, gates: list, changes: list, head: str):
        """A plain run's figure (its path) and table (its renderer)."""
        raise NotImplementedError

    def why_lines(self, rows: list, changes: list = ()) -> list[str]:
        """What each side's rows, and the changes, say under a comparison's table."""
        return []

    def compare_report(self, run, rows: list, gates: list, changes: list,
                       head: str):  # fmt: skip
        """A comparison's figure (each member before and after) and its change table."""
        from reports.change import COMPILE_PANELS, draw_compare, render_changes

        path = run.where / "compare.png"
        png = draw_compare(self.public(rows), path, head, self.panels or COMPILE_PANELS)
        unsafe = [line for knob in self.sides.knobs for line in unsafe_of(knob)]
        notes = run.differences + unsafe + self.sides.borrowed() + self.why_lines(rows, changes)
        return png, partial(render_changes, stdout_console(), as_dicts(changes), gates, head,
                            notes, self.sides.labels)  # fmt: skip

    def export(self, rows: list, record) -> Path:
        """The rows as benchmark-database records (`harness.runs.export`)."""
        return self.exporter(self.spec, self.sides, self.dtype, rows, record)

    def arrived(self, row):
        """A member's row as it arrives from the sweep, before it is kept."""
        return row

    def finished(self, rows: list) -> list:
        """The run's rows once measured, before they are reported."""
        return rows

    def tables(self, rows: list) -> dict[str, tuple[list, type]]:
        """Files of the command's own beside its rows, by name (`<command>-<name>.csv`): each
        one's rows and row type, written as the rows are."""
        return {}

    # A command whose plain runs keep a history on this machine names its module (with
    # `keys`, `load`, `record`, `use`: `compile.history`, `decode.history`).
    history = None

    def history_keys(self) -> dict:
        """Every figure's history key in this run (the history module's `keys`)."""
        return {}

    def statuses(self, run, rows: list) -> list[str]:
        """Every status a sound run needs ok before it is recorded: each row's as derived, and
        each member's as it came (a side's probe too)."""
        return [r.status for r in rows] + [r.status for r in run.done.values()]
