"""One `nanobench decode` run: each side's model checked, the systems swept, reported.

What it is: `DecodeKind` (what decode brings to a measured run: each side's rows derived from
its systems, its probe and its windows, the samples' text, changes, heading, report, export)
and `run_decode` (`measured` around `bench.sweep_sides`).
What it is not: the options, spec, workers, statistics or the run's files (`MeasuredRun`).
Invariant: a system whose tokens differ from its side's reference fails the run.
"""

from __future__ import annotations

from functools import partial

from nanobench.decode import bench  # bench.sweep_sides looked up per run: the tests' seam
from nanobench.decode import history as decode_history
from nanobench.decode.derive import derive
from nanobench.decode.gates import gates
from nanobench.decode.roofline import PROBE
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec
from nanobench.decode.samples import add_samples
from nanobench.decode.sides import run_specs
from nanobench.decode.spec import DecodeSpec
from nanobench.decode.vs import changes, saved_changes
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.export import export_decode
from nanobench.harness.runs.measured_run import MeasuredRun, measured
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers import load  # looked up per run: the tests' seam
from nanobench.harness.workers.member import Member
from reports.change import DECODE_PANELS
from reports.decode import draw_decode, render_decode


class DecodeKind(RunKind):
    """What decode brings to a measured run: members are (side, system), each side's probe
    one of them."""

    command, label, row_type, spec_type = "decode", "system", DecodeRow, DecodeSpec
    gate = staticmethod(gates)
    change, exporter = staticmethod(changes), staticmethod(export_decode)
    counts, timings, panels = DecodeSpec.COUNTS, DecodeSpec.TIMINGS, DECODE_PANELS
    history, unwritten = decode_history, ("tokens",)  # their digest is written, not the lists

    saved_changes = staticmethod(saved_changes)

    def __init__(self, spec: DecodeSpec, sides: Sides, runs: dict[str, RunSpec], directory):
        super().__init__(spec, sides, runs[sides.main].dtype)
        self.runs, self.directory = runs, directory
        self.run = runs[sides.main]

    def derive(self, side, rows, windows, level, history) -> list[DecodeRow]:
        probe = next((r for r in rows if isinstance(r, ProbeRow)), None)
        systems = [r for r in rows if not isinstance(r, ProbeRow)]
        return derive(systems, self.runs[side], probe, windows, level, history)

    def failed(self, rows) -> bool:
        return any(r.status != "ok" or r.tokens_match is False for r in rows)

    def finished(self, rows) -> list[DecodeRow]:
        return add_samples(rows, self.directory)

    def heading(self, rows) -> str:
        return self.spec.heading(self.sides, self.runs, rows)

    def report(self, run: MeasuredRun, rows, found, changed, head):
        probe = run.done.get(Member(self.sides.main, PROBE))
        png = draw_decode(rows, run.where / "decode.png", head)
        return png, partial(render_decode, stdout_console(), rows, found, head, probe)

    def history_keys(self) -> dict:
        return decode_history.keys(self.run, self.spec.processes, self.spec.systems)


def run_decode(spec: DecodeSpec, status, *, json_mode: bool, check: bool) -> int:
    """Each side's checks that need the model, then the sweep in rounds, report; the exit code
    `finish` picks."""
    sides = Sides.of(spec)
    runs, directory = run_specs(sides, status, spec.processes)
    kind = DecodeKind(spec, sides, runs, directory)

    def measure(run: MeasuredRun, lent: dict | None) -> None:
        # each side's probe first, as its fleet sets them up; a knob side borrows plain's
        bench.sweep_sides(runs, kind.planned(), spec.round_plan(), sides=sides,
                          timeout=spec.timeout, processes=spec.processes, listener=run,
                          on_status=status, history=lent)  # fmt: skip

    return measured(kind, status, measure, check=check, json_mode=json_mode,
                    plan=spec.round_plan(), look=load.look_before_timing,
                    crowded=lambda t, a: load.crowded_note(t, a))  # fmt: skip
