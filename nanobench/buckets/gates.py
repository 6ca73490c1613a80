"""`nanobench buckets`' gates: what a closed shape set promises before anything is captured.

What it is: `gates(spec, result)`: each run closed, its plans equal to the arithmetic, the
capture list within `--max-shapes` at the chosen multiple, the padding bounded.
What it is not: the pricing (`bench.py`) or the run (`run.py`).
Invariant: every gate goes through `harness.runs.gates.gate`: a broken promise is a failed gate
(exit 1 under --check), never bad input.
"""

from __future__ import annotations

from engine.buckets import check_capture_budget, check_run_closed, check_waste_bounded
from nanobench.buckets.bench import capture_buckets, check_plans_match_arithmetic, run_buckets
from nanobench.buckets.spec import BucketsSpec
from nanobench.harness.runs.gates import Gate, gate


def gates(spec: BucketsSpec, result) -> list[Gate]:
    """Closed runs, plans = arithmetic, the capture budget at the chosen multiple, bounded waste.

    `result` is `buckets_bench.measure`'s (its rows and the per-step traces they came from).
    Every gate goes through `nanobench.harness.runs.gates.gate`, so a broken promise is a failed gate
    (exit 1 under --check) and never bad input.
    """
    found: list[Gate] = []
    for row, trace in zip(result.runs, result.traces, strict=True):
        buckets = run_buckets(spec, row.max_model_len)
        found.append(
            gate(
                f"check_run_closed[steps={row.steps}]",
                check_run_closed,
                buckets,
                trace.bucketed_shapes,
            )
        )
        found.append(
            gate(
                f"check_plans_match_arithmetic[steps={row.steps}]",
                check_plans_match_arithmetic,
                row,
            )
        )
    found.append(
        gate(
            f"check_capture_budget[multiple={spec.multiple},kernel={spec.kernel}]",
            check_capture_budget,
            capture_buckets(spec, spec.multiple, spec.width_free),
            spec.max_shapes,
        )
    )
    waste_checks = [(f"steps={r.steps}", r.waste) for r in result.runs]
    waste_checks.append((f"typical,multiple={spec.multiple}", result.chosen.waste))
    for label, share in waste_checks:
        name = f"check_waste_bounded[{label}]"
        if spec.width_free:
            # The window is addressed, not computed: the kernel reads each row to its length,
            # padded rows have length 0, and there is no score rectangle to fill.
            found.append(Gate(name, True, "triton kernel: padded cells are never computed"))
        else:
            found.append(gate(name, check_waste_bounded, share, spec.max_waste))
    return found
