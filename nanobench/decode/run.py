"""One `nanobench decode` run: check the model on both sides, sweep the systems, report.

What it is: `run_decode(spec, status, ...)`: validation that needs the model (its length, that
transformers can load it: a GGUF is converted once for transformers), the `RunSpec` every worker
is handed, the interleaved sweep (`bench.sweep`) with every row and timed step written as it
comes (`Progress`), then the samples' text, the diagram, the table and the exit code; and the
rows as written (`public`, `CSV_COLUMNS`).
What it is not: the command's options or spec (`command.py`), the workers (`session.py`) or
the statistics (`derive.derive`, `nanobench.harness.stats`).
Invariant: a Ctrl-C keeps every finished row and timed step on disk; the load before and after
the run is in the env record, and a row timed on a crowded machine says so.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial

from engine.gguf import find_gguf
from engine.sources import materialize_gguf
from nanobench.decode import bench  # bench.sweep looked up per run: the tests' seam
from nanobench.decode import history as decode_history
from nanobench.decode.bench import DTYPE_BYTES, HF_SYSTEMS, transformers_can_load
from nanobench.decode.derive import derive
from nanobench.decode.gates import gates
from nanobench.decode.roofline import kv_read_bytes, step_flops, weight_bytes
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec, SystemRow
from nanobench.decode.samples import sample_text, tokenizer_for
from nanobench.decode.spec import DecodeSpec
from nanobench.decode.vs import changes, member_name
from nanobench.harness import load  # looked up per run: the tests' seam
from nanobench.harness.change import Change, comparison_gates, side_samples, side_windows
from nanobench.harness.console import interrupted, say_warning, stdout_console
from nanobench.harness.env_record import collect_env, with_load, write_env
from nanobench.harness.errors import BadInput
from nanobench.harness.eta import announce
from nanobench.harness.export import export_decode
from nanobench.harness.history_store import RunHistory, settle
from nanobench.harness.output import finish
from nanobench.harness.rounds import SAMPLE_COLUMNS, describe, look_confidence, sample_rows
from nanobench.harness.rows import as_dicts, columns
from nanobench.harness.validate import (
    device_option,
    dtype_option,
    fits_option,
    model_option,
    out_dir,
    out_file,
)
from nanobench.harness.verdicts import INCONCLUSIVE
from reports.change import DECODE_PANELS, draw_compare, render_changes
from reports.csvio import write_rows
from reports.decode import draw_decode, render_decode
from reports.style import title

CSV_COLUMNS = [f.name for f in fields(DecodeRow) if f.name != "tokens"]


def add_samples(rows: list[DecodeRow], directory) -> list[DecodeRow]:
    """Each row with its first generated sequence as text, when the checkpoint ships a tokenizer."""
    tokenizer = tokenizer_for(directory)
    if tokenizer is None:
        return rows
    return [replace(r, sample=sample_text(tokenizer, r.tokens[0])) if r.tokens else r for r in rows]


def public(rows: list[DecodeRow]) -> list[dict]:
    """Rows as written: the token lists stay in the worker's answer, their digest goes out."""
    return [{k: v for k, v in asdict(r).items() if k != "tokens"} for r in rows]


