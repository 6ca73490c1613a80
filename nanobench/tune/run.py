"""One `nanobench tune` run: the space built, the race run, its answer written and reported.

What it is: `run_tune(spec, status, json_mode=, check=)`, the command's work once its spec
validated: the space (each knob held against the installed torch; its size, what was set
aside and the estimate said before any worker), the model resolved as `compile` resolves it,
the race (`bench.Race`, its progress a line a round), then `tune.csv` (a row per
configuration), `tune-rounds.csv` (who was alive each round), `tune-race.png`, `tune-env.json`,
the gates `--check` reads and the table or the JSON document.
What it is not: the options (`tune.command`), the race or its rule, or the table.
Invariant: nothing reaches a worker before the space and the model are checked; an interrupt
keeps the rows and rounds measured so far on disk.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from functools import partial

from nanobench.harness.cli.console import interrupted, stdout_console
from nanobench.harness.cli.validate import out_dir
from nanobench.harness.runs.env_record import collect_env, write_env
from nanobench.harness.runs.eta import announce
from nanobench.harness.runs.export import export_tune
from nanobench.harness.runs.gates import Gate
from nanobench.harness.runs.output import finish
from nanobench.harness.runs.rows import as_dicts, columns
from nanobench.harness.runs.samples import sample_columns, sample_rows
from nanobench.harness.statistics.verdicts import INCONCLUSIVE, PASS
from nanobench.tune import history as tune_history
from nanobench.tune.bench import DROPPED, EQUIVALENT, ONE_LEFT, Race, RaceResult
from nanobench.tune.paste import paste_lines
from nanobench.tune.race import Look
from nanobench.tune.rows import ConfigRow, RoundRow, answer
from nanobench.tune.space import OFF, Config, Space, build_space, knob_settings
from nanobench.tune.spec import TuneSpec
from nanobench.tune.words import decision_lines, phases_line, reason_lines, space_lines, stop_line
from reports.csvio import write_rows
from reports.tune import draw_race, render_tune

DEFAULT = Config("dynamic")  # what --check holds against the best: plain torch.compile


def set_up(spec: TuneSpec, status) -> tuple[Space, dict, str]:
    """The space and each side's worker spec, all checked; the run's dtype."""
    from nanobench.compile.sides import resolve

    load = spec.load()
    space = build_space(spec.modes, spec.knobs, spec.max_knobs, device=spec.device,
                        backend=spec.backend, settings=knob_settings, graphs=spec.graphs(),
                        top=load.top)  # fmt: skip
    compiled = spec.compile_spec()
    dtype, directory = resolve(compiled, len(space.configs))
    # no guard-kind probe or dry run: the race reads the timings and outcomes alone
    workers = {c.side: replace(replace(compiled, knob=c.knobs).worker(directory, dtype),
                               probe=False, batch_mix=load.mix if load.batches else (),
                               capture_sizes=c.sizes) for c in space.configs}  # fmt: skip
    if not getattr(status, "quiet", False):
        sys.stderr.write("".join(f"{line}\n" for line in space_lines(space)))
    return space, workers, dtype


def opened_history(spec: TuneSpec, space: Space, workers: dict) -> tuple:
    """(the store, each configuration's key, what earlier races lend), or Nones: --no-history."""
    from nanobench.harness.runs.history_store import RunHistory

    if not spec.history:
        return None, {}, {}
    store = RunHistory()
    facts = tune_history.keys(space, workers, spec.processes)
    return store, facts, tune_history.load(store, facts)


def history_lines(store, lent: dict, recorded: int) -> list[str]:
    """What the race read of the machine's earlier races and what it recorded; the store's
    problems, each said."""
    if store is None:
        return []
    runs = sum(c.runs for c in lent.values())
    return [f"history: {runs} earlier races' figures read, {recorded} configurations recorded "
            f"({store.root})"] + [f"history: {p}" for p in store.problems]  # fmt: skip


def progress(status, names: dict, r: int, found: RaceResult, seen: Look | None) -> None:
    alive = ", ".join(names[m] for m in found.alive())
    out = f"; dropped {', '.join(names[m] for m in seen.dropped)}" if seen and seen.dropped else ""
    status(f"round {r}: racing {alive}{out}")


def gates(found: RaceResult, rows: list[ConfigRow], margin: float) -> list[Gate]:
    """--check's: plain dynamic not decided slower than the best by more than the margin; the
    race decided."""
    out = []
    plain = next((r for r in rows if r.config == DEFAULT.name), None)
    if plain is not None and plain.outcome in ("survivor", DROPPED):
        dropped = plain.outcome == DROPPED
        out.append(Gate("dynamic within the margin of the best", not dropped,
                        plain.reason if dropped else f"not told from the best within {margin:g}"))  # fmt: skip
    decided = found.stop in (ONE_LEFT, EQUIVALENT)
    out.append(Gate("race decided", decided, f"stopped: {found.stop}",
                    PASS if decided else INCONCLUSIVE))  # fmt: skip
    return out


def written(spec: TuneSpec, space: Space, found: RaceResult, where, lent=None) -> tuple:
    """The answer derived and on disk: (config rows, round rows, decision, paste lines)."""
    rows, rounds, decided, _ = answer(found, space, spec.steps_per_start, spec.margin, lent)
    rows += [ConfigRow(s.config.name, s.config.mode, s.config.knobs,
                       "merged" if s.into is not None else "pruned", s.reason,
                       capture_sizes=",".join(map(str, s.config.sizes)))
             for s in space.set_aside]  # fmt: skip
    write_rows(where / "tune.csv", as_dicts(rows), columns(ConfigRow))
    write_rows(where / "tune-rounds.csv", as_dicts(rounds), columns(RoundRow))
    # every timed step by configuration, as compare reads a command's samples
    names = {c.member: c.name for c in space.configs}
    steps = [replace(w, system=names[w.member], side="") for w in found.windows]
    write_rows(where / "tune-samples.csv", sample_rows(steps, "config"), sample_columns("config"))
    chosen = next((c for c in space.configs if decided and c.name == decided.choice), None)
    paste = paste_lines(chosen, spec.backend) if chosen else []
    return rows, rounds, decided, paste


def run_tune(spec: TuneSpec, status, *, json_mode: bool, check: bool) -> int:
    """Build the space, race it, write and report the answer; the gates' exit code."""
    where = out_dir(spec.out)
    space, workers, dtype = set_up(spec, status)
    record = collect_env(spec.threads, sys.argv)
    write_env(where / "tune-env.json", record)
    modes = tuple(c.mode for c in space.configs if c.mode != OFF)
    timer = announce("tune", spec, partial(spec.plan, len(space.configs), modes), status)
    names = {c.member: c.name for c in space.configs}
    store, facts, lent = opened_history(spec, space, workers)
    race = Race(spec, space, workers, dtype, status, partial(progress, status, names),
                on_first=timer.say)  # fmt: skip
    started = time.monotonic()
    try:
        found = race.run()
    except KeyboardInterrupt:
        written(spec, space, race.found, where)
        raise interrupted(len(race.found.rows), len(race.found.windows), [],
                          where / "tune.csv", where / "tune-rounds.csv") from None  # fmt: skip
    total_s = time.monotonic() - started
    rows, rounds, decided, paste = written(spec, space, found, where, lent)
    recorded = tune_history.record(store, facts, found) if store else 0
    load = spec.load()
    head = f"tune: {dtype} {spec.model if not spec.target else spec.target} on {spec.device}, " \
           f"{load.line()}, steps {spec.steps} a window"  # fmt: skip
    png = draw_race(as_dicts(rounds), where / "tune-race.png", head)
    lines = (space_lines(space) + ([f"workload: {load.line()}: a step's ms is the mix's mean"]
                                   if load.batches else [])
             + stop_line(found, spec, names) + [phases_line(found, total_s)]
             + decision_lines(decided, paste, rows) + reason_lines(rows)
             + history_lines(store, lent, recorded))  # fmt: skip
    outputs = {"csv": str(where / "tune.csv"), "rounds": str(where / "tune-rounds.csv"),
               "samples": str(where / "tune-samples.csv"), "env": str(where / "tune-env.json"),
               **({"png": str(png)} if png else {})}  # fmt: skip
    extra = {"race": {"stop": found.stop, "rounds": found.rounds, "seconds": round(total_s, 1),
                      **{k: round(v, 1) for k, v in asdict(found.phases).items()}},
             "decision": asdict(decided) if decided else None, "paste": paste, "lines": lines}  # fmt: skip
    if spec.export_json:
        outputs["export_json"] = str(export_tune(spec, dtype, as_dicts(rows), record, found.stop))
    off = next(r for r in rows if r.mode == OFF)
    code = finish("tune", as_dicts(rows), gates(found, rows, spec.margin), outputs,
                  json_mode=json_mode, check=check, failed=off.step_ms is None,
                  render=partial(render_tune, stdout_console(), as_dicts(rows), lines, head),
                  env=asdict(record), extra=extra)  # fmt: skip
    compile_s = sum(r.compile_s or 0.0 for r in found.rows.values())
    timer.done(code == 0, compile_s, found.rounds, found.phases.rounds_s)
    return code
