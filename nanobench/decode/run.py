"""One `nanobench decode` run: check the model on both sides, sweep the systems, report.

What it is: `run_decode(spec, status, ...)`: each side's `RunSpec` (`sides.py`: the checks
that need the model), then one measured run (`harness.runs.measured_run`) around the interleaved
sweep (`bench.sweep_sides`); `DecodeKind` is what decode brings to it: each side's rows derived
from its systems, its probe and its windows, the samples' text, its changes, gates and report;
and the rows as written are `rows.public`.
What it is not: the command's options or spec (`command.py`), the workers (`session.py`), the
statistics (`derive.derive`, `nanobench.harness.statistics.stats`) or the run's files, env record,
interrupt and exit code (`MeasuredRun`).
Invariant: a system whose tokens differ from its side's reference fails the run; the load
before and after the run is in the env record, and a row timed on a crowded machine says so.
"""

from __future__ import annotations

from functools import partial

from nanobench.decode import bench  # bench.sweep_sides looked up per run: the tests' seam
from nanobench.decode import history as decode_history
from nanobench.decode.derive import derive
from nanobench.decode.gates import gates
from nanobench.decode.roofline import PROBE
from nanobench.decode.rows import CSV_COLUMNS, DecodeRow, ProbeRow, RunSpec, public
from nanobench.decode.samples import add_samples
from nanobench.decode.sides import run_specs
from nanobench.decode.spec import DecodeSpec
from nanobench.decode.vs import changes
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.export import export_decode
from nanobench.harness.runs.measured_run import MeasuredRun, RunKind
from nanobench.harness.step.knobs import PLAIN, unsafe_of
from nanobench.harness.workers import load  # looked up per run: the tests' seam
from nanobench.harness.workers.member import Member
from reports.change import DECODE_PANELS
from reports.decode import draw_decode, render_decode
from reports.style import title


class DecodeKind(RunKind):
    """What decode brings to a measured run: members are (side, system), each side's probe
    one of them."""

    command, label, row_type = "decode", "system", DecodeRow

    def __init__(self, spec: DecodeSpec, runs: dict[str, RunSpec], directory) -> None:
        super().__init__(spec)
        self.runs, self.directory = runs, directory
        self.run = runs.get("after", runs.get("", runs.get(PLAIN)))

    def derive(self, side, rows, windows, level, history) -> list[DecodeRow]:
        probe = next((r for r in rows if isinstance(r, ProbeRow)), None)
        systems = [r for r in rows if not isinstance(r, ProbeRow)]
        return derive(systems, self.runs[side], probe, windows, level, history)

    def changes(self, rows, windows, level) -> list:
        return changes(rows, windows, level, self.spec.pairs())

    def lends(self, side: str) -> list[Member]:
        # a knob side's floor and references (eager, transformers) are plain's
        if not self.spec.tries or side == PLAIN:
            return []
        own = self.spec.sides()[side].systems
        return [Member(PLAIN, n) for n in (PROBE, *self.spec.systems) if n not in own]

    def side_names(self) -> tuple[str, str]:
        return (PLAIN, "knob") if self.spec.tries else super().side_names()

    def why_lines(self, rows) -> list[str]:
        return [line for k in self.spec.tries for line in unsafe_of(k)]

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def public(self, rows, sided: bool) -> list[dict]:
        return public(rows)

    def csv_columns(self, sided: bool) -> list[str]:
        return CSV_COLUMNS

    def failed(self, rows) -> bool:
        return any(r.status != "ok" or r.tokens_match is False for r in rows)

    def finished(self, rows) -> list[DecodeRow]:
        return add_samples(rows, self.directory)

    def heading(self, rows) -> str:
        return heading(self.spec, self.runs, rows)

    panels = DECODE_PANELS

    def report(self, run: MeasuredRun, rows, found, changed, head):
        probe = run.done.get(Member("", PROBE))
        png = draw_decode(rows, run.where / "decode.png", head)
        return png, partial(render_decode, stdout_console(), rows, found, head, probe)

    def export(self, rows, record):
        return export_decode(self.spec, self.run.dtype, rows, record)

    history = decode_history

    def history_keys(self) -> dict:
        return decode_history.keys(self.run, self.spec.processes, self.spec.systems)

    def lent(self, history: dict) -> dict:
        return decode_history.by_comparison(history)

    def statuses(self, run: MeasuredRun, rows) -> list[str]:
        probes = [r for r in run.done.values() if isinstance(r, ProbeRow)]
        return [r.status for r in rows] + [p.status for p in probes]


def run_decode(spec: DecodeSpec, status, *, json_mode: bool, check: bool) -> int:
    """Validate everything, then the sweep in rounds, report; the exit code `finish` picks."""
    runs, directory = run_specs(spec, status)
    run = MeasuredRun(DecodeKind(spec, runs, directory), status, check, spec.round_plan(),
                      spec.compared)  # fmt: skip
    run.open(load.look_before_timing)
    lent = run.open_history()
    # each side's probe first, as its fleet sets them up; a knob side borrows plain's
    planned = [Member(side, s) for side, each in spec.sides().items()
               for s in ((PROBE,) if not each.knob else ()) + tuple(each.systems)]  # fmt: skip

    def measure() -> None:
        bench.sweep_sides(runs, planned, spec.round_plan(), pairs=spec.pairs(), timeout=spec.timeout,
                          processes=spec.processes, listener=run, on_status=status,
                          history=lent)  # fmt: skip

    return run.run(measure, planned, json_mode=json_mode,
                   crowded=lambda t, a: load.crowded_note(t, a))  # fmt: skip


def heading(spec: DecodeSpec, runs: dict[str, RunSpec], rows: list[DecodeRow]) -> str:
    """The table's and the figure's title: what ran, on what, how often."""
    run = runs.get("after", runs.get("", runs.get(PLAIN)))
    what = "decode"
    if spec.tries:
        what = f"decode: knobs {', '.join(spec.tries)} against plain torch.compile"
    elif spec.compared:
        before = spec.sides()["before"]
        what = (f"decode of {spec.model} {run.dtype} (after) vs {before.model} "
                f"{runs['before'].dtype} (before)")  # fmt: skip
    return title(
        what,
        model=None if spec.compared and not spec.tries else spec.model,
        device=spec.device,
        dtype=run.dtype,
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        threads=spec.threads or "default",
        interleaved_rounds=max((r.rounds for r in rows), default=0),
        processes=spec.processes,
    )
