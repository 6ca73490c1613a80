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

    @property
    def compared(self) -> bool:
        """A before-and-after run: both sides' systems in one fleet."""
        return bool(self.vs_model or self.vs_dtype)

    def sides(self) -> dict[str, DecodeSpec]:
        """Each side's spec by its name: "" alone, or the before (--vs-model, --vs-dtype) and
        after (--model, --dtype)."""
        if not self.compared:
            return {"": self}
        before = replace(self, model=self.vs_model or self.model, dtype=self.vs_dtype or self.dtype)
        plain = dict(vs_model="", vs_dtype=None, no_more=None, no_slower=None)
        return {"before": replace(before, **plain), "after": self}

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
            raise BadInput("--no-more and --no-slower compare two sides: give --vs-model or "
                           "--vs-dtype")  # fmt: skip
        check_columns("--no-more", self.no_more, ("builds",))
        check_columns("--no-slower", self.no_slower, ("step_ms",))
