"""`nanobench pool-budget`'s gates: one `check_pool_budget` per priced list.

What it is: `gates(spec, rows)`: a list fits when the KV pool left beside the weights and the
capture pool holds one `max_model_len` sequence. What it is not: the pricing (`run.py`).
Invariant: not fitting is a failed gate (exit 1 under --check), never bad input.
"""

from __future__ import annotations

from nanobench.harness.runs.gates import Gate
from nanobench.pool_budget.spec import PoolBudgetSpec


def gates(spec: PoolBudgetSpec, rows) -> list[Gate]:
    """One check_pool_budget per priced list: it fits when the KV pool left holds a sequence."""
    return [
        Gate(
            f"check_pool_budget[{r.kernel}"
            + (f",{r.width_multiple}]" if r.kernel == "reference" else "]"),
            r.fits,
            r.fits_detail,
        )
        for r in rows
    ]
