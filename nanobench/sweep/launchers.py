"""Where a sweep's points run: this machine (`local`) or a Ray cluster (`ray`).

What it is: `run_point`, which runs one point as the command itself in a fresh process
(`python -m nanobench.cli <command> ... --json --out DIR`) and returns its `PointRun`, tagged
with the environment record of the machine that ran it; `launch_local` and `launch_ray`, which
run a list of `Task`s and hand each `PointRun` to the caller as it finishes.
What it is not: a scheduler. Locally, timed points run one at a time and arithmetic points at
most `jobs` at once; on Ray, Ray places the tasks (a timed one asks for a whole node).
Invariant: a point that crashes or passes its timeout is a `PointRun` with that status, never
an exception; on Ctrl-C every point still running is killed with everything it spawned, and a
point whose parent is gone ends itself (`lifeline.end_with_parent`, in its `run_command`).
Ray is an optional extra and is imported only by `launch_ray`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from importlib import metadata

from nanobench.harness.cli.lifeline import parent_env
from nanobench.harness.errors import BadInput

# Exit codes of a command (nanobench.harness.errors) as point statuses; anything else is a crash.
STATUS_BY_EXIT = {0: "ok", 1: "failed", 2: "bad-input"}


@dataclass(frozen=True)
class Task:
    key: str
    argv: tuple[str, ...]  # the command and its options, without --json and --out
    out_dir: str
    timeout_s: float
    timed: bool  # never shares a machine with another point


@dataclass(frozen=True)
class PointRun:
    status: str  # ok | failed | bad-input | crashed | timeout
    detail: str  # last stderr line when not ok
    wall_s: float
    doc: dict  # the command's JSON document; {} when it printed none
    env: dict  # the document's `env` when it has one, else `machine_env()` of this machine


def machine_env() -> dict:
    """A minimal environment record, read without importing torch (a fresh worker stays fast)."""
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "torch": _version("torch"),
        "cuda_device": cuda_device(),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cuda_device() -> str:
    """The first GPU's name as nvidia-smi reports it, or "none"."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "none"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "none"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def run_point(task: Task, started: Callable[[subprocess.Popen], None] | None = None) -> PointRun:
    """Run one point in a fresh process; its session is killed whole on timeout or interrupt."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanobench.cli", *task.argv, "--json", "--out", task.out_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **parent_env()},
        start_new_session=True,
    )
    if started is not None:
        started(proc)
    try:
        stdout, stderr = proc.communicate(timeout=task.timeout_s)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        detail = f"killed after {task.timeout_s:g} s"
        return PointRun("timeout", detail, _since(began), {}, machine_env())
    except BaseException:
        kill_session(proc)
        raise
    doc = _document(stdout)
    status = STATUS_BY_EXIT.get(proc.returncode, "crashed")
    if status != "bad-input" and not doc:
        status = "crashed"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    detail = "" if status == "ok" else (lines[-1] if lines else f"exit {proc.returncode}")
    if proc.returncode < 0:
        detail = f"killed by {signal.Signals(-proc.returncode).name}"
    env = doc.get("env") if isinstance(doc.get("env"), dict) else machine_env()
    return PointRun(status, detail[:300], _since(began), doc, env)


def _document(stdout: str) -> dict:
    try:
        doc = json.loads(stdout)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _since(began: float) -> float:
    return round(time.perf_counter() - began, 3)


def kill_session(proc: subprocess.Popen) -> None:
    """The point's command and whatever it spawned (compile workers) go together."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def launch_local(tasks: list[Task], done: Callable[[Task, PointRun], None], jobs: int) -> None:
    """Timed tasks one after another; arithmetic ones `jobs` at a time; `done` on this thread."""
    live: set[subprocess.Popen] = set()
    width = 1 if any(t.timed for t in tasks) else jobs
    pool = ThreadPoolExecutor(max_workers=width)
    try:
        running = {}
        queue = list(tasks)
        while queue or running:
            while queue and len(running) < width:
                task = queue.pop(0)
                running[pool.submit(run_point, task, live.add)] = task
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done(running.pop(future), future.result())
    except BaseException:
        for proc in list(live):
            kill_session(proc)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def parse_resources(text: str) -> dict:
    """--resources as Ray's task options: {"GPU": 1, "accelerator_type:H100": 0.01}."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value.values()
    ):
        raise BadInput(f'--resources {text!r}: expected a JSON object such as {{"GPU": 1}}')
    options: dict = {}
    if "GPU" in value:
        options["num_gpus"] = value.pop("GPU")
    if "CPU" in value:
        options["num_cpus"] = value.pop("CPU")
    if value:
        options["resources"] = value
    return options


def whole_node(nodes: list[dict]) -> dict:
    """Ray task options that take a whole node: its `nanobench_node` slot, or all its CPUs."""
    alive = [n["Resources"] for n in nodes if n.get("Alive")]
    if alive and all(r.get("nanobench_node", 0) >= 1 for r in alive):
        return {"resources": {"nanobench_node": 1}}
    cpus = sorted({r.get("CPU", 0) for r in alive})
    if len(cpus) != 1 or cpus[0] < 1:
        raise BadInput(
            f"--launcher ray: the nodes have {cpus} CPUs, so no one CPU count takes a whole "
            "node; start each node with --resources '{\"nanobench_node\": 1}'"
        )
    return {"num_cpus": cpus[0]}


def _ray_result(ray, ref) -> PointRun:
    # A worker that died (its node lost, out of memory) is a crashed point, not a lost sweep.
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as e:
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return PointRun("crashed", line[:300], 0.0, {}, {})


def launch_ray(
    tasks: list[Task],
    done: Callable[[Task, PointRun], None],
    *,
    address: str | None,
    num_cpus: int,
    resources: dict,
) -> None:
    """Each task a Ray task in a fresh worker (max_calls=1); `done` as each one returns."""
    try:
        import ray
    except ImportError:
        raise BadInput(
            "--launcher ray: Ray is not installed; pip install 'nanobench[ray]'"
        ) from None
    owned = not ray.is_initialized()
    if owned:
        # Workers inherit this environment, so they import this very nanobench.
        ray.init(
            address=address,
            num_cpus=None if address else num_cpus,
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        remote = ray.remote(max_calls=1)(run_point)
        base = whole_node(ray.nodes()) if any(t.timed for t in tasks) else {"num_cpus": 1}
        merged = {**base, **{k: v for k, v in resources.items() if k != "resources"}}
        extra = {**base.get("resources", {}), **resources.get("resources", {})}
        if extra:
            merged["resources"] = extra
        pending = {remote.options(**merged).remote(task): task for task in tasks}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    done(pending.pop(ref), _ray_result(ray, ref))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if owned:
            ray.shutdown()
