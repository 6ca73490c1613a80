"""The space `tune` races: compiled modes x knob sets, and on CUDA x capture lists, with eager
`off` as the reference.

What it is: `Config` (one configuration: a mode, a `--try` side's knobs ("" none) and a
capture list ("" none, `tune.workload`); its member in the fleet, its name as people read it), `SetAside` (a configuration that never
reaches a worker: pruned with the reason torch or the backend refuses it, or merged into one
that is the same configuration under another name), `Space` (what races, in order, and what
was set aside) and `build_space(...)`, which makes it from the options.
What it is not: the race (`tune.race`, `tune.bench`) or a knob's meaning (`harness.step.knobs`).
Invariant: pure: a knob set's settings come from the `settings` function the caller hands in
(the installed torch's, `knob_settings`), so two names for one configuration race once, and
configurations with one mode, one set of Inductor settings and one set of shapes share a cold
cache (`shares`);
nothing here imports torch; `off` is always the first configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from nanobench.harness.cli.choices import REDUCE_OVERHEAD
from nanobench.harness.errors import BadInput
from nanobench.harness.step.knobs import PLAIN, parse_side
from nanobench.harness.workers.member import Member

OFF = "off"


@dataclass(frozen=True, order=True)
class Config:
    """One configuration: torch.compile in `mode` with the knobs of `knobs` ("" none)."""

    mode: str
    knobs: str = ""  # a --try side's text: knob names joined by "+"
    # a capture list's name (`tune.graphs`): the engine records a CUDA graph per size up front
    graphs: str = ""
    sizes: tuple[int, ...] = ()  # its batch sizes, ascending

    @property
    def side(self) -> str:
        """Its side in the fleet: the knob set, the capture list, or plain torch.compile."""
        return self.knobs or (f"graphs {self.graphs}" if self.graphs else PLAIN)

    @property
    def member(self) -> Member:
        return Member(self.side, self.mode)

    @property
    def name(self) -> str:
        """'off', 'dynamic', 'dynamic + cpp-wrapper + freezing', 'dynamic + graphs vllm'."""
        parts = [self.mode, *(self.knobs.split("+") if self.knobs else ())]
        return " + ".join(parts + ([f"graphs {self.graphs}"] if self.graphs else []))


@dataclass(frozen=True)
class SetAside:
    """A configuration no worker runs, and why: pruned, or merged into `into`."""

    config: Config
    reason: str
    into: Config | None = None  # the configuration it is the same as (merged), else pruned


@dataclass(frozen=True)
class Space:
    configs: tuple[Config, ...]  # what races, off first
    set_aside: tuple[SetAside, ...] = ()
    # (a configuration, the first one with its mode and Inductor settings): they generate the
    # same code where their graphs match, so they share one cold cache in the race
    shares: tuple[tuple[Config, Config], ...] = ()

    def cache_of(self, config: Config) -> Config:
        """The configuration whose cold cache `config`'s workers read and fill."""
        return dict(self.shares).get(config, config)

    @property
    def compiled(self) -> int:
        return len([c for c in self.configs if c.mode != OFF])

    def line(self) -> str:
        """'8 configurations race (7 compiled + off); 1 merged, 2 pruned'."""
        merged = len([s for s in self.set_aside if s.into is not None])
        pruned = len(self.set_aside) - merged
        aside = f"; {merged} merged, {pruned} pruned" if self.set_aside else ""
        return (f"{len(self.configs)} configurations race ({self.compiled} compiled + off)"
                f"{aside}")  # fmt: skip


def knob_sets(knobs: tuple[str, ...], max_knobs: int) -> list[str]:
    """The knob sets tried: listed sets as given (an entry with "+" makes the list one of sets),
    else every subset of up to `max_knobs` knobs, smallest first; "" (none) always first."""
    if any("+" in k for k in knobs):
        return ["", *dict.fromkeys(knobs)]
    found = [""]
    for size in range(1, max_knobs + 1):
        found += ["+".join(c) for c in combinations(knobs, size)]
    return found