def run_spec(spec: DecodeSpec, status) -> tuple[RunSpec, str]:
    """Every check that needs the model, then what each worker is handed; (run, its directory)."""
    spec.validate()
    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    device_option(spec.device)
    directory, config = model_option(spec.model)
    # Every worker of every system holds its own copy of the weights for the whole run, and
    # every probe worker a weight-sized tensor to read.
    # (A before-and-after run holds both sides': counted once, by the after side's spec.)
    sides = 2 if spec.compared else 1
    copies = (len(spec.systems) + 1) * spec.processes * sides
    fits_option(config, dtype, spec.device, copies=copies)
    if spec.prompt_len + spec.steps > config.max_position_embeddings:
        raise BadInput(
            f"--prompt-len {spec.prompt_len} + --steps {spec.steps} exceed the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    if any(s in HF_SYSTEMS for s in spec.systems):
        if find_gguf(directory) is not None:
            # transformers reads a HF directory, not a GGUF: both sides get the converted one.
            status("converting the GGUF for transformers (once)")
            directory = materialize_gguf(directory)
        status("checking that transformers can load the checkpoint")
        transformers_can_load(directory)
    elem = DTYPE_BYTES[dtype]
    run = RunSpec(
        model=str(directory),
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        max_model_len=spec.max_model_len or spec.prompt_len + spec.steps,
        width_multiple=spec.width_multiple,
        device=spec.device,
        dtype=dtype,
        threads=spec.threads,
        backend=spec.backend,
        hf_attn=spec.hf_attn,
        weight_bytes=weight_bytes(config, elem),
        kv_bytes=kv_read_bytes(config, elem, spec.rows, spec.prompt_len, spec.steps),
        step_flops=step_flops(config, spec.rows, spec.prompt_len, spec.steps),
    )
    return run, directory


@dataclass
class Progress:
    """What the sweep has produced so far, written to disk after every row and round."""

    spec: DecodeSpec
    runs: dict[str, RunSpec]  # by side: "" alone, before and after with --vs-model/--vs-dtype
    csv_path: object
    samples_path: object
    note: str = ""
    done: dict[str, SystemRow] = field(default_factory=dict)  # by member name
    windows: list = field(default_factory=list)
    probes: dict[str, ProbeRow] = field(default_factory=dict)  # by side
    # each (system, ratio column)'s earlier runs on this machine: a plain run's, with --history
    history: dict = field(default_factory=dict)

    def rows(self, windows: list, level: float) -> list[DecodeRow]:
        """Each side's rows derived from its own windows and probe, as a run of its own."""
        out = []
        for side, run in self.runs.items():
            mine = [r for r in self.done.values() if r.side == side]
            timed = side_windows(windows, side)
            out += derive(mine, run, self.probes.get(side), timed, level, self.history)
        return out

    def on_probe(self, probe: ProbeRow) -> None:
        self.probes[probe.side] = probe

    def level(self) -> float:
        plan = self.spec.round_plan()
        return look_confidence(plan, max((w.round for w in self.windows), default=0))

    def changes(self, rows: list[DecodeRow]) -> list:
        return changes(rows, self.windows, self.level())

    def save(self) -> list[DecodeRow]:
        rows_now = self.rows(self.windows, self.level())
        # every row timed while the machine was crowded says so (seen before timing or after)
        rows_now = [replace(r, load_note=self.note) for r in rows_now] if self.note else rows_now
        write_rows(self.csv_path, public(rows_now), CSV_COLUMNS)
        if self.spec.compared:
            write_rows(self.samples_path, side_samples(self.windows, "system"),
                       ["side", *SAMPLE_HEADER])  # fmt: skip
            changes_path = self.csv_path.with_name("decode-changes.csv")
            write_rows(changes_path, as_dicts(self.changes(rows_now)), columns(Change))
        else:
            write_rows(self.samples_path, sample_rows(self.windows, "system"), SAMPLE_HEADER)
        return rows_now

    def on_row(self, row: SystemRow) -> None:
        self.done[member_name(row)] = row
        self.save()

    def gates(self, rows: list[DecodeRow], found: list | None = None) -> list:
        """A plain run's gates; a comparison's: its failed rows and the columns its user named."""
        if not self.spec.compared:
            return gates(self.spec, rows)
        failed = {f"{r.side} {r.system}": r.status for r in rows if r.status != "ok"}
        return comparison_gates(failed, self.spec, found or [])

    def decided(self, timed: list, level: float) -> bool:
        """Every gate of the run pass or fail at this look's level: no round can change it."""
        rows = self.rows(timed, level)
        found = changes(rows, timed, level) if self.spec.compared else None
        return all(g.verdict != INCONCLUSIVE for g in self.gates(rows, found))


SAMPLE_HEADER = ["system", *SAMPLE_COLUMNS]


def runs_dtype(progress: Progress, side: str) -> str:
    return progress.runs[side].dtype


def run_specs(spec: DecodeSpec, status, check: bool) -> tuple[dict[str, RunSpec], str]:
    """Each side's RunSpec ("" alone; before and after), and the after side's directory."""
    if spec.compared and check and not (spec.no_more or spec.no_slower):
        raise BadInput("--check on a comparison gates the columns you name: give --no-more "
                       "and/or --no-slower")  # fmt: skip
    runs, directory = {}, ""
    for side, side_spec in spec.sides().items():
        try:
            runs[side], directory = run_spec(side_spec, status)
        except BadInput as e:
            if side != "before":
                raise
            # The before side's model and dtype came from --vs-model and --vs-dtype.
            said = str(e).replace("--model", "--vs-model").replace("--dtype", "--vs-dtype")
            raise BadInput(said) from None
    return runs, directory


def run_decode(spec: DecodeSpec, status, *, json_mode: bool, check: bool) -> int:
    """Validate everything, then the sweep; the exit code `finish` picks."""
    out_file(spec.export_json, "--export-json")
    runs, directory = run_specs(spec, status, check)
    run = runs.get("after", runs.get(""))
    target = out_dir(spec.out)
    record = collect_env(spec.threads, sys.argv)
    before, note = load.look_before_timing(record.threads)
    record = with_load(record, before)
    env_path = write_env(target / "decode-env.json", record)
    progress = Progress(spec, runs, target / "decode.csv", target / "decode-samples.csv", note)
    store = RunHistory() if spec.history and not spec.compared else None
    facts = decode_history.keys(run, spec.processes, spec.systems) if store is not None else {}
    if store is not None:
        progress.history = decode_history.load(store, facts)

    def on_round(r: int, found: dict) -> None:
        progress.save()
        status(f"round {r}: " + "; ".join(describe(n, i) for n, i in found.items()))

    timer = announce("decode", spec, status)  # the estimate's line, before any worker
    try:
        system_rows, probes = sweep(
            runs,
            spec.systems,
            spec.round_plan(),
            timeout=spec.timeout,
            processes=spec.processes,
            decided=progress.decided,
            on_status=status,
            on_row=progress.on_row,
            on_window=progress.windows.append,
            on_round=on_round,
            on_probe=progress.on_probe,
            history=decode_history.by_comparison(progress.history),
        )
    except KeyboardInterrupt:
        progress.save()
        missing = [f"{side} {s}".strip() for side in runs for s in spec.systems
                   if f"{side} {s}".strip() not in progress.done]  # fmt: skip
        paths = progress.csv_path, progress.samples_path
        raise interrupted(len(progress.done), len(progress.windows), missing, *paths) from None
    progress.done.update((member_name(row), row) for row in system_rows)
    progress.probes.update(probes)
    after = load.sample_load()
    record = with_load(record, after=after)
    write_env(env_path, record)
    progress.note = progress.note or load.crowded_note(record.threads, after)
    rows_out = add_samples(progress.save(), directory)
    probe = probes.get("after", probes.get(""))
    used = settle_history(store, facts, rows_out, probes, progress)
    timer.done(all(r.status == "ok" for r in rows_out))
    return report(spec, run, rows_out, probe, progress, record, env_path, json_mode, check, used)


def settle_history(store, facts, rows_out, probes, progress) -> str | None:
    """A sound run's ratios recorded; what it read and recorded written beside its CSV (the
    file's path); the store's problems said, one line each (`settle`)."""
    if store is None:
        return None
    statuses = [r.status for r in rows_out] + [p.status for p in probes.values() if p]
    path = settle(
        store, progress.csv_path.parent / "decode-history.json", statuses,
        progress.gates(rows_out, []),
        partial(decode_history.record, store, facts, rows_out, progress.windows),
        decode_history.use(facts, progress.history, rows_out), say_warning,
    )  # fmt: skip
    return path


def sweep(runs: dict[str, RunSpec], systems, plan, **kw) -> tuple[list[SystemRow], dict]:
    """The sweep: one side through `bench.sweep` (the tests' seam), two through `sweep_sides`."""
    if "" in runs:
        rows, probe = bench.sweep(runs[""], systems, plan, **kw)
        return rows, {"": probe}
    return bench.sweep_sides(runs, systems, plan, **kw)


def report(spec, run, rows_out, probe, progress, record, env_path, json_mode, check, used) -> int:
    """The diagram, the table or the JSON, and the exit code."""
    found_changes = progress.changes(rows_out) if spec.compared else []
    found = progress.gates(rows_out, found_changes)
    failed = any(r.status != "ok" or r.tokens_match is False for r in rows_out)
    what = "decode"
    if spec.compared:
        before = spec.sides()["before"]
        what = (f"decode of {spec.model} {run.dtype} (after) vs {before.model} "
                f"{runs_dtype(progress, 'before')} (before)")  # fmt: skip
    heading = title(
        what,
        model=None if spec.compared else spec.model,
        device=spec.device,
        dtype=run.dtype,
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        threads=spec.threads or "default",
        interleaved_rounds=max((r.rounds for r in rows_out), default=0),
        processes=spec.processes,
    )
    where = progress.csv_path.parent
    outputs = {"csv": str(progress.csv_path), "samples": str(progress.samples_path)}
    if used:
        outputs["history"] = used
    if spec.compared:
        outputs["changes"] = str(where / "decode-changes.csv")
        png = draw_compare(public(rows_out), where / "compare.png", heading, DECODE_PANELS)
        render = partial(render_changes, stdout_console(), found_changes, found, heading)
    else:
        png = draw_decode(rows_out, where / "decode.png", heading)
        render = partial(render_decode, stdout_console(), rows_out, found, heading, probe)
    outputs["png"] = str(png)
    if spec.export_json:
        outputs["export_json"] = str(export_decode(spec, run.dtype, rows_out, record))
    return finish(
        "decode",
        public(rows_out),
        found,
        {**outputs, "env": str(env_path)},
        json_mode=json_mode,
        check=check,
        render=render,
        failed=failed,
        env=asdict(record),
        extra={"changes": as_dicts(found_changes)} if spec.compared else None,
    )
