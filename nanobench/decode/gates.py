"""`nanobench decode`'s gates: what the engine is held to against transformers.

What it is: `gates(spec, rows)`: per row, measured, tokens match and nothing built while timed
(pass/fail); the ratio gates the model's targets set (`bench.targets_for`), each judged on its
interval (pass/fail/can't tell), and the floor gate, which can't tell when the floor was beaten;
the `check_*` functions they run.
What it is not: the rows' derivation (`derive.py`) or the run (`run.py`).
Invariant: a gate reads only the rows; a floor the step beat decides nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nanobench.decode.bench import ENGINE_SYSTEMS, DecodeGateFailed, targets_for
from nanobench.decode.rows import DecodeRow
from nanobench.harness.runs.gates import Gate, gate, ratio_gate
from nanobench.harness.statistics.stats import Interval
from nanobench.harness.statistics.verdicts import INCONCLUSIVE

if TYPE_CHECKING:
    from nanobench.decode.spec import DecodeSpec


def gates(spec: DecodeSpec, rows: list[DecodeRow]) -> list[Gate]:
    """Tokens and warm-up gates for every row (pass/fail); the ratio gates the model's targets
    (`decode_bench.targets_for`) set, each judged on its 95% interval (pass/fail/inconclusive)."""
    targets = targets_for(spec.model, rows[0].weight_bytes if rows else 0)
    found = []
    by_name = {r.system: r for r in rows}
    for r in rows:
        if r.status != "ok":
            found.append(Gate(f"measured[{r.system}]", False, r.status))
            continue
        found.append(gate(f"tokens_match[{r.system}]", check_tokens_match, r))
        if r.compile_s is not None:
            found.append(gate(f"nothing_built_while_timed[{r.system}]", check_nothing_built, r))
    ratio_gates = (
        # gate name, our system, their system, column, target
        ("engine_eager_vs_hf_eager", "engine-eager", "hf-eager", "ratio_vs_hf_eager",
         targets.eager_vs_hf_eager),
        ("engine_compiled_vs_hf_compiled", "engine-compiled", "hf-static-compiled",
         "ratio_vs_hf_compiled", targets.compiled_vs_hf_compiled),
    )  # fmt: skip
    for name, ours, theirs, column, target in ratio_gates:
        if target is None or ours not in by_name or theirs not in by_name:
            continue
        what = f"{ours} / {theirs} step time"
        found.append(ratio_gate(name, what, ratio_of(by_name[ours], column), target))
    best = best_engine_row(rows)
    if targets.best_vs_floor is not None and best is not None:
        what = f"{best.system} (the fastest engine mode) / the {best.floor_bound} floor"
        if (best.floor_probe or "").startswith("failed"):
            # A floor the step beat is no floor: nothing can be judged against it.
            detail = f"{what}: can't tell, the floor probe {best.floor_probe}"
            found.append(Gate("best_engine_vs_floor", False, detail, INCONCLUSIVE))
        else:
            interval = ratio_of(best, "ratio_vs_floor")
            found.append(ratio_gate("best_engine_vs_floor", what, interval, targets.best_vs_floor))
    return found


def check_tokens_match(row: DecodeRow) -> None:
    if row.tokens_match is None:
        raise DecodeGateFailed(
            f"{row.system}: no reference tokens to compare with (run engine-eager or hf-eager too)"
        )
    if not row.tokens_match:
        raise DecodeGateFailed(
            f"{row.system}: greedy tokens differ from {row.tokens_ref} at {row.first_mismatch}"
        )


def best_engine_row(rows: list[DecodeRow]) -> DecodeRow | None:
    """The fastest engine row that ran and made the reference tokens, or None."""
    done = [
        r
        for r in rows
        if r.system in ENGINE_SYSTEMS
        and r.status == "ok"
        and r.tokens_match is not False
        and r.ms_per_step
    ]
    return min(done, key=lambda r: r.ms_per_step) if done else None


def ratio_of(row: DecodeRow, column: str) -> Interval:
    """The Interval a row holds in column, column_low, column_high (None: NaN), over its
    processes, with the share of its variance more rounds would shrink."""
    return Interval.from_ends(
        estimate=getattr(row, column), low=getattr(row, f"{column}_low"),
        high=getattr(row, f"{column}_high"), rounds=row.rounds, processes=row.processes,
        within_share=getattr(row, f"{column}_within_share"),
    )  # fmt: skip


def check_nothing_built(row: DecodeRow) -> None:
    if row.builds_measured is None:
        raise DecodeGateFailed(f"{row.system}: the worker did not report builds_measured")
    if row.builds_measured:
        raise DecodeGateFailed(
            f"{row.system}: {row.builds_measured} frames compiled during the measured repeats: "
            "the warm-up did not reach every shape, so these step times include compiling"
        )
