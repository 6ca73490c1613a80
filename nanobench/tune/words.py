"""What `tune` says under its table: the space, why the race stopped, the decision, the paste.

What it is: `space_lines` (what races and what was set aside, each with its reason),
`stop_line` (why the race stopped, and where a limit stopped it, about how many more rounds
would decide each open survivor), `phases_line` (compiles, process starts, rounds),
`decision_lines` (the choice at --steps-per-start on the verdict line, or the starts it cannot
be told from there, the horizons where it changes, the lines to paste) and `reason_lines` (each configuration out of the race and why,
each unsafe knob named).
What it is not: the table (`reports.tune`) or any statistic: it words rows already derived.
Invariant: the horizon is on the verdict line; an undecided race says what would decide it.
"""

from __future__ import annotations

import math

from nanobench.tune.bench import BY_BUDGET, BY_MAX_ROUNDS, EQUIVALENT, ONE_LEFT, RaceResult
from nanobench.tune.race import Look
from nanobench.tune.rows import ConfigRow, Decision
from nanobench.tune.space import Space
from reports.style import counted


def space_lines(space: Space) -> list[str]:
    out = [f"space: {space.line()}"]
    for s in space.set_aside:
        what = f"merged into {s.into.name}" if s.into is not None else "pruned"
        sizes = f" [{','.join(map(str, s.config.sizes))}]" if s.config.sizes else ""
        out.append(f"  {s.config.name}{sizes}: {what}: {s.reason}")
    return out


def more_rounds(look: Look, margin: float, names: dict) -> list[str]:
    """Each open survivor with about how many more rounds would decide it at this alpha:
    n (half-width / distance to 1 + margin)^2 - n, on the log scale."""
    out, edge = [], math.log(1 + margin)
    for e in look.evidence:
        if e.member in look.dropped or e.low == e.high:
            continue
        if e.variance_from == "processes":
            out.append(f"{names[e.member]}: {e.estimate:.3f}x [{e.low:.3f}, {e.high:.3f}]: its "
                       "processes disagree by more than the gap: more --processes would narrow "
                       "it, more rounds would not")  # fmt: skip
            continue
        half = (math.log(e.high) - math.log(e.low)) / 2
        distance = abs(math.log(e.estimate) - edge)
        more = math.ceil(e.rounds * (half / distance) ** 2 - e.rounds) if distance > 1e-9 else 0
        need = f"about {max(1, more)}" if more else "many"
        out.append(f"{names[e.member]}: {e.estimate:.3f}x [{e.low:.3f}, "
                   f"{e.high:.3f}] after {e.rounds} rounds: {need} more rounds")  # fmt: skip
    return out


def stop_line(found: RaceResult, spec, names: dict) -> list[str]:
    """Why the race stopped, in words; a limit's stop with what stays open."""
    r = found.rounds
    if found.stop == ONE_LEFT:
        return [f"race: decided after {r} rounds: one configuration left"]
    if found.stop == EQUIVALENT:
        return [f"race: decided after {r} rounds: every survivor within --margin "
                f"{spec.margin:g} of the best (equivalent)"]  # fmt: skip
    limit = {BY_BUDGET: f"--budget-s {spec.budget_s:g}", BY_MAX_ROUNDS:
             f"--max-rounds {spec.max_rounds}"}.get(found.stop, found.stop)  # fmt: skip
    out = [f"race: undecided: stopped by {limit} after {r} rounds"]
    if found.looks:
        out += [f"  {line}" for line in more_rounds(found.looks[-1], spec.margin, names)]
        out.append("  raise --budget-s or --max-rounds to decide them")
    return out


def phases_line(found: RaceResult, total_s: float) -> str:
    p = found.phases
    windows = len([w for w in found.windows if w.round >= 1])
    return (f"time: {total_s:.0f} s: compiles {p.compiles_s:.0f} s (a first worker each, "
            f"alone), process starts {p.starts_s:.0f} s ({counted(p.later, 'later worker')}), "
            f"rounds {p.rounds_s:.0f} s ({counted(found.rounds, 'round')}, "
            f"{counted(windows, 'window')})")  # fmt: skip


def decision_lines(decision: Decision | None, paste: list[str],
                   rows: list[ConfigRow] = ()) -> list[str]:  # fmt: skip
    """The verdict line with its horizon, the first start's choice where it differs, where the
    choice changes with the horizon, and the lines to paste."""
    if decision is None:
        return ["decision: none: no configuration finished the race ok"]
    n = decision.steps_per_start
    warm = "a restart's warm compile" if decision.warm_measured else \
        "a cold compile (no warm start measured)"  # fmt: skip
    head = f"at {n:,} steps a start (--steps-per-start): "
    if decision.tied:
        out = [f"{head}can't tell {decision.choice} ({decision.cost_s:,.1f} s a start) from "
               f"{tied_words(decision.tied, decision.choice)}, priced at {warm}",
               "  where the starts cross is within the steps' noise: more --processes narrow "
               "it; a horizon further from the crossing decides it"]  # fmt: skip
    else:
        out = [f"{head}ship {decision.choice}: {decision.cost_s:,.1f} s a start, priced at {warm}"]
    if not decision.tied and any(r.config == decision.choice and r.outcome == "dropped"
                                 for r in rows):  # fmt: skip
        out.append(f"  {decision.choice} lost the race on its step, but a start at this horizon "
                   "costs less without a compile")  # fmt: skip
    if decision.cold_choice != decision.choice or decision.cold_tied:
        first = f"({decision.cold_cost_s:,.1f} s)"
        if decision.cold_tied:
            first += f", not told from {tied_words(decision.cold_tied, decision.cold_choice)}"
        out.append(f"  a first start, on a cold cache: {decision.cold_choice} {first}")
    if len(decision.changes) > 1:
        spans = [f"from {at:,.0f}: {name}" if at else f"below {decision.changes[1][0]:,.0f}: "
                 f"{name}" for at, name in decision.changes]  # fmt: skip
        out.append("the choice changes with the steps a start serves: " + "; ".join(spans))
    cheaper = ", the cheaper by its median step" if decision.tied else ""
    out.append(f"paste ({decision.choice}{cheaper}):")
    return out + [f"    {line}" for line in paste]


def tied_words(tied: tuple[tuple[str, float, float], ...], choice: str) -> str:
    """'dynamic + freezing (21.4 to 23.5 s by its step's 95% interval against off's)'."""
    return "; ".join(f"{name} ({low:,.1f} to {high:,.1f} s by its step's 95% interval against "
                     f"{choice}'s)" for name, low, high in tied)  # fmt: skip


def reason_lines(rows: list[ConfigRow]) -> list[str]:
    out = []
    for r in rows:
        if r.outcome in ("dropped", "disqualified"):
            at = f" at round {r.dropped_round}" if r.dropped_round else ""
            out.append(f"{r.outcome}{at}: {r.config}: {r.reason}")
    for r in rows:
        if r.compiled_by:
            out.append(f"{r.config}: its graphs came from {r.compiled_by}'s cold compile (the "
                       f"same Inductor settings, one cache): cold {r.compile_s:.1f} s is that "
                       f"compile's; its own read of the cache took {r.compile_read_s:.1f} s")  # fmt: skip
    unsafe = dict.fromkeys(u for r in rows for u in r.unsafe.split("; ") if u)
    return out + [f"note: {u}" for u in unsafe]
