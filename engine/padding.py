"""Padding soundness: a bucketed plan's padded rows read nothing and write only the sink.

What it is: `check_pad_inert(plan, cache=None)`, the gate that makes bucketing correct. A
bucketed plan pads the batch to a row bucket; each padded row must have `context_lens == 0`
(its whole score row is masked with `finfo.min`, so it attends to nothing) and a write slot
equal to the sink slot (the one pool row no block maps to), and no real row may write the sink
or read an empty history.
What it is not: a per-step check. It reads tensor values on the host (`tolist()`), so it runs
once where a plan is fixed, at capture or in a test, never inside the traced region.
Invariant: a plan that passes can change nothing in the pools but its real rows' own slots and
the sink slot, so real rows' logits are the same with and without padding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.plan import DecodePlan


class PadUnsound(RuntimeError):
    """A padded row that reads history or writes outside the sink slot (or a real row that does)."""


def check_pad_inert(plan: DecodePlan | None, cache=None) -> None:
    """Padded rows have context 0 and write the sink; real rows have context and do not.

    With a cache, the plan's `sink_slot` must also be that cache's sink and lie past every slot
    the allocator can hand out: a plan whose sink field was pointed at a real slot would
    otherwise agree with itself. `engine.last_plan` is None before its first planned step.
    """
    if plan is None:
        raise PadUnsound("the engine has decoded no planned step yet: there is no plan to check")
    sink = plan.sink_slot
    if cache is not None:
        if sink != cache.sink_slot:
            raise PadUnsound(
                f"plan's sink slot {sink} is not the cache's sink slot {cache.sink_slot}"
            )
        owned = cache.allocator.num_blocks * cache.block_size
        if sink < owned:
            raise PadUnsound(
                f"sink slot {sink} lies inside the allocator's {owned} slots: a block can own it"
            )
    n, graph_rows = plan.batch_size, plan.graph_rows
    # The host reads the values here, which is why this is a capture-time check.
    write_slots = plan.write_slots.reshape(-1).tolist()
    context_lens = plan.context_lens.reshape(-1).tolist()
    if len(write_slots) != graph_rows or len(context_lens) != graph_rows:
        raise PadUnsound(
            f"plan covers {graph_rows} rows ({n} real + {plan.pad_rows} padded) but carries "
            f"{len(write_slots)} write slots and {len(context_lens)} lengths"
        )
    for i in range(n, graph_rows):
        if context_lens[i] != 0:
            raise PadUnsound(
                f"padded row {i} has context_lens {context_lens[i]}, expected 0: it reads history"
            )
        if write_slots[i] != sink:
            raise PadUnsound(
                f"padded row {i} writes slot {write_slots[i]}, expected the sink slot {sink}: "
                "it overwrites K/V a sequence may own"
            )
    for i in range(n):
        if write_slots[i] == sink:
            raise PadUnsound(f"real row {i} writes the sink slot {sink}: its K/V would be lost")
        if context_lens[i] < 1:
            raise PadUnsound(
                f"real row {i} has context_lens {context_lens[i]}: it attends to nothing"
            )
