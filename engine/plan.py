"""The decode plan: where a step's tokens go, decided on the host before the forward runs.

What it is: `DecodePlan`, a frozen bundle of the tensors the decode forward reads
(`write_slots`, `slot_mapping`, `context_lens`, `positions`) plus host-only facts about the
step (`rows`, `min_ctx`, `max_ctx`, `pad_rows`), and `plan_decode`, the one place the block
tables grow during decode.
What it is not: the forward. Nothing inside the traced region may read a host field of a plan;
they exist for the host's own checks and reports.
Invariant: a plan is current or rejected (`check_plan_current`); an empty row is refused; the
slot table takes one write per row per step; padded rows read nothing and write the sink.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class PlanUnsound(RuntimeError):
    """A plan that would decode the wrong thing: stale, empty, or not addressable."""


@dataclass(frozen=True)
class DecodePlan:
    write_slots: torch.Tensor  # (B,) pool row each new token's K/V goes to; sink for pads
    slot_mapping: torch.Tensor  # (B, W) window on the slot table
    context_lens: torch.Tensor  # (B,) history per row including this token; 0 for pads
    positions: torch.Tensor  # (B, 1) absolute position of each new token
    rows: tuple[int, ...]
    lens: tuple[int, ...]
    pad_rows: int
    sink_slot: int
    epoch: int
    bucketed: bool = False

    @property
    def batch_size(self) -> int:
        """Cache rows decoded this step (not the tensor dimension: see `graph_rows`)."""
        return len(self.rows)

    @property
    def graph_rows(self) -> int:
        return self.batch_size + self.pad_rows

    @property
    def graph_width(self) -> int:
        return self.slot_mapping.shape[1]

    @property
    def min_ctx(self) -> int:
        return min(self.lens)

    @property
    def max_ctx(self) -> int:
        return max(self.lens)

    @property
    def graph_shape(self) -> tuple[int, int]:
        """(rows, width) the forward runs at: what a compiler or a recorder keys on."""
        return (self.graph_rows, self.graph_width)

    @property
    def graph_cells(self) -> int:
        return self.graph_rows * self.graph_width

    @property
    def open_cells(self) -> int:
        """Cells the unpadded rectangle would compute: batch_size * max_ctx."""
        return self.batch_size * self.max_ctx

    @property
    def real_cells(self) -> int:
        return sum(self.lens)

    @property
    def pad_cells(self) -> int:
        return self.graph_cells - self.open_cells

    @property
    def pad_share(self) -> float:
        return self.pad_cells / self.graph_cells

    @property
    def mapping_bytes(self) -> int:
        return self.graph_cells * self.slot_mapping.element_size()


def plan_decode(cache, rows: list[int], buckets=None, inputs=None, width_free: bool = False):
    """Grow each row's table by one token and describe the step as tensors.

    rows must be a prefix 0..n-1 of the cache so the read is a window. With `buckets` the
    rows pad to the row ladder (context 0, sink writes, position 0) and the width to its
    bucket. With `inputs` the small tensors are windows on persistent buffers. With
    `width_free` the read spans the whole table width (a kernel that walks lengths itself).
    """
    n = len(rows)
    tables = row_tables(cache, rows)
    positions = [t.num_tokens for t in tables]
    if max(positions) + 1 > cache.max_model_len:
        raise PlanUnsound(
            f"a row would grow to {max(positions) + 1} tokens, past max_model_len "
            f"{cache.max_model_len}"
        )
    slots = [t.append_tokens(1, cache.allocator)[0] for t in tables]
    cache.slots.write_step(list(rows), positions, slots)
    lens = [p + 1 for p in positions]
    if width_free:
        graph_rows = buckets.row_bucket(n) if buckets is not None else n
        width = cache.max_model_len
    elif buckets is not None:
        graph_rows, width = buckets.shape_for(n, max(lens))
    else:
        graph_rows, width = n, max(lens)
    pad = graph_rows - n
    sink = cache.sink_slot
    write_slots = slots + [sink] * pad
    context_lens = lens + [0] * pad
    step_positions = positions + [0] * pad
    if inputs is not None:
        inputs.write(step_positions, write_slots, context_lens)
        ws = inputs.write_slots[:graph_rows]  # (B,)
        cl = inputs.context_lens[:graph_rows]  # (B,)
        pos = inputs.positions[:graph_rows]  # (B, 1)
    else:
        device = cache.device
        ws = torch.tensor(write_slots, dtype=torch.int64, device=device)  # (B,)
        cl = torch.tensor(context_lens, dtype=torch.int64, device=device)  # (B,)
        pos = torch.tensor(step_positions, dtype=torch.int64, device=device).view(-1, 1)  # (B, 1)
    cache.epoch += 1
    return DecodePlan(
        write_slots=ws,
        slot_mapping=cache.slots.read(graph_rows, width),
        context_lens=cl,
        positions=pos,
        rows=tuple(rows),
        lens=tuple(lens),
        pad_rows=pad,
        sink_slot=sink,
        epoch=cache.epoch,
        bucketed=buckets is not None,
    )


def row_tables(cache, rows: list[int]) -> list:
    """The rows' block tables, once the rows are known to be a prefix 0..n-1 holding tokens."""
    n = len(rows)
    if n == 0:
        raise PlanUnsound("a decode step needs at least one row")
    if tuple(rows) != tuple(range(n)):
        raise PlanUnsound(f"rows {tuple(rows)} are not a prefix 0..{n - 1}: the read is no window")
    tables = [cache.tables[r] for r in rows]
    for r, table in zip(rows, tables):
        if table is None or table.num_tokens == 0:
            raise PlanUnsound(
                f"row {r} holds no tokens: a decode over an empty row attends to nothing"
            )
    return tables


def check_plan_current(plan: DecodePlan, cache) -> None:
    """A plan is stale the moment another is built: its slots may already be reused."""
    if plan.epoch != cache.epoch:
        raise PlanUnsound(
            f"stale plan: built at epoch {plan.epoch}, the cache is at {cache.epoch}; "
            "plan each step once and decode with that plan"
        )
    current = tuple(cache.tables[r].num_tokens for r in plan.rows)
    if current != plan.lens:
        raise PlanUnsound(f"stale plan: lengths {plan.lens} but the tables hold {current}")
