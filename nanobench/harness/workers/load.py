"""How busy the machine is around a timed run: load average and other processes' CPU share.

What it is: `LoadSample` (frozen: 1-minute load average, the cores that processes other than
this run kept busy over a short window, and this run's own), `sample_load(window_s, run_pids)`
(reads /proc/stat's per-CPU counters for the CPUs this process may run on, and /proc/<pid>/stat
for this process and the run's own workers, twice, `window_s` apart), `threads_that_fit` (the
torch threads a run can use without waiting on a descheduled thread) and `crowded_note` (the
one line a command prints before timing and puts on every row timed under that condition).
What it is not: a scheduler or a gate. Nothing here refuses to run; a busy machine is said,
never hidden, and a machine without /proc reads as unknown (None), never as idle.
Invariant: "other processes" is every busy jiffy on this process's CPUs less this process's
and the listed workers' own, so the run never counts itself as load; shares are in cores.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

# Half a core of slack: a neighbour's short bursts do not make a run oversubscribed.
SLACK_CORES = 0.5


@dataclass(frozen=True)
class LoadSample:
    """One look at the machine: None where this platform cannot say."""

    load_avg_1m: float | None
    others_cores: float | None  # cores other processes kept busy, of this process's CPUs
    own_cores: float | None  # cores this process and the listed workers used meanwhile
    cores: int
    window_s: float


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _busy_jiffies(cpus: list[int]) -> int | None:
    """Busy jiffies (user, nice, system, irq, softirq, steal) summed over `cpus`."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    total = 0
    for line in lines:
        name, *fields = line.split()
        if name in wanted:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
            total += user + nice + system + irq + softirq + steal
    return total


def _process_jiffies(pid: int) -> int:
    """utime + stime of one process; 0 once it is gone (it used nothing more)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5), from after ")"


def sample_load(window_s: float = 0.5, run_pids: tuple[int, ...] = ()) -> LoadSample:
    """Two readings `window_s` apart: who kept this process's CPUs busy in between."""
    cpus = _cpus()
    own = (os.getpid(), *run_pids)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    busy0, t0 = _busy_jiffies(cpus), time.monotonic()
    own0 = sum(_process_jiffies(p) for p in own)
    time.sleep(window_s)
    busy1, t1 = _busy_jiffies(cpus), time.monotonic()
    own1 = sum(_process_jiffies(p) for p in own)
    if busy0 is None or busy1 is None or not cpus:
        return LoadSample(load, None, None, len(cpus) or 1, window_s)
    tick = os.sysconf("SC_CLK_TCK") * (t1 - t0)
    own_cores = (own1 - own0) / tick
    others = max(0.0, (busy1 - busy0) / tick - own_cores)
    return LoadSample(load, round(others, 3), round(own_cores, 3), len(cpus), window_s)


def threads_that_fit(cores: int, others_cores: float) -> int:
    """The threads a run can keep on CPU while others hold `others_cores`: at least 1."""
    return max(1, math.floor(cores - others_cores + SLACK_CORES))


def crowded_note(threads: int, sample: LoadSample) -> str | None:
    """One line when `threads` torch threads exceed what the machine has free, else None.

    OpenMP's workers wait at every parallel region for the slowest thread; a descheduled one
    turns a 2-thread step into a step that waits on a neighbour (a 4x slower `decode` was
    measured so), so the row is a different benchmark and says so.
    """
    if sample.others_cores is None:
        return None
    fit = threads_that_fit(sample.cores, sample.others_cores)
    if threads <= fit:
        return None
    return (
        f"the machine was busy: other processes kept {sample.others_cores:.1f} of "
        f"{sample.cores} cores busy (load average {sample.load_avg_1m or 0:.1f}), so "
        f"{threads} threads oversubscribe it; --threads {fit} would fit"
    )


def look_before_timing(threads: int, say=None) -> tuple[LoadSample, str | None]:
    """A sample before any worker starts, and its note, said at once (stderr) when crowded."""
    from nanobench.harness.cli.console import say_warning

    sample = sample_load()
    note = crowded_note(threads, sample)
    if note:
        (say or say_warning)(f"{note}: timings taken now measure the neighbours too")
    return sample, note
