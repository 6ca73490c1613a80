"""One `nanobench profile` run: compile's sweep, each mode's first worker profiling its step.

What it is: `ProfileKind` (what profile brings to a measured run: compile's rows, each carrying
its mode's profile, joined to it, `joined.joined`; the category CSVs; the changes by category)
and `run_profile` (`measured` around `bench.profiled_sweep`).
What it is not: the worker, the attribution, the gates or the report.
Invariant: what the kind reports is a function of the rows and windows it is handed: it keeps
nothing between calls; a category moved is read from both sides' profiled rows.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from nanobench.compile.rows import derive
from nanobench.compile.sides import worker_specs
from nanobench.compile.spec import CompileSpec
from nanobench.compile.vs import changes as compile_changes
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.measured_run import MeasuredRun, measured
from nanobench.harness.runs.rows import as_dicts
from nanobench.harness.runs.run_kind import RunKind
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.load import crowded_note, look_before_timing
from nanobench.harness.workers.rounds import round_plan
from nanobench.profile.bench import profiled_sweep
from nanobench.profile.gates import gates
from nanobench.profile.joined import joined, with_amdahl
from nanobench.profile.rows import CategoryRow, JoinedRow, KernelRow, ProfileRow
from nanobench.profile.spec import ProfileSpec
from nanobench.profile.vs import (
    by_category,
    calls_changed,
    category_changes,
    compare_changes,
    moved_most,
    paired,
    why,
)
from nanobench.profile.words import words
from reports.profile import draw_profile, render_moved, render_profile


class ProfileKind(RunKind):
    """What profile brings to a measured run: members are (side, mode), rows `JoinedRow`s,
    written as `ProfileRow`s."""

    command, label, row_type, spec_type = "profile", "mode", ProfileRow, ProfileSpec
    gate = staticmethod(gates)
    counts, timings = ("builds",), CompileSpec.TIMINGS
    saved_changes, why = staticmethod(compare_changes), staticmethod(why)

    def derive(self, side, rows, windows, level, history) -> list[JoinedRow]:
        """The side's compile rows derived, each joined to its profile; amdahl and words
        against off's (a knob side's: plain's, lent)."""
        every = [joined(replace(r, side=side))
                 for r in derive(rows, self.spec.horizon, windows, level)]  # fmt: skip
        off = None
        if "off" in self.spec.modes:
            off = next((list(r.category_rows) for r in every if r.mode == "off"), [])
        own = self.sides[side].members
        out = with_amdahl([r for r in every if r.mode in own])
        return [replace(r, words=words(r, off)) for r in out]

    def public(self, rows) -> list[dict]:
        return as_dicts([r.written() for r in rows])

    def changes(self, rows, windows, level) -> list:
        """Compile's changes of the rows' timings, then each pair's changes by category."""
        timed = [r.compiled_row for r in rows if r.compiled_row is not None]
        found = compile_changes(timed, windows, level, self.sides)
        return found + [c for pair in paired(rows, self.sides) for c in category_changes(*pair)]

    def why_lines(self, rows, changes=()) -> list[str]:
        pairs = paired(rows, self.sides)
        moved = [line for pair in pairs for line in moved_most(category_changes(*pair))]
        calls = [line for pair in pairs for line in calls_changed(*pair)]
        return [f"{r.side} {r.words}" for r in rows if r.words] + moved + calls

    def compare_report(self, run: MeasuredRun, rows, found, changed, head):
        """The change table of the timings and counts, then where the step moved."""
        timings, categories = by_category(changed)
        png, render = super().compare_report(run, rows, found, timings, head)

        def both() -> None:
            render()
            render_moved(stdout_console(), categories, self.sides.labels)

        return png, both

    def tables(self, rows) -> dict:
        categories = [c for r in rows for c in r.category_rows]
        return {"categories": (categories, CategoryRow),
                "kernels": ([k for r in rows for k in r.kernel_rows], KernelRow)}  # fmt: skip

    def report(self, run: MeasuredRun, rows, found, changed, head):
        categories = [c for r in rows for c in r.category_rows]
        kernels = [k for r in rows for k in r.kernel_rows]
        png = draw_profile(rows, categories, kernels, run.where / "profile.png", head)
        render = partial(render_profile, stdout_console(), rows, categories, kernels, found,
                         head, top=self.spec.top)  # fmt: skip
        return png, render


def run_profile(spec: ProfileSpec, status, *, json_mode: bool, check: bool) -> int:
    """Each mode in its fresh worker: profiled once, timed in rounds; the gates' exit code."""
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)
    sides = Sides.of(spec)
    dtype, workers = worker_specs(sides, "")
    kind = ProfileKind(spec, sides, dtype)

    def measure(run: MeasuredRun, lent: dict | None) -> None:
        profiled_sweep(spec, sides, workers, plan, listener=run, on_status=status)

    return measured(kind, status, measure, check=check, json_mode=json_mode, plan=plan,
                    look=look_before_timing, crowded=crowded_note)  # fmt: skip
