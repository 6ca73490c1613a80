"""One fleet of live workers: what `compile`'s sweep and `decode`'s share, written once.

What it is: `Fleet`, the workers of one run by member (a mode, a system, the roofline probe),
each member's in process order, each started in its side's environment (`WorkerEnv`), with each worker's set-up seconds (`setup_s`). Its steps: `first` (a member's first worker, set up alone: its
ready row is the member's set-up facts, compile seconds, first pass), `later` (every member's
workers 2..N, set up side by side as the cores allow, `fresh.start_side_by_side`), `rounds`
(each member's rounds dealt over its workers, `rounds.spread_over`, the members taking turns,
`rounds.run_rounds`), `close` (every worker asked for its final row at once, then each row
gathered) and, whatever ends the run (an interrupt too), every worker's process group killed
and every directory handed to `clean` removed. Every member's windows are timed on one core
(`timing_core`), so a round's pair sees the same core. `later_status` and `first_failure` word a
later worker's failure the one way both commands report it. `sweep(fleet, parts, ...)` is the
whole of it for any set of members: each a `Part` (a member kind: a compiled mode, a decode
system, the roofline probe) saying what its workers are handed and how their answers become
its row, reported to a `Listener` (`runs.measured_run.MeasuredRun`) as they come;
`live_window` (a live worker as a system of the rounds) and `first_pass_window` (a first pass
as round 0).
What it is not: a command's rows (each command rebuilds the payloads into its own row type),
its environment (each says which cache a worker reads) or the statistics.
Invariant: a worker is registered before anyone waits for it, so an interrupt during its
set-up kills it too; no two members' first workers set up at once (compile seconds are timed
alone), and one window at a time, never two (`run_rounds`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Protocol

from nanobench.harness.workers.environment import WorkerEnv
from nanobench.harness.workers.fresh import LiveWorker, start_side_by_side
from nanobench.harness.workers.member import Member, as_member
from nanobench.harness.workers.rounds import (
    Comparison,
    RoundPlan,
    Window,
    run_rounds,
    spread_over,
)


def timing_core() -> int | None:
    """The core every member's windows are timed on: the last this process may use.

    A worker that wakes for its window lands on whichever core the scheduler picks, and on a
    shared 2-core box the two ran the same step at 2.8 and 4.5 ms, so an unpinned window's
    median said which core it got: the log of a round's off / dynamic ratio had a standard
    deviation of 0.07 to 0.34 (median 0.24) over five `compile` runs, pinned 0.07 to 0.20
    (median 0.10) over five. The
    last core: Linux sends interrupts to core 0 by default. Set-up is not pinned, so later
    workers still set up side by side.
    """
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cores[-1] if cores else None


def tag(member: Member, process: int) -> str:
    """'dynamic', or 'after dynamic (process 2)' for a later worker."""
    return str(member) if process == 1 else f"{member} (process {process})"


def first_failure(statuses: list[str]) -> str | None:
    """The first worker's failed status as it is, a later one's as 'process p: status'; None
    when every worker's status is ok."""
    for process, status in enumerate(statuses, 1):
        if status != "ok":
            return status if process == 1 else f"process {process}: {status}"
    return None


