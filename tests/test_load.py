"""The machine's load, measured and said: a busy child process, the advice, the note on rows.

The advice is arithmetic on a sample (cores, other processes' busy cores); the sampler is
driven by a real busy child process; the command's warning and row notes by a sample fixed
in the test (the shared machine's own load is whatever it is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.workers.load import LoadSample, crowded_note, threads_that_fit

runner = CliRunner()
SPIN = [sys.executable, "-c", "while True: pass"]


def test_threads_that_fit_leave_the_neighbours_cores_with_half_a_core_of_slack():
    # 2 cores, neighbours hold 1.2: 2 - 1.2 + 0.5 = 1.3, so 1 thread fits
    assert threads_that_fit(2, 1.2) == 1
    # 16 cores, neighbours 0.3: 16.2, so 16 fit; all cores busy still leaves 1
    assert threads_that_fit(16, 0.3) == 16 and threads_that_fit(2, 5.0) == 1
    busy = LoadSample(load_avg_1m=3.1, others_cores=1.2, own_cores=0.0, cores=2, window_s=0.5)
    note = crowded_note(2, busy)
    assert note and "1.2 of 2 cores" in note and "--threads 1 would fit" in note
    assert crowded_note(1, busy) is None
    quiet = LoadSample(load_avg_1m=0.2, others_cores=0.3, own_cores=0.0, cores=2, window_s=0.5)
    assert crowded_note(2, quiet) is None
    unknown = LoadSample(load_avg_1m=None, others_cores=None, own_cores=None, cores=2, window_s=0)
    assert crowded_note(8, unknown) is None


@pytest.fixture
def busy_child():
    child = subprocess.Popen(SPIN)
    time.sleep(0.2)  # past the interpreter's start-up
    yield child
    child.kill()
    child.wait()


def jiffies(pid: int) -> int:
    """utime + stime of `pid`, read here rather than by the sampler under test."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def sample_watching(monkeypatch, child: int, **kw) -> tuple[LoadSample, float]:
    """A sample, and the cores `child` is known to have used inside its window.

    The share is the child's jiffies read just inside the sampler's sleep (its own readings
    bracket that sleep, so it saw at least as many) over a wall time at least the sampler's.
    A loaded box gives a spinning child any share, so the bounds below follow from this one
    rather than from a fixed fraction of a core."""
    import nanobench.harness.workers.load as load

    inside: list[int] = []

    def sleep(s: float) -> None:
        inside.append(jiffies(child))
        time.sleep(s)
        inside.append(jiffies(child))

    # The sampler's module only: xdist's own threads keep the real time.sleep.
    monkeypatch.setattr(load, "time", SimpleNamespace(sleep=sleep, monotonic=time.monotonic))
    started = time.monotonic()
    sample = load.sample_load(1.0, **kw)
    wall_s = time.monotonic() - started
    return sample, (inside[1] - inside[0]) / (os.sysconf("SC_CLK_TCK") * wall_s)


def starved(share: float, tick_s: float) -> None:
    # Below a few ticks a second the bounds say nothing; a spinner's fair share falls so low
    # only beside some 30 runnable processes per core.
    if share < 3 * tick_s:
        pytest.skip(f"the machine is too busy: a spinning child got {share:.3f} cores in 1 s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_busy_child_is_other_processes_load_unless_it_is_the_runs_own(busy_child, monkeypatch):
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    # Told it is a worker, the sampler books the child as the run's own: all that the child
    # used inside the window (0.0005: own_cores is rounded to 3 places) ...
    own, share = sample_watching(monkeypatch, busy_child.pid, run_pids=(busy_child.pid,))
    starved(share, tick_s)
    assert own.own_cores is not None and own.own_cores >= share - 0.0005, (own, share)
    # ... and as a neighbour when it is not. /proc/stat counts whole ticks per CPU while a
    # process's times are its exact run time: up to a tick per CPU apart at each end.
    other, share = sample_watching(monkeypatch, busy_child.pid)
    starved(share, tick_s)
    ends = 2 * other.cores * tick_s / other.window_s
    assert other.others_cores is not None and other.others_cores >= share - ends, (other, share)
    assert other.own_cores is not None and other.own_cores < share / 2, "the child is not own"
    assert other.load_avg_1m is not None and other.cores >= 1


def test_decode_warns_before_timing_and_every_row_and_the_env_carry_the_load(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench
    import nanobench.harness.cli.console as console
    import nanobench.harness.workers.load as load
    from tests.test_decode_cmd import fake_sweep

    crowded = LoadSample(load_avg_1m=4.0, others_cores=1.5, own_cores=0.0, cores=2, window_s=0.5)
    monkeypatch.setattr(load, "sample_load", lambda *a, **k: crowded)
    said: list[str] = []
    warn = console.say_warning
    monkeypatch.setattr(console, "say_warning", lambda m: (said.append("warning"), warn(m)))
    clear = {"engine-eager": [8.0] * 5, "hf-eager": [10.0] * 5}

    def sweep(*args, **kw):
        said.append("timing")
        return fake_sweep(clear, [[1, 2], [3, 4]])(*args, **kw)

    monkeypatch.setattr(bench, "sweep_sides", sweep)
    args = ["decode", "--systems", "engine-eager,hf-eager", "--json", "--out", str(tmp_path)]
    result = runner.invoke(app, [*args, "--threads", "2"])
    assert result.exit_code == 0, result.output
    # said once, before timing began
    assert said == ["warning", "timing"]
    warning = [ln for ln in result.stderr.splitlines() if ln.startswith("nanobench: warning:")]
    assert len(warning) == 1 and "--threads 1 would fit" in warning[0]
    doc = json.loads(result.stdout)
    assert all("--threads 1 would fit" in r["load_note"] for r in doc["rows"])
    assert doc["env"]["others_cores_before"] == 1.5 == doc["env"]["others_cores_after"]
    assert doc["env"]["load_avg_1m_before"] == 4.0
    # one thread fits beside the neighbours: no warning, no note
    fine = runner.invoke(app, [*args, "--threads", "1"])
    assert "warning" not in fine.stderr
    assert all(r["load_note"] is None for r in json.loads(fine.stdout)["rows"])
