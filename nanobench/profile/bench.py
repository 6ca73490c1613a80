"""The profile's sweep: compile's, each mode's first worker profiling its steady step.

What it is: `ProfilePart` (a compiled mode as compile's `ModePart`, its worker the profile
session, `profile.session`, and its first worker's ready row carrying the profile, kept by
member in `found`) and `profiled_sweep` (every side's modes as parts of one fleet,
`harness.workers.fleet.sweep`: set up one by one, profiled at set-up, then timed without the
profiler in interleaved rounds).
What it is not: the worker, the attribution, the rows derived or the report.
Invariant: only a mode's first worker profiles (it sets up alone, so no profile shares the
cores with another set-up); the later workers only time windows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial

from nanobench.compile.bench import ModePart, comparisons, member_env
from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.workers import fleet as fleets
from nanobench.harness.workers.fleet import Fleet, Listener
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import RoundPlan
from nanobench.profile.spec import ProfileJob, ProfileSpec

WORKER = "nanobench.profile.session"
# Inductor's kernels name themselves to the profiler (read by its config at import, in the worker)
PROFILE_ENV = {
    "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1",
    "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES": "1",
}


class ProfilePart(ModePart):
    """A compiled mode whose first worker profiles its steady step (`profile.session`)."""

    def __init__(self, member: Member, spec, env, on_status, job: ProfileJob, found: dict):
        super().__init__(member, spec, {**env, **PROFILE_ENV}, on_status)
        self.job, self.found = job, found

    def payload(self, process: int) -> dict:
        worker = super().payload(process)
        return asdict(replace(self.job, worker=worker, passes=self.job.passes * (process == 1)))

    def first(self, ready: dict) -> CompileRow:
        profile = ready.pop("profile", None)
        if profile is not None:
            self.found[self.member] = profile
        return super().first(ready)


def parts_of(fleet: Fleet, spec: ProfileSpec, sides: dict[str, WorkerSpec], found: dict,
             status: Callable[[str], None]) -> list[ProfilePart]:  # fmt: skip
    """Every (side, mode) as a profiled part; each first worker writes its trace."""
    traces = out_dir(spec.out) / "profile-traces"
    parts = []
    for side, worker in sides.items():
        for mode in spec.sides()[side].modes:  # a --try knob side: its compiled modes
            m = Member(side, mode)
            job = ProfileJob(passes=spec.passes, trace=str(traces / f"{m.label}.json"))
            parts.append(ProfilePart(m, worker, member_env(fleet, m, worker), status, job,
                                     found))  # fmt: skip
    return parts


def profiled_sweep(spec: ProfileSpec, sides: dict[str, WorkerSpec], plan: RoundPlan, *,
                   listener: Listener, found: dict, on_status: Callable[[str], None]) -> None:  # fmt: skip
    """Every side's modes in one fleet: each profiled by its first worker (kept in `found` by
    member), then all timed without the profiler in interleaved rounds, as compile times them."""
    with Fleet(WORKER, spec.timeout, 1, on_status) as fleet:
        parts = parts_of(fleet, spec, sides, found, on_status)
        ratios = partial(comparisons, pairs=spec.pairs())
        fleets.sweep(fleet, parts, plan, spec.processes, listener, ratios)