class Fleet:
    """The live workers of one run, by member; a context manager that kills and cleans up."""

    def __init__(
        self, module: str, timeout: float, threads: int, on_status: Callable[[str], None],
        envs: dict[str, WorkerEnv] | None = None,
    ) -> None:  # fmt: skip
        # `threads`: the cores one worker's set-up occupies, so later ones set up side by side;
        # `envs`: each side's interpreter and variables, by its name (none: this one's, as is)
        self.module, self.timeout, self.threads = module, timeout, threads
        self.envs = envs or {}
        self.on_status = on_status
        self.workers: dict[Member, list[LiveWorker]] = {}
        self.dirs: list[str] = []
        # Seconds from spawn to ready on the parent's clock, by member and process: a later
        # worker's set-up against the first's is what --processes costs.
        self.setup_s: dict[Member, dict[int, float]] = {}
        self._spawned: dict[tuple[Member, int], float] = {}

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc) -> None:
        for worker in (w for ws in self.workers.values() for w in ws):
            worker.kill()
        for directory in self.dirs:
            shutil.rmtree(directory, ignore_errors=True)

    def clean(self, directory: str | None) -> None:
        """Remove `directory` (a cold cache) when the run ends, however it ends."""
        if directory:
            self.dirs.append(directory)

    def spawn(
        self,
        name: Member,
        process: int,
        payload: dict,
        env: dict[str, str],
        on_progress: Callable[[dict], None] | None = None,
        doing: str = "starting a fresh process",
    ) -> LiveWorker:
        """Worker `process` of `name`, registered before it is waited for."""
        self.on_status(f"{tag(name, process)}: {doing}")
        self._spawned[(name, process)] = time.monotonic()
        where = self.envs.get(as_member(name).side, WorkerEnv())
        worker = LiveWorker(self.module, payload, env=where.over(env), on_progress=on_progress,
                            python=where.python)  # fmt: skip
        self.workers.setdefault(name, []).append(worker)
        return worker

    def first(self, name: Member, payload: dict, env: dict[str, str], timeout: float | None = None,
              **spawn_args) -> dict:  # fmt: skip
        """A member's first worker, set up alone: its ready row (`{"status": "timeout"}` past
        `timeout`, the fleet's own by default)."""
        ready = self.spawn(name, 1, payload, env, **spawn_args).start(
            self.timeout if timeout is None else timeout
        )
        self.ready(name, 1)
        return ready

    def ready(self, name: Member, process: int) -> float:
        """Record (and return) worker `process` of `name`'s set-up seconds, once it is ready."""
        seconds = round(time.monotonic() - self._spawned[(name, process)], 3)
        self.setup_s.setdefault(name, {})[process] = seconds
        return seconds

    def later_setup_s(self, name: Member) -> float | None:
        """The median set-up seconds of a member's later workers; None without any."""
        later = [s for p, s in self.setup_s.get(name, {}).items() if p > 1]
        return round(statistics.median(later), 3) if later else None

    def later(
        self, members: dict[Member, tuple[Callable[[int], dict], dict[str, str]]], processes: int
    ) -> Iterator[tuple[Member, int, dict]]:
        """(member, process, ready row) for workers 2..processes of every member, set up side
        by side, each as it is ready; `members[name]` is (the payload of process p, the
        environment)."""
        spawns = [
            ((name, p), partial(self.spawn, name, p, payload(p), env))
            for name, (payload, env) in members.items()
            for p in range(2, processes + 1)
        ]
        for (name, process), ready in start_side_by_side(spawns, self.timeout, self.threads):
            # Seen within a poll of being ready (`fresh.first_answered`), in the order they are.
            seconds = self.ready(name, process)
            self.on_status(f"{tag(name, process)}: ready in {seconds:.1f} s")
            yield name, process, ready

    def rounds(
        self,
        names: list[Member],
        plan: RoundPlan,
        comparisons: list[Comparison],
        *,
        slices: int = 1,
        decided: Callable[[list[Window], float], bool] = lambda w, c: False,
        on_window: Callable[[Window], None] = lambda w: None,
        on_round: Callable[[int, dict], None] = lambda r, i: None,
        history: dict | None = None,
        on_stop: Callable[[str, int], None] = lambda why, r: None,
    ) -> list[Window]:
        """The members' rounds, each member's dealt over its workers in turn; `history` by
        comparison name, what the stop rule lends each (`rounds.intervals`)."""
        core = timing_core()
        live = {
            name: spread_over(
                [live_window(w, name, self.timeout, slices, core) for w in self.workers[name]]
            )
            for name in names
        }
        return run_rounds(
            live, plan, comparisons, decided=decided, on_window=on_window, on_round=on_round,
            history=history, on_stop=on_stop,
        )  # fmt: skip

    def close(self, names: list[Member]) -> dict[Member, list[dict]]:
        """Every worker of `names` asked for its final row at once (they finish side by side),
        then the rows gathered, each member's in process order."""
        for worker in (w for name in names for w in self.workers[name]):
            worker.stop()
        return {name: [w.close(self.timeout) for w in self.workers[name]] for name in names}


class Part(Protocol):
    """One member's workers in a sweep: what they are handed and how their answers become the
    member's row (a compiled mode, a decode system, the roofline probe: a member kind)."""

    member: Member
    env: dict[str, str]

    def payload(self, process: int) -> dict: ...

    def start(self, fleet: Fleet) -> dict:
        """The first worker, set up alone: its ready row."""

    def first(self, ready: dict):
        """The member's row from its first worker's ready row."""

    def first_window(self, row) -> Window | None:
        """The first pass as a window (round 0), where the member has one."""

    def later(self, row, ready: dict, process: int):
        """The row once worker `process` set up."""

    def closed(self, row, finals: list[dict], setup_s: float, later_setup_s: float | None):
        """The row once every worker gave its final answer."""


