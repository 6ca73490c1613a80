"""One `nanobench profile` run: compile's sweep, each mode's first worker profiling its step.

What it is: `ProfilePart` (a compiled mode as compile's `ModePart`, its worker the profile
session, its first worker's ready row carrying the profile), `ProfileKind` (what profile brings
to a measured run, `harness.runs.measured_run`: compile's rows derived from the same rounds,
then each mode's profile joined to its timing as a `ProfileRow`, with its categories, kernels
and words; the category CSVs; the changes by category in a `--vs` run) and `run_profile`.
What it is not: the worker (`profile.session`), the attribution, the gates or the report.
Invariant: the unprofiled step is timed in the fleet's interleaved rounds, the profile in the
same worker; a category moved is read from both sides' profiled rows, never inferred.
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
from nanobench.harness.runs.rows import as_dicts, columns, rebuild
from nanobench.harness.step.knobs import PLAIN
from nanobench.harness.step.targets import BUILTINS
from nanobench.harness.workers.load import crowded_note, look_before_timing
from nanobench.harness.workers.member import AFTER, Member
from nanobench.harness.workers.rounds import round_plan
from nanobench.profile.bench import profiled_sweep
from nanobench.profile.gates import gates
from nanobench.profile.overhead import net_of_profiler
from nanobench.profile.rows import CategoryRow, KernelRow, ProfileRow
from nanobench.profile.spec import ProfileSpec
from nanobench.profile.vs import calls_changed, category_changes, moved_most
from nanobench.profile.words import why_speedup
from reports.csvio import write_rows
from reports.profile import draw_profile, render_moved, render_profile
from reports.style import counted, title


def joined(row: CompileRow, profile: dict | None) -> ProfileRow:
    """A mode's timing (compile's derived row) and its profile's facts, as one row."""
    base = dict(mode=row.mode, side=row.side, status=row.status, step_ms=row.step_ms,
                step_ms_q1=row.step_ms_q1, step_ms_q3=row.step_ms_q3, speedup=row.speedup,
                speedup_low=row.speedup_low, speedup_high=row.speedup_high, builds=row.builds,
                breaks_per_call=row.breaks_per_call, fell_back=row.fell_back,
                compile_s=row.compile_s, rounds=row.rounds, load_note=row.load_note)  # fmt: skip
    if profile is None or row.status != "ok":
        return ProfileRow(**base)
    return rebuild(ProfileRow, {**base, **profile["facts"]})


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


