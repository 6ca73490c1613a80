"""One `nanobench profile` run: compile's sweep, each mode's first worker profiling its step.

What it is: `ProfileKind` (what profile brings to a measured run, `harness.runs.measured_run`:
compile's rows derived from the same rounds, each carrying its mode's profile,
`bench.ProfilePart`, then joined to it as a `rows.JoinedRow` with its categories, kernels and
words; the category CSVs; the changes by category in a `--vs` run), `joined` (one such row) and
`run_profile`.
What it is not: the worker (`profile.session`), the attribution, the gates or the report.
Invariant: the unprofiled step is timed in the fleet's interleaved rounds, the profile in the
same worker; a category moved is read from both sides' profiled rows, never inferred; what the
kind reports is a function of the rows and windows it is handed, and it keeps nothing between
calls.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from nanobench.compile.rows import CompileRow, derive
from nanobench.compile.sides import worker_specs
from nanobench.compile.vs import changes as compile_changes
from nanobench.cost.compile import step_speedup
from nanobench.harness.cli.console import stdout_console
from nanobench.harness.runs.measured_run import MeasuredRun, RunKind
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.step.knobs import PLAIN
from nanobench.harness.step.targets import BUILTINS
from nanobench.harness.workers.load import crowded_note, look_before_timing
from nanobench.harness.workers.member import AFTER, Member
from nanobench.harness.workers.rounds import round_plan
from nanobench.profile.bench import profiled_sweep
from nanobench.profile.gates import gates
from nanobench.profile.overhead import net_of_profiler
from nanobench.profile.rows import (
    TIMING_FIELDS,
    CategoryRow,
    JoinedRow,
    KernelRow,
    ProfileRow,
    fields_of,
)
from nanobench.profile.spec import ProfileSpec
from nanobench.profile.vs import by_category, calls_changed, category_changes, moved_most
from nanobench.profile.words import why_speedup
from reports.csvio import write_rows
from reports.profile import draw_profile, render_moved, render_profile
from reports.style import counted, title


def joined(row: CompileRow) -> JoinedRow:
    """A mode's timing (compile's derived row, its `TIMING_FIELDS` copied by name) and the
    profile it carries (`rows.ProfiledCompileRow`): where it ran ok, the profile's facts and
    categories net of the profiler's cost; where it failed, its categories as measured."""
    timing = {name: getattr(row, name) for name in TIMING_FIELDS}
    profile = getattr(row, "profile", None)
    if profile is None:
        return JoinedRow(**timing, compiled_row=row)
    named = {"mode": row.mode, "side": row.side}
    kernels = tuple(replace(k, **named) for k in profile.kernels)
    if row.status != "ok":
        return JoinedRow(**timing, compiled_row=row, kernel_rows=kernels,
                         category_rows=tuple(replace(c, **named) for c in profile.categories))  # fmt: skip
    net, facts = net_of_profiler(list(profile.categories), profile.facts.plain_step_ms)
    base = {**fields_of(profile.facts, ProfileRow), **timing, **facts}
    return JoinedRow(**base, compiled_row=row, kernel_rows=kernels,
                     category_rows=tuple(replace(c, **named) for c in net))  # fmt: skip


def forward_ms(row: ProfileRow) -> float | None:
    """The forward's ms a profiled step: its share of the profiled step."""
    if row.forward_share is None or not row.profiled_step_ms:
        return None
    return row.forward_share * row.profiled_step_ms


def with_amdahl(rows: list[ProfileRow]) -> list[ProfileRow]:
    """Each compiled mode's forward speedup over off's (profiled), and the step speedup it
    predicts at off's forward share (`cost.compile.step_speedup`), to set beside the measured
    one: the share a speedup was measured against, never left out."""
    off = next((r for r in rows if r.mode == "off" and forward_ms(r)), None)
    if off is None:
        return rows
    out = []
    for r in rows:
        mine = forward_ms(r)
        if r.mode == "off" or not mine:
            out.append(r)
            continue
        gain = forward_ms(off) / mine
        out.append(replace(r, forward_speedup=gain,
                           amdahl_speedup=step_speedup(gain, off.forward_share)))  # fmt: skip
    return out


def side_categories(rows: list[JoinedRow], side: str, named_by: str) -> list[CategoryRow]:
    """A side's categories, each mode named as a change of `named_by` names it: its mode
    (before and after), or the knob and mode ("cpp-wrapper dynamic")."""
    found = [c for r in rows if r.side == side for c in r.category_rows]
    if named_by == AFTER:
        return found
    return [replace(c, mode=f"{named_by} {c.mode}") for c in found]


def paired(rows: list[JoinedRow], base: str, other: str) -> tuple[list[CategoryRow], list]:
    """The base side's categories of the modes the other side profiled, and the other's."""
    theirs = side_categories(rows, other, other)
    modes = {c.mode for c in theirs}
    return [c for c in side_categories(rows, base, other) if c.mode in modes], theirs


def words(row: JoinedRow, off: list[CategoryRow] | None) -> str:
    """What caps the mode, from its categories; a fall-back said first."""
    if not row.profiled_step_ms:
        return ""
    mine = list(row.category_rows)
    said = why_speedup(row.mode, row.speedup, row.speedup_low, row.speedup_high, mine, off)
    if row.fell_back:
        eager = sum(c.ms_per_step for c in mine if c.category in ("eager ops", "forward python"))
        said += (f" It fell back to eager past dynamo's recompile limit: {eager:.2f} ms a "
                 "step of eager ops and their Python.")  # fmt: skip
    return said


