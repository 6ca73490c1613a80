"""A remedy tried on the user's own step before it is printed: dynamo alone, in a fresh process.

What it is: `DryRunJob` (the target, its protocol's arguments, how many steps, and whether
`dynamic=True`), `DryRun` (what dynamo did: frames built over the steps and at each, whether and
at which step it fell back past its recompile limit, its recompile reasons whole and the step
each came at; `DryRun.seen()` the same as a `rebuilt.StepRun`, for its words),
`dry_steps(target, ...)` (the steps
through dynamo in this process: what a compile worker predicts its fall-back by),
`dry_run(job)` (the job in a fresh worker: `python -m nanobench.harness.runs.dry_run`) and
`DrySession`, that worker's session.
What it is not: a timing (the eager backend: tracing and guards only, no Inductor, seconds) or
the remedy's words (`remedies.quote_dynamic_row`).
Invariant: the run is the user's own steps 0..steps-1 through `inputs_at`, in a process that
has compiled nothing before; builds, fall-back and reasons are dynamo's own counts, and the step
of each is the call its compilation metrics record arrived in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from nanobench.harness.errors import MeasurementFailed
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.step.rebuilt import StepRun, step_run
from nanobench.harness.workers.fresh import run_fresh, serve_main

WORKER = "nanobench.harness.runs.dry_run"
TIMEOUT_S = 300.0  # a tiny step's dry run takes seconds; a large model's load, more


@dataclass(frozen=True)
class DryRunJob:
    """The user's step and the remedy to try on it: `dynamic` is torch.compile's argument."""

    target: str
    rows: int
    prompt_len: int
    steps: int
    device: str = "cpu"
    dtype: str = "float32"
    model: str = ""  # a built-in target's checkpoint directory; "" for the user's own
    dynamic: bool = True


@dataclass(frozen=True)
class DryRun:
    """What dynamo did over the job's steps."""

    builds: int  # frames dynamo built (counters["frames"]["ok"]): 1 when nothing recompiled
    steps: int
    fell_back: bool  # past the recompile limit, the frame ran eager
    reasons: list[str]  # dynamo's recompile reasons, whole, in order
    raised_at: int | None = None  # under a fail-fast stance: the step (from 1) that raised
    built_at: list[int] = field(default_factory=list)  # frames built at each step run
    reason_steps: list[int] = field(default_factory=list)  # the step (from 0) of each reason
    fell_back_at: int | None = None  # the step (from 0) a frame went past the recompile limit

    def seen(self) -> StepRun:
        """The run step by step: which steps rebuilt, the guard that failed at each."""
        return step_run(len(self.built_at), self.built_at, self.reasons, self.reason_steps,
                        self.fell_back, self.fell_back_at)  # fmt: skip


def dry_steps(target, steps: int, dynamic: bool | None, options: dict | None = None,
              marks: tuple = (), fail_after: int = 0, progress=lambda e: None) -> DryRun:  # fmt: skip
    """The target's steps 0..steps-1 through `torch.compile(backend="eager")` in this process,
    dynamo reset before and after: what it built and whether it fell back. `options` are a
    --try side's (`knobs.compile_options`); the side's config is the process's already.
    `marks` ((path, dim), ...): each step's input tensor at that path (`targets.tensors_at`)
    is `torch._dynamo.mark_dynamic` at that dim before the call, as the remedy says to.
    `fail_after` N > 0: from step N+1 on, `set_stance("fail_on_recompile")`, as the fail-fast
    remedy says to after warm-up; the first step that raises ends the run (`raised_at`)."""
    import torch
    from torch._dynamo.utils import clear_compilation_metrics, counters
    from torch._dynamo.utils import get_compilation_metrics as metrics

    from nanobench.harness.step.dynamo_call import fell_back_in, recompile_reasons_in
    from nanobench.harness.step.signatures import tensors_at
    from nanobench.harness.step.target_bench import call_step
    from nanobench.harness.step.targets import TargetError, inputs_at

    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    forward = torch.compile(target.forward, dynamic=dynamic, backend="eager", **(options or {}))
    raised_at, built_at, at = None, [], []  # at: the step of each compilation metrics record
    with torch.no_grad():
        for i in range(steps):
            args, kwargs = inputs_at(target, i)
            for path, t in tensors_at(args, kwargs) if marks else ():
                for dim in (d for p, d in marks if p == path):
                    torch._dynamo.mark_dynamic(t, dim)
            failing = 0 < fail_after <= i
            before = counters["frames"]["ok"]
            try:
                with torch.compiler.set_stance("fail_on_recompile" if failing else "default"):
                    call_step(target, i, forward, args, kwargs)
            except TargetError:
                if not failing:
                    raise
                raised_at = i + 1
                break
            finally:
                at += [i] * (len(metrics()) - len(at))
            built_at.append(int(counters["frames"]["ok"] - before))
            progress({"step": i + 1, "steps": steps})
    found = metrics()
    run = DryRun(builds=int(counters["frames"]["ok"]), steps=steps,
                 fell_back=fell_back_in(found), reasons=recompile_reasons_in(found),
                 raised_at=raised_at, built_at=built_at,
                 reason_steps=[s for s, m in zip(at, found) if m.recompile_reason],
                 fell_back_at=next((s for s, m in zip(at, found)
                                    if fell_back_in([m])), None))  # fmt: skip
    torch._dynamo.reset()
    return run


class DrySession:
    """The worker's session: the job's steps through `torch.compile(backend="eager")`."""

    def __init__(self, payload: dict, progress=lambda e: None):
        from nanobench.harness.step.targets import make_target

        job = rebuild(DryRunJob, payload)
        target = make_target(job.target, model=job.model, rows=job.rows,
                             prompt_len=job.prompt_len, steps=job.steps, device=job.device,
                             dtype=job.dtype)  # fmt: skip
        self.ready = asdict(dry_steps(target, job.steps, job.dynamic, progress=progress))

    def serve(self, request: dict) -> dict:
        return {}

    def finish(self) -> dict:
        return dict(self.ready)


def dry_run(job: DryRunJob, timeout: float = TIMEOUT_S) -> DryRun:
    """The job in a fresh process; MeasurementFailed naming the worker's own line if it failed."""
    row = run_fresh(WORKER, asdict(job), timeout=timeout)
    if row.get("status", "ok") != "ok":
        raise MeasurementFailed(f"the dry run of dynamic={job.dynamic}: {row['status']}")
    return rebuild(DryRun, {f.name: row[f.name] for f in fields(DryRun)})


if __name__ == "__main__":
    serve_main(DrySession)
