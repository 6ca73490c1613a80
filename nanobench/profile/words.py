"""What caps a mode's speedup, in words drawn from its category rows.

What it is: one or two sentences for one mode, built from its `CategoryRow`s (and off's, to
compare): the capping category, the mode's largest but "unattributed", with its share of the step
and its ms, against off's same category when off's rows are given, and the per-call work
compiling adds (guards, dynamo entry, wrapper python). For off itself: its two largest
categories and the forward's Python. Where the capping category is host work, the sentence says
how much of the step a recorded graph could remove.
What it is not: the attribution (`profile.attribution`), the table or the figure.
Invariant: every number in the words is a row's number, formatted: ms to 2 decimals (2
significant digits below 0.1 ms), shares as whole percents, speedups as the rows give them.
"""

from __future__ import annotations

from nanobench.harness.step.self_compiled import VLLM_MODES
from nanobench.profile.rows import HOST_CATEGORIES, UNCHANGED_BY_COMPILING, CategoryRow, JoinedRow

PER_CALL = ("guards", "dynamo entry", "wrapper python")  # what compiling adds to every call


def ms_text(ms: float) -> str:
    """ms to 2 decimals; 2 significant digits below 0.1 ms, where 2 decimals would read 0.0x."""
    return f"{ms:.2f}" if abs(ms) >= 0.1 else f"{ms:.2g}"


def percent_text(share: float) -> str:
    """A share as a whole percent: 0.35 -> "35%"."""
    return f"{share * 100:.0f}%"


def speedup_text(x: float) -> str:
    """A speedup to 1 decimal from 1x up, 2 below (0.93x), where one decimal hides a slowdown."""
    return f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def head(mode: str, speedup: float | None, low: float | None, high: float | None) -> str:
    """The sentence's subject: "dynamic 1.7x [1.6, 1.8]", or the mode and "speedup not measured"."""
    if mode == "off":
        return "off"
    if speedup is None:
        return f"{mode}, speedup not measured"
    interval = ""
    if low is not None and high is not None:
        interval = f" [{speedup_text(low)}, {speedup_text(high)}]"
    return f"{mode} {speedup_text(speedup)}x{interval}"


def by_size(rows: list[CategoryRow], names=None) -> list[CategoryRow]:
    """The rows (of `names`, if given) but "unattributed" with time, largest first."""
    kept = [r for r in rows if r.category != "unattributed" and r.ms_per_step > 0]
    kept = [r for r in kept if names is None or r.category in names]
    return sorted(kept, key=lambda r: -r.ms_per_step)


def why_speedup(
    mode: str,
    speedup: float | None,
    low: float | None,
    high: float | None,
    categories: list[CategoryRow],
    off: list[CategoryRow] | None,
    *,
    device: str,
) -> str:
    """One or two sentences naming the category that caps this mode, with the rows' numbers;
    a remedy the `device` can take."""
    subject = head(mode, speedup, low, high)
    ranked = by_size(categories)
    if not ranked:
        return f"{subject}: no time attributed."
    if mode == "off":
        return f"{subject}: {_off_words(categories, ranked)}."
    if ranked[0].category in HOST_CATEGORIES:
        return f"{subject}: {_host_words(categories, device, mode)}."
    return f"{subject}: {_kernel_words(ranked[0], categories, off)}."


def _off_words(rows: list[CategoryRow], ranked: list[CategoryRow]) -> str:
    """off's two largest categories, then the forward's Python (or all host work, if named)."""
    named = " and ".join(f"{r.category} {percent_text(r.share)}" for r in ranked[:2])
    if "forward python" in {r.category for r in ranked[:2]}:
        host = sum(r.share for r in rows if r.category in HOST_CATEGORIES)
        return f"{named} of the step; host work {percent_text(host)}"
    python = next((r.share for r in rows if r.category == "forward python"), 0.0)
    return f"{named} of the step; the forward's Python {percent_text(python)}"


def _host_words(rows: list[CategoryRow], device: str, mode: str) -> str:
    """How much of the step is host work, its two largest parts, and what could cut it on this
    device: a recorded CUDA graph on a GPU; on a CPU, where there is none (reduce-overhead is
    refused without CUDA), the knobs that move host work: cpp-wrapper and a guard filter."""
    host = percent_text(sum(r.share for r in rows if r.category in HOST_CATEGORIES))
    largest = by_size(rows, HOST_CATEGORIES)[:2]
    parts = ", ".join(f"{r.category} {ms_text(r.ms_per_step)} ms" for r in largest)
    if device == "cuda":
        remedy = "a recorded graph (--modes reduce-overhead) could remove most of it"
    elif mode in VLLM_MODES:  # vLLM compiles it: no --try reaches it, its own config does
        remedy = ("vLLM compiled it, so no --try reaches it; its compilation_config's "
                  "inductor_compile_config={'cpp_wrapper': True} is the C++ wrapper (not "
                  "measured here)")  # fmt: skip
    else:
        remedy = ("on a CPU, try --try cpp-wrapper,guard-filter (the wrapper in C++, fewer "
                  "guards a call); a recorded graph removes it on a GPU only")  # fmt: skip
    return f"host work is {host} of the step ({parts}): {remedy}"


def _kernel_words(cap: CategoryRow, rows: list[CategoryRow], off: list[CategoryRow] | None) -> str:
    """The capping category against off's, then the per-call work compiling adds."""
    verb = "are unchanged by compiling" if cap.category in UNCHANGED_BY_COMPILING else "cap it"
    was = next((r.ms_per_step for r in off or () if r.category == cap.category), None)
    took = f"{ms_text(cap.ms_per_step)} ms"
    took += f" against {ms_text(was)} in off" if was is not None else ""
    words = f"{cap.category}, {percent_text(cap.share)} of the step, {verb} ({took})"
    per_call = by_size(rows, PER_CALL)
    if not per_call:
        return words
    added = ms_text(sum(r.ms_per_step for r in per_call))
    top = f"{ms_text(per_call[0].ms_per_step)} ms of it {per_call[0].category}"
    return f"{words}; compiling adds {added} ms of per-call work, {top}"


def words(row: JoinedRow, off: list[CategoryRow] | None) -> str:
    """What caps the mode, from its categories; a fall-back said first."""
    if not row.profiled_step_ms:
        return ""
    mine = list(row.category_rows)
    device = row.compiled_row.device if row.compiled_row is not None else "cpu"
    said = why_speedup(row.mode, row.speedup, row.speedup_low, row.speedup_high, mine, off,
                       device=device)  # fmt: skip
    if row.fell_back:
        eager = sum(c.ms_per_step for c in mine if c.category in ("eager ops", "forward python"))
        said += (f" It fell back to eager past dynamo's recompile limit: {eager:.2f} ms a "
                 "step of eager ops and their Python.")  # fmt: skip
    return said
