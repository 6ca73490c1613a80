"""A mode's timing joined to its profile: one `JoinedRow` per mode, and what it predicts.

What it is: `joined(row)` (compile's derived row, its `rows.TIMING_FIELDS` copied by name, and
the profile it carries, `rows.ProfiledCompileRow`: its facts, its categories net of the
profiler's cost, `overhead.net_of_profiler`, and its kernels), `forward_ms` and `with_amdahl`
(each compiled mode's forward speedup over off's and the step speedup it predicts at off's
forward share, `cost.compile.step_speedup`).
What it is not: the row types (`rows`), the attribution or the words (`words`).
Invariant: a function of the row it is handed; a failed row keeps its categories as measured.
"""

from __future__ import annotations

from dataclasses import replace

from nanobench.compile.rows import CompileRow
from nanobench.cost.compile import step_speedup
from nanobench.profile.overhead import net_of_profiler
from nanobench.profile.rows import TIMING_FIELDS, JoinedRow, ProfileRow, fields_of


def joined(row: CompileRow) -> JoinedRow:
    """A mode's timing (compile's derived row, its `TIMING_FIELDS` copied by name) and the
    profile it carries (`rows.ProfiledCompileRow`): where it ran ok, the profile's facts and
    categories net of the profiler's cost; where it failed, its categories as measured."""
    timing = {name: getattr(row, name) for name in TIMING_FIELDS}
    profile = getattr(row, "profile", None)
    if profile is None:
        return JoinedRow(**timing, compiled_row=row)
    named = {"mode": row.mode, "side": row.side}
    kernels = tuple(replace(k, **named) for k in profile.kernels)
    if row.status != "ok":
        return JoinedRow(**timing, compiled_row=row, kernel_rows=kernels,
                         category_rows=tuple(replace(c, **named) for c in profile.categories))  # fmt: skip
    net, facts = net_of_profiler(list(profile.categories), profile.facts.plain_step_ms)
    base = {**fields_of(profile.facts, ProfileRow), **timing, **facts}
    return JoinedRow(**base, compiled_row=row, kernel_rows=kernels,
                     category_rows=tuple(replace(c, **named) for c in net))  # fmt: skip


def forward_ms(row: ProfileRow) -> float | None:
    """The forward's ms a profiled step: its share of the profiled step."""
    if row.forward_share is None or not row.profiled_step_ms:
        return None
    return row.forward_share * row.profiled_step_ms


def with_amdahl(rows: list[ProfileRow]) -> list[ProfileRow]:
    """Each compiled mode's forward speedup over off's (profiled), and the step speedup it
    predicts at off's forward share (`cost.compile.step_speedup`), to set beside the measured
    one: the share a speedup was measured against, never left out."""
    off = next((r for r in rows if r.mode == "off" and forward_ms(r)), None)
    if off is None:
        return rows
    out = []
    for r in rows:
        mine = forward_ms(r)
        if r.mode == "off" or not mine:
            out.append(r)
            continue
        gain = forward_ms(off) / mine
        out.append(replace(r, forward_speedup=gain,
                           amdahl_speedup=step_speedup(gain, off.forward_share)))  # fmt: skip
    return out
