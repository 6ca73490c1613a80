"""The compile sweep's gates: its promises, checked on typed rows.

What it is: `gates(spec, rows)` (measured, no fall-back, graphs reused, compile amortised;
bucketed shapes on the ladder), `amortised_gate` (compiling pays back within the horizon,
judged on the saving's interval) and `no_steady_step` (why a mode whose every step built has no
time, and what more --steps would do).
What it is not: the measurement (`compile.bench`) or the row's derived columns (`compile.rows`).
Invariant: a gate reads typed fields, so a field a worker stopped sending fails loudly instead
of passing; an interval that straddles its target is inconclusive, never pass or fail.
"""

from __future__ import annotations

from engine.buckets import DecodeBuckets
from nanobench.compile.rows import CompileRow
from nanobench.compile.spec import CompileSpec
from nanobench.cost.compile import check_graph_reused, check_no_fallback, check_shapes_bucketed
from nanobench.harness.runs.gates import Gate, gate, interval_gate, undecided_hint
from nanobench.harness.statistics.stats import Interval
from nanobench.harness.statistics.verdicts import FAIL, INCONCLUSIVE, PASS


def gates(spec: CompileSpec, rows: list[CompileRow]) -> list[Gate]:
    """Measured, no fall-back, graphs reused, compile amortised; bucketed shapes on the ladder."""
    found = []
    shapes = spec.worker().step_shapes()
    for r in rows:
        if r.status != "ok":
            found.append(Gate(f"measured[{r.mode}]", False, r.status))
            continue
        if r.mode == "off":
            continue
        last_reason = r.recompile_reasons[-1] if r.recompile_reasons else ""
        found.append(
            gate(f"check_no_fallback[{r.mode}]", check_no_fallback, r.fell_back, last_reason)
        )
        if r.mode == "dynamic" or spec.bucketed:
            limit = 2 if r.mode == "dynamic" else len(set(shapes))
            found.append(
                gate(
                    f"check_graph_reused[{r.mode}]",
                    check_graph_reused,
                    r.builds,
                    spec.steps,
                    limit,
                )
            )
        found.append(amortised_gate(r, spec.horizon))
    if spec.bucketed:
        buckets = DecodeBuckets(spec.max_batch, spec.max_model_len, spec.width_multiple)
        found.append(gate("check_shapes_bucketed", check_shapes_bucketed, shapes, buckets))
    return found


def amortised_gate(row: CompileRow, horizon: int) -> Gate:
    """Compiling pays back within the horizon: the saving interval against compile_s / horizon
    decides pass (wholly above), fail (wholly below) or can't tell (with rounds to decide)."""
    name = f"check_compile_amortised[{row.mode}]"
    needed = row.saving_needed_ms
    if needed is None:
        why = (
            no_steady_step(row)
            if row.status == "ok" and not row.step_ms
            else "no step time against off: run off in the same sweep"
        )
        return Gate(name, False, why)
    saving = Interval.from_ends(estimate=row.saving_per_step_ms, low=row.saving_per_step_ms_low,
                                high=row.saving_per_step_ms_high, rounds=row.rounds)  # fmt: skip
    verdict = {"yes": PASS, "no": FAIL}.get(row.worth_compiling, INCONCLUSIVE)

    def steps(value) -> str:
        return "never" if value is None else f"{value:,.0f}"

    detail = (
        f"saving {saving.estimate:.4f} ms/step {bounds_text(saving)} against "
        f"{needed:.4f} needed to repay {row.compile_s:.2f} s within {horizon:,} steps; "
        f"breakeven {steps(row.breakeven_steps)} [{steps(row.breakeven_steps_low)}, "
        f"{steps(row.breakeven_steps_high)}] steps"
    )
    if verdict == INCONCLUSIVE:
        more, bind = row.worth_rounds_to_decide, row.worth_processes_bind
        detail += "; can't tell at this noise" + undecided_hint(more, bind)
    return interval_gate(name, verdict, detail, saving, round(needed, 6))


def no_steady_step(row: CompileRow) -> str:
    """Every step built: what more --steps would do, as a dry run over more steps showed (a
    target's `more_steps`), never advice to take more steps that would cross the recompile limit
    into the fall-back; where no dry run said, that it is unchecked and what the limit does."""
    said = "every step built: no steady step to time"
    if row.more_steps:
        return f"{said}; more --steps would {row.more_steps}"
    return (f"{said}; unchecked whether more --steps would reach one: a frame that rebuilds "
            f"every step falls back to eager past recompile_limit {row.recompile_limit}, "
            "silently (the remedies say what helps)")  # fmt: skip


def bounds_text(saving) -> str:
    """ "[low, high]", or "(no interval yet)" when the rounds gave none (never "[nan, nan]")."""
    if saving.low != saving.low or saving.high != saving.high:  # NaN: no interval
        return "(no interval yet)"
    return f"[{saving.low:.4f}, {saving.high:.4f}]"
