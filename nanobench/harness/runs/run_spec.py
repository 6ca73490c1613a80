"""The shared spec block every measured command embeds: what a measured run reads off a spec.

What it is: `MeasuredSpec`, the frozen base of `compile`'s, `decode`'s, `startup`'s and
`profile`'s specs: the fields `MeasuredRun` reads (where outputs go, threads, history, the
comparison's gates) and the comparison's own options (`tries`; a side's `knob`), with what a
command says of itself to build its sides (`members`, `knob_members`, `before`, `typed_as`,
and class constants for the columns its gates may name, the variables its workers are given
and its error lines), the workers' environment (`python`, `vs_python`, `vs_env`), and `validate`,
the one meaning it has in every command: the command's own rules across options (`checked`),
then the comparison's, returning the spec the run uses.
What it is not: the sides themselves (`sides.Sides`, built from this once a run), an option's
range or choice (the Typer option's own) or a command's defaults (each command's spec).
Invariant: a spec that validated runs without another check; a bad one is `BadInput`, one line;
importing this loads no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import check_columns
from nanobench.harness.runs.sides import Sides
from nanobench.harness.step.knobs import check_backend
from nanobench.harness.step.knobs import check_sides as check_knob_sides
from nanobench.harness.workers.environment import owned_by


@dataclass(frozen=True)
class MeasuredSpec:
    """The fields a measured run reads, and the comparison's options; a command's spec adds
    its own and says how its sides are made."""

    out: str = "nanobench-out"
    export_json: str = ""  # also the rows as PyTorch OSS benchmark records
    threads: int = 0
    backend: str = "inductor"  # what compiles the step: a knob must be one it reads
    history: bool = False  # earlier runs' spread on this machine, where the command keeps one
    no_more: tuple[str, ...] | None = None
    no_slower: tuple[str, ...] | None = None
    margin: float = 0.05
    tries: tuple[str, ...] = ()  # --try: each a side measured against plain (harness.step.knobs)
    knob: str = ""  # this side's knob, set by `Sides.of` alone ("" plain)
    python: str = ""  # --python: every worker's interpreter ("" this one)
    vs_python: str = ""  # --vs-python: the after side's interpreter (before: --python's)
    vs_env: tuple[tuple[str, str], ...] = ()  # --vs-env: (KEY, VALUE) set for the after side

    COUNTS: ClassVar[tuple[str, ...]] = ()  # what --no-more may name
    TIMINGS: ClassVar[tuple[str, ...]] = ()  # what --no-slower may name
    COMPARED_BY: ClassVar[str] = "--vs"  # the options that make a comparison, for its lines
    BEFORE_BY: ClassVar[str] = "--vs"  # the options that name a before side
    KNOBBED: ClassVar[str] = ""  # what a knob acts on, and how to add one
    BORROW_WHY: ClassVar[str] = ""  # why a knob side borrows plain's other members
    # options a comparison refuses, each with the line that says why (startup's --artifacts);
    # `{by}` is the option that made the comparison (--vs, --try)
    ALONE_ONLY: ClassVar[dict[str, str]] = {}
    # timings --no-slower cannot hold a knob to, each with the line that says why
    KNOB_UNGATED: ClassVar[dict[str, str]] = {}
    OWNS: ClassVar[tuple[str, ...]] = ()  # variables this command's workers get beside SHARED

    def members(self) -> tuple[str, ...]:
        """What one side of this spec runs: its modes, its systems."""
        raise NotImplementedError

    def knob_members(self) -> tuple[str, ...]:
        """What a --try knob acts on, of `members`: a knob side runs these alone."""
        return self.members()

    def before(self) -> MeasuredSpec | None:
        """The before side's spec, where the options name one; None otherwise."""
        return None

    def plan(self, sides, cores: int):
        """The run's estimate in `harness.runs.eta.Plan`'s units: each command's own."""
        raise NotImplementedError(f"{type(self).__name__} has no estimate")

    def typed_as(self) -> tuple[tuple[str, str], ...]:
        """The before side's options as the user typed them: (--target, --vs)."""
        return ()

    def checked(self) -> MeasuredSpec:
        """The command's own rules across options; the spec the run uses."""
        return self

    def validate(self) -> MeasuredSpec:
        """The command's rules, then the comparison's: the spec the run uses, or BadInput."""
        spec = self.checked()
        spec.comparison_checked()
        return spec

    def comparison_checked(self) -> None:
        """A comparison's gates need two sides; knobs one comparison a run, a member to act on
        and a backend that reads them; each gate a column the command measures."""
        compared = Sides.of(self).compared
        self.environment_checked()
        if (self.no_more or self.no_slower) and not compared:
            raise BadInput(f"--no-more and --no-slower compare two sides: give {self.COMPARED_BY}")
        refused = [why for name, why in self.ALONE_ONLY.items() if compared and getattr(self, name)]
        if refused:
            raise BadInput(refused[0].format(by="--try" if self.tries else self.BEFORE_BY))
        if self.tries:
            check_knob_sides(self.tries)
            if self.before() is not None:
                raise BadInput(f"--try with {self.BEFORE_BY}: one comparison a run; try the "
                               "knobs on one side")  # fmt: skip
            if not self.knob_members():
                raise BadInput(f"--try: knobs act on {self.KNOBBED}")
            ungated = [why for c, why in self.KNOB_UNGATED.items() if c in (self.no_slower or ())]
            if ungated:
                raise BadInput(ungated[0])
            check_backend(self.tries, self.backend)
        check_columns("--no-more", self.no_more, self.COUNTS)
        check_columns("--no-slower", self.no_slower, self.TIMINGS)

    def environment_checked(self) -> None:
        """Interpreters that are files to run; another environment one comparison a run; no
        variable the command's workers are given by nanobench (`environment.owned_by`)."""
        for option, path in (("--python", self.python), ("--vs-python", self.vs_python)):
            check_interpreter(option, path)
        if not (self.vs_python or self.vs_env):
            return
        other = "--try" if self.tries else self.BEFORE_BY if self.before() is not None else ""
        if other:
            raise BadInput(f"--vs-python and --vs-env with {other}: one comparison a run; "
                           "measure the environments on one side")  # fmt: skip
        owned = owned_by(self.OWNS, self.threads)
        for key, _ in self.vs_env:
            if key in owned:
                raise BadInput(f"--vs-env {key}: nanobench sets it for its workers ({owned[key]})")


def check_interpreter(option: str, path: str) -> None:
    """An interpreter option names a file this user may run (whether it is Python, and has
    nanobench, its probe says: `harness.runs.environments`)."""
    if not path:
        return
    if not os.path.isfile(path):
        raise BadInput(f"{option} {path}: no such file; expected a Python interpreter's path")
    if not os.access(path, os.X_OK):
        raise BadInput(f"{option} {path}: not executable; expected a Python interpreter's path")
