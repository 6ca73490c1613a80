"""`nanobench decode`'s spec: every option's default and the rules across options.

What it is: `DecodeSpec` (frozen; `validate()` checks what no option checks alone) and its round
plan. What it is not: the command (`command.py`) or the run (`run.py`).
Invariant: a spec that validated runs without another check; a bad one is `BadInput`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nanobench.harness.cli.choices import SYSTEMS
from nanobench.harness.cli.options import (
    Names,
)
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import check_columns
from nanobench.harness.step.knobs import PLAIN, check_backend
from nanobench.harness.step.knobs import check_sides as check_knob_sides

# The systems torch.compile builds: the ones a --try knob acts on.
COMPILED_SYSTEMS = ("engine-compiled", "hf-static-compiled")


@dataclass(frozen=True)
class DecodeSpec:
    """`nanobench decode`'s options: the one place their defaults live."""

    model: str = "tiny"
    systems: Names = Names(SYSTEMS)
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
    threads: int = 0
    backend: str = "inductor"
    hf_attn: str = "sdpa"
    timeout: int = 900
    out: str = "nanobench-out"
    processes: int = 3  # fresh workers per system: docs/measuring.md#what-a-process-costs
    history: bool = (
        True  # earlier runs' spread on this machine (harness.statistics.history); a plain run
    )
    export_json: str = ""  # also the rows as PyTorch OSS benchmark records (harness.runs.export)
    vs_model: str = ""  # the before side's model (the after side: --model)
    vs_dtype: str | None = None  # the before side's dtype (the after side: --dtype)
    no_more: tuple[str, ...] | None = None
    no_slower: tuple[str, ...] | None = None
    margin: float = 0.05
    tries: tuple[str, ...] = ()  # --try: each a side measured against plain (harness.step.knobs)
    knob: str = ""  # this side's knob, set by `sides()` alone ("" plain)

    @property
    def compared(self) -> bool:
        """A run of sides in one fleet: before and after, or plain and each knob."""
        return bool(self.vs_model or self.vs_dtype or self.tries)

    def sides(self) -> dict[str, DecodeSpec]:
        """Each side's spec by its name: "" alone, the before (--vs-model, --vs-dtype) and
        after (--model, --dtype), or plain and each --try knob (its compiled systems only: the
        others read no knob, so a knob side's floor and references are plain's)."""
        if self.tries:
            compiled = Names(s for s in self.systems if s in COMPILED_SYSTEMS)
            return {PLAIN: self, **{k: replace(self, knob=k, systems=compiled)
                                    for k in self.tries}}  # fmt: skip
        if not self.compared:
            return {"": self}
        before = replace(self, model=self.vs_model or self.model, dtype=self.vs_dtype or self.dtype)
        plain = dict(vs_model="", vs_dtype=None, no_more=None, no_slower=None)
        return {"before": replace(before, **plain), "after": self}

    def pairs(self) -> list[tuple[str, str]]:
        """The sides compared, (base, other): (before, after), or (plain, knob) per knob."""
        if self.tries:
            return [(PLAIN, k) for k in self.tries]
        return [("before", "after")] if self.compared else []

    def copies(self) -> int:
        """The weights' copies the run holds: each side's systems and probe (a knob side has
        none of its own) in every process."""
        sides = self.sides()
        return sum(len(s.systems) + (not s.knob) for s in sides.values()) * self.processes

    def round_plan(self):
        from nanobench.harness.workers.rounds import round_plan

        return round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)

    def validate(self) -> None:
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
        if self.processes < 1:
            raise BadInput(f"--processes {self.processes}: expected a positive integer")
        if (self.no_more or self.no_slower) and not self.compared:
            raise BadInput("--no-more and --no-slower compare two sides: give --vs-model, "
                           "--vs-dtype or --try")  # fmt: skip
        if self.tries:
            self.tried()
        check_columns("--no-more", self.no_more, ("builds",))
        check_columns("--no-slower", self.no_slower, ("step_ms",))

    def tried(self) -> None:
        """--try against the run: one comparison at a time, a compiled system to turn, a
        backend that reads the knob."""
        check_knob_sides(self.tries)
        if self.vs_model or self.vs_dtype:
            raise BadInput("--try with --vs-model or --vs-dtype: one comparison a run; try "
                           "the knobs on one side")  # fmt: skip
        if not any(s in COMPILED_SYSTEMS for s in self.systems):
            raise BadInput(f"--try: knobs act on a compiled system; add one of "
                           f"{', '.join(COMPILED_SYSTEMS)} to --systems")  # fmt: skip
        check_backend(self.tries, self.backend)
