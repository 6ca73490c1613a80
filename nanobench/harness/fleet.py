"""One fleet of live workers: what `compile`'s sweep and `decode`'s share, written once.

What it is: `Fleet`, the workers of one run by member (a mode, a system, the roofline probe),
each member's in process order. Its steps: `first` (a member's first worker, set up alone: its
ready row is the member's set-up facts, compile seconds, first pass), `later` (every member's
workers 2..N, set up side by side as the cores allow, `fresh.start_side_by_side`), `rounds`
(each member's rounds dealt over its workers, `rounds.spread_over`, the members taking turns,
`rounds.run_rounds`), `close` (every worker asked for its final row at once, then each row
gathered) and, whatever ends the run (an interrupt too), every worker's process group killed
and every directory handed to `clean` removed. `later_status` and `first_failure` word a later
worker's failure the one way both commands report it.
What it is not: a command's rows (each command rebuilds the payloads into its own row type),
its environment (each says which cache a worker reads) or the statistics.
Invariant: a worker is registered before anyone waits for it, so an interrupt during its
set-up kills it too; no two members' first workers set up at once (compile seconds are timed
alone), and one window at a time, never two (`run_rounds`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from functools import partial

from nanobench.harness.fresh import LiveWorker, start_side_by_side
from nanobench.harness.rounds import (
    Comparison,
    RoundPlan,
    Window,
    live_window,
    run_rounds,
    spread_over,
)


def tag(name: str, process: int) -> str:
    """'dynamic', or 'dynamic (process 2)' for a later worker."""
    return name if process == 1 else f"{name} (process {process})"


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
        self, module: str, timeout: float, threads: int, on_status: Callable[[str], None]
    ) -> None:
        self.module, self.timeout, self.threads = module, timeout, threads
        self.on_status = on_status
        self.workers: dict[str, list[LiveWorker]] = {}
        self.dirs: list[str] = []

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
        name: str,
        process: int,
        payload: dict,
        env: dict[str, str],
        on_progress: Callable[[dict], None] | None = None,
        doing: str = "starting a fresh process",
    ) -> LiveWorker:
        """Worker `process` of `name`, registered before it is waited for."""
        self.on_status(f"{tag(name, process)}: {doing}")
        worker = LiveWorker(self.module, payload, env=env, on_progress=on_progress)
        self.workers.setdefault(name, []).append(worker)
        return worker

    def first(self, name: str, payload: dict, env: dict[str, str], **spawn_args) -> dict:
        """A member's first worker, set up alone: its ready row."""
        return self.spawn(name, 1, payload, env, **spawn_args).start(self.timeout)

    def later(
        self, members: dict[str, tuple[Callable[[int], dict], dict[str, str]]], processes: int
    ) -> Iterator[tuple[str, int, dict]]:
        """(member, process, ready row) for workers 2..processes of every member, set up side
        by side; `members[name]` is (the payload of process p, the environment)."""
        spawns = [
            ((name, p), partial(self.spawn, name, p, payload(p), env))
            for name, (payload, env) in members.items()
            for p in range(2, processes + 1)
        ]
        for (name, process), ready in start_side_by_side(spawns, self.timeout, self.threads):
            yield name, process, ready

    def rounds(
        self,
        names: list[str],
        plan: RoundPlan,
        comparisons: list[Comparison],
        *,
        slices: int = 1,
        decided: Callable[[list[Window], float], bool] = lambda w, c: False,
        on_window: Callable[[Window], None] = lambda w: None,
        on_round: Callable[[int, dict], None] = lambda r, i: None,
    ) -> list[Window]:
        """The members' rounds, each member's dealt over its workers in turn."""
        live = {
            name: spread_over(
                [live_window(w, name, self.timeout, slices) for w in self.workers[name]]
            )
            for name in names
        }
        return run_rounds(
            live, plan, comparisons, decided=decided, on_window=on_window, on_round=on_round
        )

    def close(self, names: list[str]) -> dict[str, list[dict]]:
        """Every worker of `names` asked for its final row at once (they finish side by side),
        then the rows gathered, each member's in process order."""
        for worker in (w for name in names for w in self.workers[name]):
            worker.stop()
        return {name: [w.close(self.timeout) for w in self.workers[name]] for name in names}


def later_status(status: str, process: int, later: str) -> str:
    """A member's status once its worker `process` set up: the first failure is kept."""
    if status == "ok" and later != "ok":
        return f"process {process}: {later}"
    return status