class Listener(Protocol):
    """Who keeps a sweep's rows and windows as they come (`measured_run.MeasuredRun`)."""

    def on_row(self, row) -> None: ...

    def on_window(self, window: Window) -> None: ...

    def on_round(self, r: int, found: dict) -> None: ...

    def decided(self, timed: list[Window], level: float) -> bool: ...

    def on_stop(self, why: str, r: int) -> None:
        """Why the rounds stopped after round r (`rounds.DECIDED`, `BY_BUDGET`, ...)."""


def sweep(fleet: Fleet, parts: list[Part], plan: RoundPlan, processes: int, listener: Listener,
          comparisons: Callable[[list[Member]], list[Comparison]], **rounds_args) -> dict:  # fmt: skip
    """Every member's first worker set up alone, in order; the later ones side by side; then
    the rounds of the live members (in `order`, a sort key, when given) until the stop rule
    says stop; then every worker's final answer. Each row goes to the listener as it comes,
    and again closed. `rounds_args`: `slices` (from the rows set up: a callable), `order`,
    `history`. Returns the rows by member."""
    processes = min(processes, plan.max_rounds)  # a worker past the last round times nothing
    by = {p.member: p for p in parts}
    rows: dict[Member, object] = {}

    def keep(window: Window) -> None:
        if window.status != "ok" and window.member in rows:
            rows[window.member] = replace(rows[window.member], status=window.status)
        listener.on_window(window)

    for p in parts:
        rows[p.member] = p.first(p.start(fleet))
        first = p.first_window(rows[p.member]) if rows[p.member].status == "ok" else None
        if first is not None:
            keep(first)
        listener.on_row(rows[p.member])
    later = {m: (by[m].payload, by[m].env) for m in by if rows[m].status == "ok"}
    for m, process, ready in fleet.later(later, processes):
        rows[m] = by[m].later(rows[m], ready, process)
    order = rounds_args.get("order") or (lambda m: 0)  # a stable sort: the parts' order
    live = sorted((m for m in by if rows[m].status == "ok"), key=order)
    slices = rounds_args["slices"](rows) if "slices" in rounds_args else 1
    fleet.rounds(live, plan, comparisons(live), slices=slices, decided=listener.decided,
                 on_window=keep, on_round=listener.on_round, history=rounds_args.get("history"),
                 on_stop=listener.on_stop)  # fmt: skip
    for m, finals in fleet.close(live).items():
        setup = fleet.setup_s[m][1], fleet.later_setup_s(m)
        rows[m] = by[m].closed(rows[m], finals, *setup)
        listener.on_row(rows[m])
    return rows


def later_status(status: str, process: int, later: str) -> str:
    """A member's status once its worker `process` set up: the first failure is kept."""
    if status == "ok" and later != "ok":
        return f"process {process}: {later}"
    return status


def live_window(
    worker, member: Member | str, timeout: float, slices: int = 1, pin: int | None = None
) -> Callable[[int], Window]:
    """A live worker (`nanobench.harness.workers.fresh.LiveWorker`) as a system: each round one request; with
    `slices` n, this worker's k-th request asks for slice (k - 1) mod n + 1 of its generation
    (`nanobench.harness.workers.slices`), whichever rounds the worker is dealt; with `pin`, the worker
    times it on that core (`fresh.pin_this_thread`)."""
    served = [0]
    member = as_member(member)

    def window(round_index: int) -> Window:
        request = {"op": "window", "round": round_index}
        if pin is not None:
            request["pin"] = pin
        if slices > 1:
            request.update(slice=served[0] % slices + 1, slices=slices)
        served[0] += 1
        row = worker.request(request, timeout)
        if row.get("status") != "ok":
            return Window(member.name, round_index, str(row.get("status")), side=member.side)
        return Window(**{**row, "system": member.name, "side": member.side})

    return window


def first_pass_window(member: Member | str, row: dict) -> Window:
    """A worker's untimed-by-rounds first pass (round 0): its builds are in `built`."""
    member = as_member(member)
    built = tuple(row.get("builds_per_step") or ())
    ms = tuple(row.get("step_ms_all") or ())
    steady = tuple(b == 0 for b in built)
    return Window(member.name, 0, "ok", ms, built, steady, side=member.side)
