"""Interleaved rounds and the live worker protocol, with fake systems and a tiny fake worker.

The fake worker is a real process (a session of a few lines written to tmp_path), so the
protocol, crashes, timeouts and errors are the real ones; it loads no model and runs in well
under a second.
"""

from __future__ import annotations

import os
import signal
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from nanobench.harness.runs.samples import SAMPLE_COLUMNS, sample_rows
from nanobench.harness.workers.fleet import live_window
from nanobench.harness.workers.fresh import LiveWorker, run_fresh, start_side_by_side
from nanobench.harness.workers.rounds import (
    Comparison,
    RoundPlan,
    Window,
    rotation,
    run_rounds,
    spread_over,
)
from reports.csvio import write_rows

REPO = Path(__file__).resolve().parent.parent

FAKE_WORKER = """
import os, signal, time
from nanobench.harness.workers.fresh import serve_main


class Session:
    def __init__(self, spec, progress):
        self.spec, self.served = spec, 0
        began = time.time()
        time.sleep(spec.get("setup_s", 0))
        progress({"phase": "built"})
        self.ready = {"status": "ok", "name": spec["name"]}
        if "setup_s" in spec:
            self.ready.update(began=began, ready=time.time())

    def serve(self, request):
        self.served += 1
        if self.served == self.spec.get("die_at"):
            os.kill(os.getpid(), signal.SIGKILL)
        if self.served == self.spec.get("raise_at"):
            raise ValueError("window broke")
        if self.served == self.spec.get("hang_at"):
            time.sleep(60)
        r = request["round"]
        return {"system": "x", "round": r, "status": "ok", "ms": [float(r), 2.0 * r],
                "built": [0, 0], "steady": [True, True]}

    def finish(self):
        return {"name": self.spec["name"], "served": self.served}


serve_main(Session)
"""


def worker(tmp_path: Path, **spec) -> LiveWorker:
    (tmp_path / "fake_worker.py").write_text(FAKE_WORKER)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    return LiveWorker("fake_worker", {"name": "w", **spec}, env=env)


def test_rotation_starts_each_round_one_system_later():
    assert [rotation(list("ABC"), r) for r in range(4)] == [
        list("ABC"),
        list("BCA"),
        list("CAB"),
        list("ABC"),
    ]


def test_windows_run_one_at_a_time_in_rotating_order_and_a_failed_system_drops_out():
    calls: list[tuple[str, int]] = []

    def system(name: str, fail_at: int | None = None):
        def window(r: int) -> Window:
            calls.append((name, r))
            if r == fail_at:
                return Window(name, r, "crashed: SIGKILL")
            return Window(name, r, "ok", (1.0,), (0,), (True,))

        return window

    systems = {"A": system("A"), "B": system("B", fail_at=2), "C": system("C")}
    got = run_rounds(systems, RoundPlan(4, 4, 0.5, 1e9), [Comparison("A/C", "A", "C")])
    assert calls == [
        ("A", 1), ("B", 1), ("C", 1),
        ("B", 2), ("C", 2), ("A", 2),
        ("A", 3), ("C", 3),  # B failed in round 2 and runs no more; A, C rotate
        ("C", 4), ("A", 4),
    ]  # fmt: skip
    assert [w.status for w in got if w.system == "B"] == ["ok", "crashed: SIGKILL"]
    assert len(got) == len(calls), "every window returned is kept, the failed one too"


def test_a_live_worker_answers_each_request_and_its_final_row(tmp_path):
    w = worker(tmp_path)
    assert w.start(timeout=60) == {"status": "ok", "name": "w"}
    window = live_window(w, "engine-eager", timeout=60)
    got = [window(r) for r in (1, 2)]
    assert got[1] == Window("engine-eager", 2, "ok", (2.0, 4.0), (0, 0), (True, True))
    assert w.close(timeout=60)["served"] == 2
    # the samples CSV reads back with the dtypes it was written with
    path = write_rows(tmp_path / "s.csv", sample_rows(got, "system"), ["system", *SAMPLE_COLUMNS])
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["system", "process", "round", "step", "ms", "built", "steady"]
    types = pd.api.types
    assert types.is_string_dtype(frame["system"]) and types.is_bool_dtype(frame["steady"])
    assert all(types.is_integer_dtype(frame[c]) for c in ("process", "round", "step", "built"))
    assert types.is_float_dtype(frame["ms"])
    assert list(frame["ms"]) == [1.0, 2.0, 2.0, 4.0]
    assert Window(**asdict(got[0])) == got[0]


def test_a_worker_killed_mid_run_keeps_its_earlier_windows_and_says_how_it_died(tmp_path):
    w = worker(tmp_path, die_at=2)
    w.start(timeout=60)
    window = live_window(w, "a", timeout=60)
    first, second = window(1), window(2)
    assert first.status == "ok" and second.status == "crashed: SIGKILL"
    assert window(3).status == "crashed: SIGKILL"
    assert w.close(timeout=5) == {"status": "crashed: SIGKILL"}