def refused(config: Config, device: str, backend: str, top: int = 0) -> str:
    """Why torch or the backend would refuse (or ignore) a configuration; "" when it runs.
    `top`: the largest batch the workload presents (a capture list must cover it)."""
    knobs = parse_side(config.knobs) if config.knobs else ()
    if config.graphs and device != "cuda":
        return f"a capture list records CUDA graphs: needs --device cuda, not {device}"
    if config.graphs and config.sizes[-1] < top:
        return (f"its largest graph is {config.sizes[-1]} rows and the workload reaches {top}: "
                "those steps would run without a graph")  # fmt: skip
    if config.mode == REDUCE_OVERHEAD and device != "cuda":
        return f"reduce-overhead records CUDA graphs: needs --device cuda, not {device}"
    if config.mode == REDUCE_OVERHEAD and backend != "inductor":
        return f"reduce-overhead is Inductor's: --backend {backend} never records a graph"
    if config.mode == REDUCE_OVERHEAD and any(k.guard_filter for k in knobs):
        return "torch.compile takes a mode or options, not both, and a guard filter is an option"
    inductor = [k.name for k in knobs if any(s.config == "inductor" for s in k.settings)]
    if inductor and backend != "inductor":
        return f"{inductor[0]} sets Inductor, which --backend {backend} never runs"
    return ""


def cache_key(config: Config, settings: Callable[[str], frozenset]) -> tuple:
    """What a configuration's generated code follows: its mode, its Inductor settings and the
    shapes it compiles (a capture list's padded batches are shapes of its own)."""
    inductor = frozenset(x for x in settings(config.knobs) if x[0] == "inductor")
    return config.mode, inductor, config.sizes


def candidates(modes: tuple[str, ...], knobs: tuple[str, ...], max_knobs: int,
               graphs: tuple[tuple[str, tuple[int, ...]], ...]) -> list[Config]:  # fmt: skip
    """Each compiled mode with each knob set, then with each capture list (`graphs`: (name,
    sizes)) over plain torch.compile: the graphs record what the mode compiled."""
    compiled = [m for m in modes if m != OFF]
    return [Config(m, ks) for m in compiled for ks in knob_sets(knobs, max_knobs)] + [
        Config(m, "", name, sizes) for m in compiled for name, sizes in graphs
    ]


def build_space(modes: tuple[str, ...], knobs: tuple[str, ...], max_knobs: int, *, device: str,
                backend: str, settings: Callable[[str], frozenset], merge: bool = True,
                graphs: tuple[tuple[str, tuple[int, ...]], ...] = (),
                top: int = 0) -> Space:  # fmt: skip
    """`off`, then each compiled mode with each knob set and each capture list (`candidates`):
    the refused pruned, each one whose settings (`settings(knobs)`: what it sets, less torch's
    defaults, and its list's sizes) match an earlier one's in the same mode merged into it
    (unless `merge` is False). An empty race is `BadInput`."""
    configs, aside, seen, shares = [Config(OFF)], [], {}, {}
    for config in candidates(modes, knobs, max_knobs, graphs):
        why = refused(config, device, backend, top)
        if why:
            aside.append(SetAside(config, why))
            continue
        key = (config.mode, settings(config.knobs), config.sizes)
        if merge and key in seen:
            same = seen[key]
            aside.append(SetAside(config, f"sets what {same.name} sets", same))
            continue
        seen[key] = config
        configs.append(config)
        shares.setdefault(cache_key(config, settings), config)
    if len(configs) < 2:
        why = f": {aside[0].config.name}: {aside[0].reason}" if aside else ""
        raise BadInput(f"tune: no compiled configuration left to race{why}; expected --modes "
                       "with dynamic or static")  # fmt: skip
    leaders = {c: shares[cache_key(c, settings)] for c in configs[1:]}
    return Space(tuple(configs), tuple(aside), tuple((c, f) for c, f in leaders.items() if c != f))


def knob_settings(knobs: str) -> frozenset:
    """A knob set's settings as the installed torch reads them, those equal to torch's own
    default dropped, and its guard filter: two sets with the same are one configuration."""
    from nanobench.harness.step.knobs import _config, checked_side

    if not knobs:
        return frozenset()
    found = set()
    for s in checked_side(knobs):
        if _config(s.config)._config[s.key].default != s.value:
            found.add((s.config, s.key, repr(s.value)))
    found |= {("filter", k.guard_filter, "") for k in parse_side(knobs) if k.guard_filter}
    return frozenset(found)
