"""What `compare` needs of each command whose runs it reads: one entry per command, no branches.

What it is: `Comparer` (a command's saved CSV and samples' member column, its row type, the
columns `--no-more` and `--no-slower` may name, its changes between two saved runs with what
is on one side only, compare.png's panels and the lines each side's rows add under the table)
and `COMPARERS`, by command: compile, decode, explain, profile.
What it is not: the reading of a saved run (`runs.load`) or the changes' arithmetic
(`runs.compile_changes`, `runs.decode_changes`, `explain.before_after`).
Invariant: importing this loads no torch and no command's rows: each piece is looked up when
compare asks for it; a command not here is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from nanobench.harness.errors import BadInput
from reports.style import article


def _attr(path: str):
    """`module:name`, imported when asked for."""
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class Comparer:
    command: str
    csv: str  # what the command leaves under --out
    label: str  # the samples' column naming a member
    row_type: str  # module:name
    counts: str  # module:name of the count columns (a dict or tuple of names)
    timings: tuple[str, ...]
    changes: str  # module:name of (old, new) -> (changes, one side only)
    panels: str | None = None  # module:name of compare.png's panels; None: no figure
    why: str | None = None  # module:name of row -> lines said under the table

    def load(self, name: str):
        return _attr(getattr(self, name))

    def count_columns(self) -> tuple[str, ...]:
        return tuple(self.load("counts"))

    def why_lines(self, old, new) -> list[str]:
        """Each side's rows' lines, named old and new as the title names them."""
        from dataclasses import replace

        if self.why is None:
            return []
        why = self.load("why")
        # a --try run's row keeps its side: "old cpp-wrapper dynamic"
        return [line for side, run in (("old", old), ("new", new)) for r in run.rows
                for line in why(replace(r, side=f"{side} {r.side}".strip()))]  # fmt: skip


COMPARERS = {
    "compile": Comparer(
        "compile", "compile.csv", "mode", "nanobench.compile.rows:CompileRow",
        "nanobench.compile.vs:COUNTS", ("step_ms", "speedup"),
        "nanobench.compare.runs:compile_changes", "reports.change:COMPILE_PANELS",
        "reports.compile:why",
    ),
    "explain": Comparer(
        "explain", "explain.csv", "mode", "nanobench.harness.step.dynamo_explain:ExplainRow",
        "nanobench.explain.before_after:COLUMNS", (), "nanobench.compare.runs:explain_changes",
    ),
    "decode": Comparer(
        "decode", "decode.csv", "system", "nanobench.decode.rows:DecodeRow",
        "nanobench.compare.kinds:DECODE_COUNTS", ("step_ms",),
        "nanobench.compare.runs:decode_changes", "reports.change:DECODE_PANELS",
    ),
    "profile": Comparer(
        "profile", "profile.csv", "mode", "nanobench.profile.rows:ProfileRow",
        "nanobench.profile.vs:COUNTS", ("step_ms", "speedup"),
        "nanobench.profile.vs:compare_changes", None, "nanobench.profile.vs:why",
    ),
}  # fmt: skip
DECODE_COUNTS = ("builds",)


def comparer(command: str) -> Comparer:
    if command not in COMPARERS:
        *most, last = COMPARERS
        raise BadInput(f"compare reads {', '.join(most)} and {last} runs, not "
                       f"{article(command)} run")  # fmt: skip
    return COMPARERS[command]
