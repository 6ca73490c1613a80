"""Where a side's workers run: the interpreter that starts them and the variables set for them.

What it is: `WorkerEnv` (frozen: an interpreter's path, "" this one, and the user's variables,
each a `(KEY, VALUE)` pair), what it starts a worker with (`executable`, `over`), how it is said
(`str`); `PROTOCOL`, the version of what a coordinator and its workers say to each other (JSON
lines, `harness.workers.fresh`): an interpreter whose nanobench speaks another is refused before
any worker; `OWNED`, the variables nanobench sets for its workers itself, each with why, and
`owned_by(names, threads)` the ones a command's run sets.
What it is not: asking an interpreter what it runs (`harness.runs.environments`), the options
(`harness.cli.options`) or a command's own variables (its bench's env).
Invariant: a user's variable never silently overrides one nanobench sets, nor the reverse: a
spec refuses an owned one before any worker (`run_spec.MeasuredSpec.comparison_checked`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

PROTOCOL = 1  # bump when the spec, request or row lines a worker reads or writes change

# Every variable a command's workers are given by nanobench, with why the user cannot set it
# for one side: the command's own env functions (`compile.bench.cache_env`, `decode.bench.
# worker_env`, `startup.caches.start_env`, `profile.bench.PROFILE_ENV`) set these.
CACHES = "nanobench gives each worker its own Inductor cache (--cache, startup's --cache-dir)"
OWNED = {
    "TORCHINDUCTOR_CACHE_DIR": CACHES,
    "TRITON_CACHE_DIR": CACHES,
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "startup turns Inductor's caches on to time warm and hot starts",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "startup turns Inductor's caches on to time warm and hot starts",
    "TORCHINDUCTOR_COMPILE_THREADS": "nanobench builds on one core a worker, so later workers "
    "set up side by side",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "nanobench pins PGO off (startup's --pgo), so a "
    "later worker compiles the graph its first did",
    "TORCH_TRACE": "--trace sets each worker's trace directory",
    "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "profile names Inductor's kernels to the profiler",
    "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES": "profile names Inductor's kernels to the profiler",
    "HF_HUB_OFFLINE": "nanobench never reaches the network",
    "TRANSFORMERS_OFFLINE": "nanobench never reaches the network",
    "HF_HUB_DISABLE_PROGRESS_BARS": "decode keeps transformers' bars out of its workers' output",
    "TRANSFORMERS_VERBOSITY": "decode keeps transformers' bars out of its workers' output",
    "NANOBENCH_PARENT_PID": "a worker ends with the nanobench that started it",
    "OMP_NUM_THREADS": "--threads sets each worker's threads; leave --threads at 0 to set it here",
}
SHARED = ("TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS", "NANOBENCH_PARENT_PID")


def owned_by(names: tuple[str, ...], threads: int) -> dict[str, str]:
    """The variables a run's workers are given by nanobench, with why: every command's
    (`SHARED`), the command's own `names`, and the thread count where --threads sets it."""
    keys = [*SHARED, *names] + (["OMP_NUM_THREADS"] if threads else [])
    return {k: OWNED[k] for k in keys}


@dataclass(frozen=True)
class WorkerEnv:
    """A side's workers: the interpreter that runs them and the variables they are given."""

    python: str = ""  # "" this interpreter (sys.executable)
    variables: tuple[tuple[str, str], ...] = ()  # (KEY, VALUE), as the user gave them

    @property
    def default(self) -> bool:
        """This interpreter, nothing set: what a run without --python or --vs-env is."""
        return not self.python and not self.variables

    def executable(self) -> str:
        return self.python or sys.executable

    def over(self, env: dict[str, str]) -> dict[str, str]:
        """A worker's variables: the command's, then the user's (never one of the same name)."""
        return {**env, **dict(self.variables)}

    def __str__(self) -> str:
        said = [f"python {self.python}"] if self.python else []
        said += [f"{k}={v}" for k, v in self.variables]
        return ", ".join(said) or "this environment"
