"""The decode comparison: the engine against transformers, each in its own fresh worker, in rounds.

What it is: the systems and their targets (`DecodeTargets`), `sweep_sides(...)` (each side's
`DecodeMember`s, one side alone or a before-and-after run's two in one fleet; `sweep` is one
side's) with --processes live
workers per system and for the roofline probe, through the run's fleet, `harness.workers.fleet`: the
first ones one at a time, the later side by side, then interleaved rounds of one timed
generation each, or of its slices when whole ones would not fit the budget, and of one floor
measurement for the probe, each member's rounds dealt over its workers). The rows' derived columns are `nanobench.decode.derive`, the
gates and their checks `nanobench.decode.gates`, the worker side `nanobench.decode.session`, the
floor's arithmetic and probes `nanobench.decode.roofline`.
What it is not: the CLI or the report, and not a unit test: its milliseconds are what this
machine measured in this run.
Invariant: every system runs the same checkpoint, seeded prompts and number of greedy steps on
the same thread count, and a ratio is paired by round, never across rounds. A system whose
tokens differ from the reference's is a failed row whatever its speed: it did not compute the
same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from nanobench.decode.roofline import PROBE
from nanobench.decode.rows import ProbeRow, RunSpec, SystemRow
from nanobench.harness.cli.choices import SYSTEMS  # noqa: F401 (the sweep's vocabulary)
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.rows import rebuild
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers import fleet as fleets
from nanobench.harness.workers.fleet import Fleet, Listener, first_failure, later_status
from nanobench.harness.workers.inductor_cache import fresh_dir
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Comparison, RoundPlan
from nanobench.harness.workers.slices import ROUNDS_IN_BUDGET, slices_for

# The module every decode worker runs (`python -m`): a system's session or the probe's.
WORKER = "nanobench.decode.session"
ENGINE_SYSTEMS = ("engine-eager", "engine-compiled", "engine-captured")
HF_SYSTEMS = ("hf-eager", "hf-static-compiled")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

# A step reading fewer weight bytes than this is host-bound on a CPU (launches and Python).
HOST_BOUND_BYTES = 256 << 20


@dataclass(frozen=True)
class DecodeTargets:
    """The step-time ratios a comparison promises; None: not a target for this model.

    The engine eager is never slower than transformers eager. A host-bound model (a few MB of
    weights) must show what compiling buys: the compiled engine well under transformers' own
    best CPU configuration (static cache, compiled forward). A bandwidth-bound model (GBs per
    step) is held to the memory floor instead: no compiler makes a weight read faster.
    """

    eager_vs_hf_eager: float | None = 1.0
    compiled_vs_hf_compiled: float | None = None
    best_vs_floor: float | None = None


HOST_BOUND = DecodeTargets(compiled_vs_hf_compiled=0.7)
BANDWIDTH_BOUND = DecodeTargets(best_vs_floor=1.5)
TARGETS: dict[str, DecodeTargets] = {"tiny": HOST_BOUND, "llama-3.2-1b": BANDWIDTH_BOUND}


def targets_for(model: str, weight_bytes: int) -> DecodeTargets:
    """A preset's own targets; a checkpoint directory's by the weight bytes a step reads."""
    if model in TARGETS:
        return TARGETS[model]
    return HOST_BOUND if weight_bytes < HOST_BOUND_BYTES else BANDWIDTH_BOUND


class DecodeGateFailed(RuntimeError):
    """A decode comparison whose promise broke: tokens differ, or a target ratio is missed."""


def transformers_can_load(directory) -> None:
    """The checkpoint's config resolves to a transformers model class and its shard index (when
    sharded) reads as transformers reads it, without reading weights."""
    # transformers takes seconds to import: an engine worker, which imports this module, never does.
    import transformers
    from transformers.utils.hub import get_checkpoint_shard_files

    try:
        config = transformers.AutoConfig.from_pretrained(str(directory), local_files_only=True)
    except Exception as e:  # whatever transformers raises, it means it cannot load this
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(
            f"--model {directory}: transformers cannot load its config ({first})"
        ) from None
    index = Path(directory) / "model.safetensors.index.json"
    if index.is_file():
        # The engine reads an index without `metadata`; transformers' from_pretrained does not,
        # and would fail inside its worker as a row's "KeyError: 'metadata'".
        try:
            get_checkpoint_shard_files(str(directory), str(index), local_files_only=True)
        except Exception as e:
            raise BadInput(
                f"--model {directory}: transformers cannot read {index.name} "
                f"({type(e).__name__}: {e})"
            ) from None
    archs = getattr(config, "architectures", None) or []
    if not archs or getattr(transformers, archs[0], None) is None:
        raise BadInput(
            f"--model {directory}: transformers has no model class for architectures {archs}"
        )


# -- the sweep --------------------------------------------------------------------------------


def worker_env(threads: int) -> tuple[dict[str, str], str]:
    """A cold Inductor cache per system (returned for cleanup), offline transformers."""
    cache = fresh_dir("decode")
    env = {
        "TORCHINDUCTOR_CACHE_DIR": cache,
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # A checkpoint directory never needs the network; a typo must not become a download.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env, cache


def comparisons(systems: list[str]) -> list[Comparison]:
    """The ratios the gates judge: each engine system over each transformers system, and
    each system over the floor when the probe is in the rounds."""
    found = [
        Comparison(f"{ours}/{theirs}", ours, theirs)
        for ours in systems
        if ours in ENGINE_SYSTEMS
        for theirs in systems
        if theirs in HF_SYSTEMS
    ]
    if PROBE in systems:
        found += [Comparison(f"{s}/floor", s, PROBE) for s in systems if s != PROBE]
    return found


@dataclass
class SystemPart:
    """One system of one side in the fleet (`fleet.Part`): its member ("hf-eager", or after
    "hf-eager" in a before-and-after run), what its workers run, their environment."""

    member: Member
    run: RunSpec
    env: dict[str, str]

    def payload(self, process: int) -> dict:
        return asdict(replace(self.run, system=self.member.name))

    def start(self, fleet: Fleet) -> dict:
        return fleet.first(self.member, self.payload(1), self.env, doing=WARMING)

    def first(self, ready: dict) -> SystemRow:
        row = rebuild(SystemRow, {"system": self.member.name, **ready})
        return replace(row, side=self.member.side)

    def first_window(self, row) -> None:
        return None  # a system's warm-up is untimed: its rounds are its windows

    def later(self, row, ready: dict, process: int):
        return replace(row, status=later_status(row.status, process, ready.get("status", "ok")))

    def closed(self, row: SystemRow, finals: list[dict], setup_s: float, later_s) -> SystemRow:
        return replace(closed_row(row, finals), setup_s=setup_s, later_setup_s=later_s)


class ProbePart(SystemPart):
    """A side's roofline probe: a member like any system, each round measuring the floor."""

    def start(self, fleet: Fleet) -> dict:
        return fleet.first(self.member, self.payload(1), self.env, doing=PROBING)

    def first(self, ready: dict) -> ProbeRow:
        return replace(probe_row(ready), side=self.member.side)

    def closed(self, row: ProbeRow, finals: list[dict], setup_s: float, later_s) -> ProbeRow:
        return closed_probe(row, finals)


