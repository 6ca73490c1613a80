"""`nanobench decode`'s spec: every option's default and the rules across options.

What it is: `DecodeSpec` (frozen, a `harness.runs.run_spec.MeasuredSpec`: `checked()` checks
what no option checks alone; what its sides are made of; `plan` for its estimate) and its round
plan. What it is not: the command (`command.py`) or the run (`run.py`).
Invariant: a spec that validated runs without another check; a bad one is `BadInput`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.decode.roofline import PROBE
from nanobench.harness.cli.choices import DEFAULT_SYSTEMS, VLLM_SYSTEMS
from nanobench.harness.cli.options import Names
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.run_spec import MeasuredSpec
from nanobench.harness.step.self_compiled import vllm_reachable

# The systems torch.compile builds: the ones a --try knob acts on.
COMPILED_SYSTEMS = ("engine-compiled", "hf-static-compiled")
EAGER_SYSTEMS = ("engine-eager", "hf-eager", "vllm-eager")


@dataclass(frozen=True)
class DecodeSpec(MeasuredSpec):
    """`nanobench decode`'s options: the one place their defaults live."""

    model: str = "tiny"
    systems: Names = Names(DEFAULT_SYSTEMS)
    rows: int = 4
    prompt_len: int = 16
    steps: int = 128  # greedy tokens per row: the prefill's first, then decode steps
    rounds: int = 3
    max_rounds: int = 30
    rel_ci: float = 0.03
    budget_s: float = 120.0
    max_model_len: int = 0  # 0: prompt_len + steps
    width_multiple: int = 128  # engine-captured's width buckets
    device: str = "cpu"
    dtype: str = "auto"
    hf_attn: str = "sdpa"
    timeout: int = 900
    processes: int = 3  # fresh workers per system: docs/measuring.md#what-a-process-costs
    history: bool = True  # earlier runs' spread on this machine (harness.statistics.history)
    vs_model: str = ""  # the before side's model (the after side: --model)
    vs_dtype: str | None = None  # the before side's dtype (the after side: --dtype)

    COUNTS = ("builds",)
    TIMINGS = ("step_ms",)
    COMPARED_BY = "--vs-model, --vs-dtype or --try"
    BEFORE_BY = "--vs-model or --vs-dtype"
    KNOBBED = f"a compiled system; add one of {', '.join(COMPILED_SYSTEMS)} to --systems"
    BORROW_WHY = "a knob side's floor and references (eager, transformers) are plain's"
    OWNS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS",
            "TRANSFORMERS_VERBOSITY")  # `bench.worker_env`  # fmt: skip

    def members(self) -> tuple[str, ...]:
        """Each system and the side's roofline probe, set up first."""
        return (PROBE, *self.systems)

    def knob_members(self) -> tuple[str, ...]:
        return tuple(s for s in self.systems if s in COMPILED_SYSTEMS)

    def before(self) -> DecodeSpec | None:
        """--vs-model's model and --vs-dtype's dtype as the before side."""
        if not (self.vs_model or self.vs_dtype):
            return None
        return replace(self, model=self.vs_model or self.model, dtype=self.vs_dtype or self.dtype,
                       vs_model="", vs_dtype=None, no_more=None, no_slower=None)  # fmt: skip

    def typed_as(self) -> tuple[tuple[str, str], ...]:
        return (("--model", "--vs-model"), ("--dtype", "--vs-dtype"))

    def plan(self, sides, cores: int):
        """The run's estimate (`harness.runs.eta`): as `compile`'s, each compiled system into
        its own cold cache, each side's probe first (a knob side borrows plain's)."""
        from nanobench.harness.runs.eta import Plan

        planned = [m for m in sides.planned() if m.name != PROBE]
        probes = len(sides.planned()) - len(planned)
        compiled = len([m for m in planned if m.name not in EAGER_SYSTEMS])
        cold = compiled if self.backend == "inductor" else 0
        later = len(planned) * (min(self.processes, self.max_rounds) - 1)
        return Plan(len(planned) + probes, cold, compiled - cold, later, cores, len(planned),
                    self.steps, self.max_rounds, self.budget_s)  # fmt: skip

    def round_plan(self):
        from nanobench.harness.workers.rounds import round_plan

        return round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)

    def checked(self) -> DecodeSpec:
        """Rules across options (ranges and choices are the options' own): BadInput, one line."""
        if self.steps < 2:
            raise BadInput(
                f"--steps {self.steps}: expected at least 2 (the prefill's token, then decode steps)"
            )
        if self.max_model_len and self.prompt_len + self.steps > self.max_model_len:
            raise BadInput(
                f"--prompt-len {self.prompt_len} + --steps {self.steps} exceed "
                f"--max-model-len {self.max_model_len}"
            )
        self.round_plan()
        wanted = [s for s in self.systems if s in VLLM_SYSTEMS]
        if wanted:
            vllm_reachable(f"--systems {wanted[0]}", self.python)
        if self.processes < 1:
            raise BadInput(f"--processes {self.processes}: expected a positive integer")
        return self

    def heading(self, sides, runs: dict, rows: list) -> str:
        """The table's and the figure's title: what ran, on what, how often."""
        from reports.style import title

        run = runs[sides.main]
        return title(
            sides.worded(
                "decode",
                lambda knobs: f"decode: knobs {knobs} against plain torch.compile",
                lambda b: (
                    f"decode of {self.model} {run.dtype} (after) vs {b.spec.model} "
                    f"{runs[b.name].dtype} (before)"
                ),
                "decode",
            ),
            # each side's model is in the words of a before-and-after run
            model=sides.worded(self.model, lambda knobs: self.model, lambda b: None),
            device=self.device,
            dtype=run.dtype,
            rows=self.rows,
            prompt_len=self.prompt_len,
            steps=self.steps,
            threads=self.threads or "default",
            interleaved_rounds=max((r.rounds for r in rows), default=0),
            processes=self.processes,
        )
