"""What `compare` reads of a command's saved runs: declared on the command's kind, once.

What it is: `SavedKind`, the base of every kind whose runs `compare` reads (each measured
command's `RunKind`, explain's `ExplainKind`): the command's name and saved CSV, the member
column of its rows and samples, its row type, the counts and timings `--no-more` and
`--no-slower` may name, its changes between two saved runs (`saved_changes(old, new)`, with
what is on one side only), compare.png's panels and what a saved row says under the table.
What it is not: the reading of a saved directory (`compare.runs.load`) or a measured run.
Invariant: a kind whose `saved_changes` is None is refused by `compare` by name.
"""

from __future__ import annotations

from collections.abc import Callable


class SavedKind:
    command: str  # names the files, the JSON document and the estimate
    label: str  # the member's name column in rows and samples: "mode", "system"
    row_type: type
    counts: tuple[str, ...] = ()  # what --no-more may name
    timings: tuple[str, ...] = ()  # what --no-slower may name
    panels = None  # compare.png's panels (`reports.change`); None: no figure
    saved_changes: Callable | None = None  # (old, new) -> (changes, what is on one side only)

    @classmethod
    def csv(cls) -> str:
        return f"{cls.command}.csv"

    @staticmethod
    def why(row) -> list[str]:
        """What a saved row says under compare's table."""
        return []