def comparisons_of(members: list[Member], sides: Sides) -> list[Comparison]:
    """Each side's own ratios (`comparisons`, between its own members; a knob side's to
    plain's floor and transformers, which it borrows) and, per compared pair of sides, each
    system's other / base: every ratio the stop rule reads."""
    found = []
    for side in dict.fromkeys(m.side for m in members):
        own = [m.name for m in members if m.side == side]
        lent = {m.name: m for m in sides[side].lent() if m in members}
        names = {n: lent.get(n, Member(side, n)) for n in own + list(lent)}
        found += [
            Comparison(str(Member(side, c.name)), names[c.numerator.name],
                       names[c.denominator.name])
            for c in comparisons(list(names)) if c.numerator.name in own
        ]  # fmt: skip
    based = [(m, Member(sides.base_of(m.side) or "", m.name)) for m in members if m.name != PROBE]
    changed = [(m, b) for m, b in based if sides.base_of(m.side) is not None and b in members]
    # every system's step change holds together with the others' (`vs.changes`)
    return found + [Comparison(sides.ratio_name(m, b), m, b, len(changed)) for m, b in changed]


def sweep_sides(
    runs: dict[str, RunSpec],
    members: list[Member],
    plan: RoundPlan,
    *,
    sides: Sides,
    timeout: float,
    processes: int,
    listener: Listener,
    on_status: Callable[[str], None],
    history: dict | None = None,
) -> None:
    """Each side's probe and `processes` live workers per system (`fleet.sweep`), then
    interleaved rounds, round r of every member in its worker (r - 1) mod processes, until
    every gate is decided or the intervals are tight. Two sides (`runs` "before" and "after")
    are one fleet: every member of both takes turns each round. `members` are every side's,
    probes among them (a --try knob side has none: it borrows plain's); `sides` the run's
    comparison.

    The probe is a member like any system: each round it measures the floor again, so the
    floor's own spread is in every ratio to it. A system's set-up facts (compile seconds,
    frames) are its first worker's, set up alone, one member after another; a later worker
    shares the first's Inductor cache directory. Each row (a system's, a side's probe's) goes
    to the listener as it comes. `history` (by comparison name) lends the stop rule each
    ratio's earlier runs on this machine.
    """
    run = next(iter(runs.values()))

    def slices(rows: dict) -> int:
        ready = [r for m, r in rows.items() if m.name != PROBE and r.status == "ok"]
        return round_slices(ready, run, plan, on_status)

    with Fleet(WORKER, timeout, run.threads, on_status, sides.envs()) as fleet:
        parts = [
            (ProbePart if m.name == PROBE else SystemPart)(
                m, runs[m.side], system_env(fleet, run.threads)
            )
            for m in members
        ]
        # In the rounds each side's probe goes after its systems, as it always has.
        order = lambda m: (sides.order(m), m.name == PROBE)  # noqa: E731
        ratios = partial(comparisons_of, sides=sides)
        fleets.sweep(fleet, parts, plan, processes, listener, ratios, slices=slices,
                     order=order, history=history)  # fmt: skip


