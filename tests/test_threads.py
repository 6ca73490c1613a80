"""`--threads` is honoured wherever something is timed, and `explain` runs in `--dtype`.

Each thread count is read back from the process that ran the step (`torch.get_num_threads()`
there), never from the option: a compile worker is asked for 1 and then 2 threads, so a worker
that ignored the option reports its host's default for both and cannot match both. The
in-process commands (capture, explain, the kernel bench) run with this process set to the other
count, and must leave it as they found it. The dtype an explained forward ran in is read off
dynamo's own graph (`graph_dtypes`: its placeholders' example values), not off the row's echo.
The spec of the toy target is this file itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app

runner = CliRunner()
SPEC = f"{__file__}:square_step"


class SquareStep:
    """One matmul in the factory's dtype; the inputs never change, so nothing recompiles."""

    def __init__(self, rows: int, device: str, dtype: str) -> None:
        self.weight = torch.eye(8, device=device, dtype=getattr(torch, dtype))  # (8, 8)
        self.rows = rows

    def forward(self, x):  # x (B, 8)
        return x @ self.weight  # (B, 8)

    def step_inputs(self, step: int):
        x = torch.ones(self.rows, 8, device=self.weight.device, dtype=self.weight.dtype)  # (B, 8)
        return (x,), {}


def square_step(*, rows: int, prompt_len: int, steps: int, device: str, dtype: str) -> SquareStep:
    return SquareStep(rows, device, dtype)


@pytest.fixture
def this_process_at():
    """Set this process's torch threads for a test; checks the command restored them."""
    before = torch.get_num_threads()

    def at(n: int) -> int:
        torch.set_num_threads(n)
        return n

    yield at
    torch.set_num_threads(before)


def other(n: int) -> int:
    return 2 if n == 1 else 1


def worker_threads(spec, asked: int) -> int:
    from nanobench.compile.bench import WORKER
    from nanobench.harness.workers.fresh import run_fresh

    row = run_fresh(WORKER, asdict(replace(spec, mode="off", threads=asked)), timeout=300)
    assert row["status"] == "ok", row
    return row["threads"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["target", "engine"])
def test_a_compile_worker_runs_with_the_threads_it_was_asked_for(kind):
    from engine.sources import materialize_preset
    from nanobench.compile.spec import WorkerSpec

    target = SPEC if kind == "target" else ""
    spec = WorkerSpec(
        model=str(materialize_preset("tiny")), steps=2, backend="eager", target=target
    )
    assert {n: worker_threads(spec, n) for n in (1, 2)} == {1: 1, 2: 2}


@pytest.mark.slow
@pytest.mark.parametrize("asked", [1, 2])
def test_capture_times_under_threads_and_its_rows_say_so(tmp_path, this_process_at, asked):
    parent = this_process_at(other(asked))
    result = runner.invoke(
        app,
        ["capture", "--run-lengths", "4", "--rows", "1", "--prompt-len", "4",
         "--rounds", "1", "--max-rounds", "1", "--budget-s", "1",
         "--capture-rows", "2", "--capture-tokens", "64", "--width-multiples", "32",
         "--threads", str(asked), "--json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    runs = [r for r in doc["rows"] if r["table"] == "run"]
    assert runs and [r["threads"] for r in runs] == [asked] * len(runs)
    assert doc["env"]["threads"] == asked
    assert torch.get_num_threads() == parent  # the command undid its setting


def explain_row(*args: str) -> dict:
    result = runner.invoke(app, ["explain", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    (row,) = json.loads(result.stdout)["rows"]
    return row


@pytest.mark.parametrize("asked", [1, 2])
def test_explain_runs_under_threads(this_process_at, asked):
    parent = this_process_at(other(asked))
    row = explain_row("--target", SPEC, "--threads", str(asked))
    assert row["threads"] == asked
    assert torch.get_num_threads() == parent


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_explain_traces_a_target_in_dtype(dtype):
    row = explain_row("--target", SPEC, "--dtype", dtype)
    # The weight and the input are both built in the dtype: nothing else can reach the graph.
    assert row["graph_dtypes"] == [dtype] and row["dtype"] == dtype
    assert explain_row("--target", SPEC)["graph_dtypes"] == ["float32"]  # auto on a CPU


@pytest.mark.slow
def test_explain_traces_the_engine_in_dtype():
    row = explain_row("--layers", "1", "--dtype", "bfloat16")
    # The weights are bf16; the RoPE tables are kept float32 in every dtype (Engine.build).
    assert "bfloat16" in row["graph_dtypes"] and row["dtype"] == "bfloat16"
    assert explain_row("--layers", "1")["graph_dtypes"] == ["float32"]


@pytest.mark.interpreter
@pytest.mark.parametrize("asked", [1, 2])
def test_the_kernel_bench_times_under_threads(this_process_at, asked):
    from nanobench.gpu.kernel_bench import bench_kernels
    from nanobench.harness.workers.rounds import RoundPlan

    parent = this_process_at(other(asked))
    seen = []

    def timer(fn):
        seen.append(torch.get_num_threads())  # what the timed call ran under
        return 1.0

    rows = bench_kernels(
        [(2, 40)], device="cpu", dtype=torch.float32, heads=4, kv_heads=2, head_dim=32,
        timer=timer, plan=RoundPlan(1, 1, 0.5, 60.0), threads=asked,
    )  # fmt: skip
    assert seen == [asked, asked]
    assert [r.threads for r in rows] == [asked, asked]
    assert torch.get_num_threads() == parent


def cores_allowed(pid: int) -> dict[int, str]:
    """Each thread of `pid` by its id: the cores it may run on, as /proc lists them."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as f:
            line = next(x for x in f if x.startswith("Cpus_allowed_list"))
        found[int(task)] = line.split()[1]
    return found


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and two cores: the OpenMP team and a pinned timing thread",
)
def test_a_later_off_worker_set_up_on_one_thread_times_on_its_threads_over_every_core():
    """A later `off` worker sets up on one thread (`session.set_up_threads`), then its windows
    run on the asked two: the OpenMP team it starts then must keep every core, not inherit the
    pinned timing thread's one (there, both threads shared a core: 164 ms steps, not 1.8)."""
    from engine.sources import materialize_preset
    from nanobench.compile.bench import WORKER
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.workers.fleet import live_window
    from nanobench.harness.workers.fresh import LiveWorker

    spec = WorkerSpec(model=str(materialize_preset("tiny")), steps=2, threads=2, process=2)
    worker = LiveWorker(WORKER, asdict(spec))
    try:
        worker.start(300)
        pin = max(os.sched_getaffinity(0))
        assert live_window(worker, "off", 300, 1, pin)(1).status == "ok"
        allowed = cores_allowed(worker.proc.pid)
        every = cores_allowed(os.getpid())[os.getpid()]
        assert allowed.pop(worker.proc.pid) == str(pin)  # the timing thread, pinned
        assert allowed and set(allowed.values()) == {every}, (every, allowed)
        final = worker.close(300)
        assert final["threads"] == 2, final
    finally:
        worker.kill()
