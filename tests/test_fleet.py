"""The one fleet compile and decode run through: its workers set up, dealt rounds, closed,
and killed with their directories removed however the run ends (real processes, no torch)."""

from __future__ import annotations

import os
import tempfile

import pytest

from nanobench.harness.workers.fleet import Fleet, first_failure, later_status
from nanobench.harness.workers.rounds import Comparison, RoundPlan

MODULE = "tests.fleet_worker"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def start(fleet: Fleet, members: dict[str, dict], processes: int) -> dict[str, list[int]]:
    pids = {name: [fleet.first(name, spec, {})["pid"]] for name, spec in members.items()}
    later = {name: (lambda p, s=spec: s, {}) for name, spec in members.items()}
    for name, process, ready in fleet.later(later, processes):
        assert process >= 2
        pids[name].append(ready["pid"])
    return pids


def test_the_fleet_deals_each_members_rounds_over_its_processes_and_closes_them_all():
    statuses: list[str] = []
    plan = RoundPlan(6, 6, 1e-9, 1e9)
    with Fleet(MODULE, 60, 1, statuses.append) as fleet:
        pids = start(fleet, {"a": {"ms": 2.0}, "b": {"ms": 4.0}}, 3)
        windows = fleet.rounds(["a", "b"], plan, [Comparison("a/b", "a", "b")])
        finals = fleet.close(["a", "b"])
    assert [len(p) for p in pids.values()] == [3, 3] and len({*pids["a"], *pids["b"]}) == 6
    # round r in process (r - 1) mod 3 + 1, for both members alike
    assert [(w.round, w.process) for w in windows if w.system == "a"] == [
        (r, (r - 1) % 3 + 1) for r in range(1, 7)
    ]
    assert [f["served"] for f in finals["a"]] == [2, 2, 2]
    # every window of every member timed on the one core, the last this process may use
    last = sorted(os.sched_getaffinity(0))[-1]
    assert {tuple(f["cores"]) for fs in finals.values() for f in fs} == {(last,)}
    assert len(fleet.setup_s["a"]) == 3 and fleet.later_setup_s("a") > 0
    assert "a (process 2): ready in" in " ".join(statuses)
    assert not any(alive(p) for ps in pids.values() for p in ps)


def test_a_worker_has_its_own_process_group_in_the_fleets_session():
    """Its group is what an interrupt kills; its session is this one, so that Linux's autogroup
    schedules workers setting up side by side as one group (a session each ran their OpenMP
    steps about 3 times slower)."""
    with Fleet(MODULE, 60, 1, lambda s: None) as fleet:
        pid = fleet.first("a", {}, {})["pid"]
        assert os.getpgid(pid) == pid and os.getpgid(pid) != os.getpgid(0)
        assert os.getsid(pid) == os.getsid(0)


def test_a_closed_worker_runs_its_atexit_handlers_and_exits_0(tmp_path):
    """A worker skips the interpreter's teardown once its final row is out, not what exit runs."""
    marker = tmp_path / "atexit"
    with Fleet(MODULE, 60, 1, lambda s: None) as fleet:
        fleet.first("a", {"at_exit": str(marker)}, {})
        final = fleet.close(["a"])["a"][0]
        code = fleet.workers["a"][0].proc.returncode
    assert final["status"] == "ok" and code == 0
    assert marker.read_text() == "ran"


def test_an_interrupt_kills_every_worker_and_removes_every_directory():
    directory = tempfile.mkdtemp(prefix="nanobench-fleet-test-")
    with pytest.raises(KeyboardInterrupt):
        with Fleet(MODULE, 60, 1, lambda s: None) as fleet:
            fleet.clean(directory)
            pids = start(fleet, {"a": {"ms": 1.0}}, 2)
            raise KeyboardInterrupt
    assert not os.path.exists(directory)
    assert not any(alive(p) for p in pids["a"])


def test_a_worker_that_dies_in_a_round_ends_its_member_and_names_its_process():
    plan = RoundPlan(4, 4, 1e-9, 1e9)
    with Fleet(MODULE, 60, 1, lambda s: None) as fleet:
        start(fleet, {"a": {"ms": 1.0}, "b": {"ms": 1.0, "fail_at": 2}}, 2)
        windows = fleet.rounds(["a", "b"], plan, [])
        finals = fleet.close(["a", "b"])
    failed = [w for w in windows if w.system == "b" and w.status != "ok"]
    assert [w.round for w in failed] == [2] and failed[0].status.startswith("error")
    assert max(w.round for w in windows if w.system == "b") == 2  # no window after it
    assert first_failure([f["status"] for f in finals["b"]]).startswith("process 2: ")
    assert first_failure([f["status"] for f in finals["a"]]) is None


def test_a_later_failure_is_named_by_its_process_and_the_first_failure_is_kept():
    assert later_status("ok", 3, "timeout") == "process 3: timeout"
    assert later_status("process 2: timeout", 3, "crashed: SIGKILL") == "process 2: timeout"
    assert later_status("ok", 2, "ok") == "ok"
    assert first_failure(["timeout", "ok"]) == "timeout"