class ProfileKind(RunKind):
    """What profile brings to a measured run: members are (side, mode), rows `ProfileRow`s."""

    command, label, row_type = "profile", "mode", ProfileRow

    def __init__(self, spec: ProfileSpec, dtype: str):
        super().__init__(spec)
        self.dtype, self.found, self.timed, self.changed, self.calls = dtype, {}, {}, [], []
        self.net: dict[Member, list[CategoryRow]] = {}

    def categories(self, member: Member) -> list[CategoryRow]:
        """The member's categories: net of the profiler's cost once derived."""
        if member in self.net:
            return [replace(c, mode=member.name, side=member.side) for c in self.net[member]]
        profile = self.found.get(member) or {"categories": []}
        return [replace(rebuild(CategoryRow, c), mode=member.name, side=member.side)
                for c in profile["categories"]]  # fmt: skip

    def kernels(self, member: Member) -> list[KernelRow]:
        profile = self.found.get(member) or {"kernels": []}
        return [replace(rebuild(KernelRow, k), mode=member.name, side=member.side)
                for k in profile["kernels"]]  # fmt: skip

    def lends(self, side: str) -> list[Member]:
        # eager off reads no knob: a knob side's speedup and words are over plain's off
        return [Member(PLAIN, "off")] if self.spec.tries and side != PLAIN else []

    def side_names(self) -> tuple[str, str]:
        return (PLAIN, "knob") if self.spec.tries else super().side_names()

    def derive(self, side, rows, windows, level, history) -> list[ProfileRow]:
        own = self.spec.sides()[side].modes
        timed = [r for r in derive(rows, self.spec.horizon, windows, level) if r.mode in own]
        self.timed.update({Member(side, r.mode): replace(r, side=side) for r in timed})
        out = with_amdahl([self.joined(Member(side, r.mode), replace(r, side=side)) for r in timed])
        off_at = next(iter(self.lends(side)), Member(side, "off"))
        off = self.categories(off_at) if "off" in self.spec.modes else None
        return [replace(r, words=self.words(r, off)) for r in out]

    def joined(self, member: Member, row: CompileRow) -> ProfileRow:
        """A mode's timing and its profile, its categories net of the profiler's cost."""
        profile = self.found.get(member)
        if profile is None or row.status != "ok":
            return joined(row, None)
        raw = [rebuild(CategoryRow, c) for c in profile["categories"]]
        net, facts = net_of_profiler(raw, profile["facts"]["plain_step_ms"])
        self.net[member] = net
        return replace(joined(row, profile), **facts)

    def words(self, row: ProfileRow, off: list[CategoryRow] | None) -> str:
        """What caps the mode, from its categories; a fall-back said first."""
        if not row.profiled_step_ms:
            return ""
        mine = self.categories(Member(row.side, row.mode))
        said = why_speedup(row.mode, row.speedup, row.speedup_low, row.speedup_high, mine, off)
        if row.fell_back:
            eager = sum(
                c.ms_per_step for c in mine if c.category in ("eager ops", "forward python")
            )
            said += (f" It fell back to eager past dynamo's recompile limit: {eager:.2f} ms a "
                     "step of eager ops and their Python.")  # fmt: skip
        return said

    def changes(self, rows, windows, level) -> list:
        found = compile_changes(list(self.timed.values()), windows, level, self.spec.pairs())
        self.changed, self.calls = [], []
        for base, other in self.spec.pairs():
            theirs = self.side_categories(other, other)
            modes = {c.mode for c in theirs}
            mine = [c for c in self.side_categories(base, other) if c.mode in modes]
            self.changed += category_changes(mine, theirs)
            self.calls += calls_changed(mine, theirs)
        return found + self.changed

    def side_categories(self, side: str, named_by: str) -> list[CategoryRow]:
        """A side's categories, each mode named as a change of `named_by` names it: its mode
        (before and after), or the knob and mode ("cpp-wrapper dynamic")."""
        found = [c for m in self.found if m.side == side for c in self.categories(m)]
        if named_by == AFTER:
            return found
        return [replace(c, mode=f"{named_by} {c.mode}") for c in found]

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def heading(self, rows) -> str:
        return heading(self.spec, self.dtype, rows)

    def why_lines(self, rows) -> list[str]:
        moved = moved_most(self.changed) + self.calls
        return [f"{r.side} {r.words}" for r in rows if r.words] + moved

    def compare_report(self, run: MeasuredRun, rows, found, changed, head):
        """The change table of the timings and counts, then where the step moved."""
        timings = [c for c in changed if c not in self.changed]
        png, render = super().compare_report(run, rows, found, timings, head)

        def both() -> None:
            render()
            render_moved(stdout_console(), self.changed, self.side_names())

        return png, both

    def save_more(self, run: MeasuredRun, rows) -> None:
        members = [Member(r.side, r.mode) for r in rows]
        write_rows(run.path("-categories"), as_dicts([c for m in members for c in self.categories(m)]),
                   columns(CategoryRow))  # fmt: skip
        write_rows(run.path("-kernels"), as_dicts([k for m in members for k in self.kernels(m)]),
                   columns(KernelRow))  # fmt: skip

    def more_outputs(self, run: MeasuredRun) -> dict[str, str]:
        return {"categories": str(run.path("-categories")), "kernels": str(run.path("-kernels"))}

    def report(self, run: MeasuredRun, rows, found, changed, head):
        members = [Member(r.side, r.mode) for r in rows]
        categories = [c for m in members for c in self.categories(m)]
        kernels = [k for m in members for k in self.kernels(m)]
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
        profiled_sweep(spec, sides, plan, listener=run, found=kind.found, on_status=status)

    return run.run(measure, planned, json_mode=json_mode, crowded=crowded_note)