PROBING = "bandwidth and GEMM probes in a fresh process"
WARMING = "building and warming up in a fresh process"


def system_env(fleet: Fleet, threads: int) -> dict[str, str]:
    """A member's workers' environment; its cold cache directory goes when the fleet does."""
    env, cache = worker_env(threads)
    fleet.clean(cache)
    return env


def probe_row(answer: dict) -> ProbeRow:
    return rebuild(ProbeRow, {"system": PROBE, **answer})


def closed_probe(probe: ProbeRow, finals: list[dict]) -> ProbeRow:
    """The probe's row once its workers closed: the first's final row (rates over its rounds),
    the first failure's status."""
    if probe.status != "ok" or not finals:
        return probe
    failed = first_failure([str(f.get("status", "ok")) for f in finals])
    return (
        replace(probe, status=failed) if failed else replace(probe_row(finals[0]), side=probe.side)
    )


def round_slices(ready: list[SystemRow], spec: RunSpec, plan: RoundPlan, on_status) -> int:
    """How many slices each generation is cut into so that 8 rounds fit the budget, said up
    front. A generation's seconds are its untimed warm-up's, less what compiling took there."""
    round_s = sum(max(0.0, (r.warmup_s or 0.0) - (r.compile_s or 0.0)) for r in ready)
    slices = slices_for(round_s, plan.budget_s, spec.steps - 1)
    if slices > 1:
        on_status(
            f"a round of whole generations takes about {round_s:.1f} s: {ROUNDS_IN_BUDGET} would "
            f"not fit --budget-s {plan.budget_s:g}, so each generation is cut into {slices} "
            "slices the systems take turns at (each slice a paired round)"
        )
    return slices


def closed_row(row: SystemRow, finals: list[dict]) -> SystemRow:
    """A system's row once every worker closed: the first worker's final row; builds while
    timed summed over the workers; deterministic only when every worker repeated itself and
    made the first's tokens; the first failure's status."""
    if row.status != "ok":
        return row
    done = [rebuild(SystemRow, {**asdict(row), **final}) for final in finals]
    failed = first_failure([r.status for r in done])
    if failed:
        return replace(row, status=failed)
    first = done[0]
    return replace(
        first,
        builds_measured=sum(r.builds_measured or 0 for r in done),
        deterministic=all(r.deterministic and r.tokens == first.tokens for r in done),
    )