def test_an_error_and_a_hang_inside_a_window_become_statuses(tmp_path):
    w = worker(tmp_path, raise_at=1)
    w.start(timeout=60)
    assert w.request({"op": "window", "round": 1}, 60)["status"] == (
        "error: ValueError: window broke"
    )
    hung = worker(tmp_path, hang_at=1)
    hung.start(timeout=60)
    assert hung.request({"op": "window", "round": 1}, 1.0) == {"status": "timeout"}
    assert hung.proc.poll() == -signal.SIGKILL


@pytest.mark.parametrize("threads,together", [(1, 2), (2, 1), (0, 1)])
def test_later_workers_are_set_up_as_many_at_once_as_their_threads_leave_cores(
    tmp_path, monkeypatch, threads, together
):
    """Each fake worker sleeps 1.5 s in its set-up and says when (its own clock): on 2 cores
    one-thread workers overlap two at a time (never 3), two-thread (or torch's default) ones
    not at all; each row comes back with its key, and after `stop` on every worker each
    `close` still returns its final row."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    started: list[LiveWorker] = []

    def spawn(name):
        started.append(worker(tmp_path, name=name, setup_s=1.5))
        return started[-1]

    names = ["a", "b", "c"]
    spawns = [(n, lambda n=n: spawn(n)) for n in names]
    got = list(start_side_by_side(spawns, timeout=60, threads=threads))
    assert sorted(key for key, _ in got) == names and all(k == r["name"] for k, r in got)
    spans = [(row["began"], row["ready"]) for _, row in got]

    def overlapping(t: float) -> int:
        return sum(began <= t < ready for began, ready in spans)

    assert max(overlapping(began) for began, _ in spans) == together, spans
    for w in started:
        w.stop()
    assert [w.close(timeout=60)["served"] for w in started] == [0, 0, 0]


def test_a_worker_ready_early_frees_its_core_for_the_next_at_once(tmp_path, monkeypatch):
    """Two at a time: `a` sets up for 4 s, `b` and `c` for 0.5 s each. `c` takes the core `b`
    frees, long before `a` is ready, and each row comes back as it is ready: b, c, a."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    setup_s = {"a": 4.0, "b": 0.5, "c": 0.5}
    spawns = [(n, lambda n=n: worker(tmp_path, name=n, setup_s=setup_s[n])) for n in setup_s]
    got = dict(start_side_by_side(spawns, timeout=60, threads=1))
    assert list(got) == ["b", "c", "a"], got
    assert got["c"]["began"] < got["a"]["ready"], got


def test_run_fresh_is_a_live_worker_without_requests(tmp_path):
    (tmp_path / "fake_worker.py").write_text(FAKE_WORKER)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    row = run_fresh("fake_worker", {"name": "once"}, timeout=60, env=env)
    assert row["name"] == "once" and row["served"] == 0 and row["status"] == "ok"
    assert row["worker_s"] >= 0


def test_spread_over_deals_round_r_to_worker_r_minus_1_mod_n_and_stamps_it():
    asked: list[tuple[int, int]] = []

    def worker(slot: int):
        def window(r: int) -> Window:
            asked.append((slot, r))
            return Window("a", r, "ok", (float(slot),), (0,), (True,))

        return window

    system = spread_over([worker(0), worker(1), worker(2)])
    got = [system(r) for r in range(1, 8)]
    # rounds 1..7 over three workers: 0, 1, 2, 0, 1, 2, 0 (by hand)
    assert asked == [(0, 1), (1, 2), (2, 3), (0, 4), (1, 5), (2, 6), (0, 7)]
    assert [w.process for w in got] == [1, 2, 3, 1, 2, 3, 1]
    assert [s.process for s in got[4].samples()] == [2]


def test_sliced_rounds_keep_each_generation_in_its_worker_slice_after_slice():
    class Recorder:
        def __init__(self) -> None:
            self.asked: list[dict] = []

        def request(self, payload: dict, timeout: float) -> dict:
            self.asked.append(payload)
            return asdict(Window("a", payload["round"], "ok", (1.0,), (0,), (True,)))

    one, two = Recorder(), Recorder()
    system = spread_over([live_window(one, "a", 5, slices=2), live_window(two, "a", 5, slices=2)])
    got = [system(r) for r in range(1, 7)]
    # rounds 1..6 dealt 1, 2, 1, 2, 1, 2; each worker's requests are its own slices 1, 2, 1
    assert [(p["round"], p["slice"]) for p in one.asked] == [(1, 1), (3, 2), (5, 1)]
    assert [(p["round"], p["slice"]) for p in two.asked] == [(2, 1), (4, 2), (6, 1)]
    assert {p["slices"] for p in one.asked + two.asked} == {2}
    assert [w.process for w in got] == [1, 2, 1, 2, 1, 2]
    # whole windows ask for no slice
    whole = Recorder()
    live_window(whole, "a", 5)(1)
    assert whole.asked == [{"op": "window", "round": 1}]
