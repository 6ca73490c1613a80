"""Two saved races, compared: what `compare` reads of `tune`'s out directories.

What it is: `TuneKind` (tune's `SavedKind`: `tune.csv` as `ConfigRow`s, its samples by
configuration, `step_ms` the timing `--no-slower` may name) and `saved_changes(old, new)`: per
configuration both races timed, its outcome (survivor, dropped, ...) the same or changed, its
step ms with the runs-apart interval over both races' processes, and its cold and warm compile
seconds; a configuration one race has and the other lacks is said, never dropped silently.
What it is not: the race (`tune.bench`) or `compare` itself (`nanobench.compare`).
Invariant: every figure is a saved row's or a saved sample's; a race saved as a --json
document has no samples, so its step change has no interval and says so.
"""

from __future__ import annotations

from nanobench.harness.runs.change import Change, timing_change, value_change
from nanobench.harness.runs.run_kind import SavedKind
from nanobench.harness.runs.saved import NO_SAMPLES, per_process
from nanobench.harness.statistics.t_intervals import apart_interval
from nanobench.tune.rows import ConfigRow


def config_changes(name: str, before: ConfigRow, after: ConfigRow, old, new) -> list[Change]:
    timed = bool(old.windows and new.windows)
    step = apart_interval(per_process(old.windows, name), per_process(new.windows, name))
    return [
        value_change(name, "outcome", before.outcome, after.outcome),
        timing_change(
            name,
            "step_ms",
            before.step_ms,
            after.step_ms,
            step if timed else None,
            "" if timed else NO_SAMPLES,
        ),  # fmt: skip
        timing_change(
            name, "compile_s", before.compile_s, after.compile_s, None, "one compile a race"
        ),  # fmt: skip
        timing_change(
            name,
            "compile_warm_s",
            before.compile_warm_s,
            after.compile_warm_s,
            None,
            "one warm start a race",
        ),  # fmt: skip
    ]


def saved_changes(old, new) -> tuple[list[Change], dict]:
    """Per configuration both races timed: outcome, step and compile changes; the ones on one
    side only, by name."""
    a = {r.config: r for r in old.rows}
    b = {r.config: r for r in new.rows}
    found: list[Change] = []
    for name in [n for n in a if n in b]:
        found += config_changes(name, a[name], b[name], old, new)
    only = {"only_old": [n for n in a if n not in b], "only_new": [n for n in b if n not in a]}
    return found, only


class TuneKind(SavedKind):
    command, label, row_type = "tune", "config", ConfigRow
    timings = ("step_ms",)
    saved_changes = staticmethod(saved_changes)

    @staticmethod
    def why(row: ConfigRow) -> list[str]:
        """A dropped or disqualified configuration's reason, under compare's table."""
        if row.outcome in ("dropped", "disqualified"):
            return [f"{row.side}: {row.config}: {row.outcome}: {row.reason}"]
        return []
