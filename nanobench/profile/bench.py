"""The profile's sweep: compile's, each mode's first worker profiling its steady step.

What it is: `ProfilePart` (a compiled mode as compile's `ModePart`, its worker the profile
session, `profile.session`, and its row carrying the profile its first worker's ready row
brought, `rows.ProfiledCompileRow`, to the listener with the row) and `profiled_sweep` (every
side's modes as parts of one fleet,
`harness.workers.fleet.sweep`: set up one by one, profiled at set-up, then timed without the
profiler in interleaved rounds).
What it is not: the worker, the attribution, the rows derived or the report.
Invariant: only a mode's first worker profiles (it sets up alone, so no profile shares the
cores with another set-up); the later workers only time windows; the profile travels on the
mode's row, from its first row to its closed one, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial

from nanobench.compile.bench import ModePart, comparisons, member_env
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers import fleet as fleets
from nanobench.harness.workers.fleet import Fleet, Listener
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import RoundPlan
from nanobench.profile.rows import ProfiledCompileRow, profile_of
from nanobench.profile.spec import ProfileJob, ProfileSpec

WORKER = "nanobench.profile.session"
# Inductor's kernels name themselves to the profiler (read by its config at import, in the worker)
PROFILE_ENV = {
    "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1",
    "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES": "1",
}


class ProfilePart(ModePart):
    """A compiled mode whose first worker profiles its steady step (`profile.session`)."""

    def __init__(self, member: Member, spec, env, on_status, job: ProfileJob):
        super().__init__(member, spec, {**env, **PROFILE_ENV}, on_status)
        self.job = job

    def payload(self, process: int) -> dict:
        worker = super().payload(process)
        return asdict(replace(self.job, worker=worker, passes=self.job.passes * (process == 1)))

    def first(self, ready: dict) -> ProfiledCompileRow:
        """Compile's first row, carrying the profile the ready row brought (None: none did)."""
        payload = ready.get("profile")
        row = super().first({k: v for k, v in ready.items() if k != "profile"})
        profile = None if payload is None else profile_of(payload, self.member.name)
        return ProfiledCompileRow.of(row, profile)

    def closed(self, row: ProfiledCompileRow, finals: list[dict], setup_s: float,
               later_s) -> ProfiledCompileRow:  # fmt: skip
        """Compile's closed row (the first final's, where every worker closed), still carrying
        the profile."""
        return ProfiledCompileRow.of(super().closed(row, finals, setup_s, later_s), row.profile)


def parts_of(fleet: Fleet, spec: ProfileSpec, sides: Sides, workers: dict[str, WorkerSpec],
             status: Callable[[str], None]) -> list[ProfilePart]:  # fmt: skip
    """Every side's own members (a --try knob side: its compiled modes) as a profiled part;
    each first worker writes its trace."""
    traces = out_dir(spec.out) / "profile-traces"
    parts = []
    for m in sides.planned():
        worker = workers[m.side]
        job = ProfileJob(passes=spec.passes, trace=str(traces / f"{m.label}.json"))
        parts.append(ProfilePart(m, worker, member_env(fleet, m, worker), status, job))
    return parts


def profiled_sweep(spec: ProfileSpec, sides: Sides, workers: dict[str, WorkerSpec],
                   plan: RoundPlan, *, listener: Listener,
                   on_status: Callable[[str], None]) -> None:  # fmt: skip
    """Every side's modes in one fleet: each profiled by its first worker (on its row to
    `listener`), then all timed without the profiler in interleaved rounds, as compile times
    them."""
    with Fleet(WORKER, spec.timeout, 1, on_status, sides.envs()) as fleet:
        parts = parts_of(fleet, spec, sides, workers, on_status)
        ratios = partial(comparisons, sides=sides)
        fleets.sweep(fleet, parts, plan, spec.processes, listener, ratios)