class ProfileKind(RunKind):
    """What profile brings to a measured run: members are (side, mode), rows `JoinedRow`s,
    written as `ProfileRow`s."""

    command, label, row_type = "profile", "mode", ProfileRow

    def __init__(self, spec: ProfileSpec, dtype: str):
        super().__init__(spec)
        self.dtype = dtype

    def lends(self, side: str) -> list[Member]:
        # eager off reads no knob: a knob side's speedup and words are over plain's off
        return [Member(PLAIN, "off")] if self.spec.tries and side != PLAIN else []

    def side_names(self) -> tuple[str, str]:
        return (PLAIN, "knob") if self.spec.tries else super().side_names()

    def derive(self, side, rows, windows, level, history) -> list[JoinedRow]:
        """The side's compile rows derived, each joined to its profile; amdahl and words
        against off's (a knob side's: plain's, lent)."""
        every = [joined(replace(r, side=side))
                 for r in derive(rows, self.spec.horizon, windows, level)]  # fmt: skip
        off = None
        if "off" in self.spec.modes:
            off = next((list(r.category_rows) for r in every if r.mode == "off"), [])
        own = self.spec.sides()[side].modes
        out = with_amdahl([r for r in every if r.mode in own])
        return [replace(r, words=words(r, off)) for r in out]

    def public(self, rows, sided: bool) -> list[dict]:
        return as_dicts([r.written() for r in rows])

    def changes(self, rows, windows, level) -> list:
        """Compile's changes of the rows' timings, then each pair's changes by category."""
        timed = [r.compiled_row for r in rows if r.compiled_row is not None]
        found = compile_changes(timed, windows, level, self.spec.pairs())
        for base, other in self.spec.pairs():
            found += category_changes(*paired(rows, base, other))
        return found

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype, rows)

    def why_lines(self, rows) -> list[str]:
        moved, calls = [], []
        for base, other in self.spec.pairs():
            mine, theirs = paired(rows, base, other)
            moved += moved_most(category_changes(mine, theirs))
            calls += calls_changed(mine, theirs)
        return [f"{r.side} {r.words}" for r in rows if r.words] + moved + calls

    def compare_report(self, run: MeasuredRun, rows, found, changed, head):
        """The change table of the timings and counts, then where the step moved."""
        timings, categories = by_category(changed)
        png, render = super().compare_report(run, rows, found, timings, head)

        def both() -> None:
            render()
            render_moved(stdout_console(), categories, self.side_names())

        return png, both

    def save_more(self, run: MeasuredRun, rows) -> None:
        categories = [c for r in rows for c in r.category_rows]
        kernels = [k for r in rows for k in r.kernel_rows]
        write_rows(run.path("-categories"), as_dicts(categories), columns(CategoryRow))
        write_rows(run.path("-kernels"), as_dicts(kernels), columns(KernelRow))

    def more_outputs(self, run: MeasuredRun) -> dict[str, str]:
        return {"categories": str(run.path("-categories")), "kernels": str(run.path("-kernels"))}

    def report(self, run: MeasuredRun, rows, found, changed, head):
        categories = [c for r in rows for c in r.category_rows]
        kernels = [k for r in rows for k in r.kernel_rows]
        png = draw_profile(rows, categories, kernels, run.where / "profile.png", head)
        render = partial(render_profile, stdout_console(), rows, categories, kernels, found,
                         head, top=self.spec.top)  # fmt: skip
        return png, render

    def export(self, rows, record):
        raise NotImplementedError("profile has no --export-json")


def heading(spec: ProfileSpec, dtype: str, rows: list[ProfileRow]) -> str:
    rounds_run = max((r.rounds or 0 for r in rows), default=0)
    what = "profiled decode step" + (f" of target {spec.target}" if spec.target else "")
    if spec.tries:
        what += f": knobs {', '.join(spec.tries)} against plain torch.compile"
    if spec.vs:
        what += f" (after) vs {spec.vs} (before)"
    return title(
        what,
        model=spec.model if not spec.target or spec.target in BUILTINS else None,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        steps=f"{spec.steps} x {counted(rounds_run, 'round')}, {counted(spec.passes, 'pair')} of "
        "passes profiled and not",
        backend=spec.backend,
    )


def run_profile(spec: ProfileSpec, status, *, json_mode: bool, check: bool) -> int:
    """Each mode in its fresh worker: profiled once, timed in rounds; the gates' exit code."""
    plan = round_plan(spec.rounds, spec.max_rounds, spec.rel_ci, spec.budget_s)
    dtype, sides = worker_specs(spec, "")
    kind = ProfileKind(spec, dtype)
    run = MeasuredRun(kind, status, check, plan, spec.compared)
    run.open(look_before_timing)
    planned = [Member(side, mode) for side, each in spec.sides().items() for mode in each.modes]

    def measure() -> None:
        profiled_sweep(spec, sides, plan, listener=run, on_status=status)

    return run.run(measure, planned, json_mode=json_mode, crowded=crowded_note)
