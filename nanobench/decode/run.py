"""One `nanobench decode` run: check the model on both sides, sweep the systems, report.

What it is: `run_decode(spec, status, ...)`: validation that needs the model (its length, that
transformers can load it: a GGUF is converted once for transformers), the `RunSpec` every worker
is handed, then one measured run (`harness.measured_run`) around the interleaved sweep
(`bench.sweep_sides`); `DecodeKind` is what decode brings to it: each side's rows derived from
its systems, its probe and its windows, the samples' text, its changes, gates and report; and
the rows as written (`public`, `CSV_COLUMNS`).
What it is not: the command's options or spec (`command.py`), the workers (`session.py`), the
statistics (`derive.derive`, `nanobench.harness.stats`) or the run's files, env record,
interrupt and exit code (`MeasuredRun`).
Invariant: a system whose tokens differ from its side's reference fails the run; the load
before and after the run is in the env record, and a row timed on a crowded machine says so.
"""

from __future__ import annotations

from dataclasses import asdict, fields, replace
from functools import partial

from engine.gguf import find_gguf
from engine.sources import materialize_gguf
from nanobench.decode import bench  # bench.sweep looked up per run: the tests' seam
from nanobench.decode import history as decode_history
from nanobench.decode.bench import DTYPE_BYTES, HF_SYSTEMS, transformers_can_load
from nanobench.decode.derive import derive
from nanobench.decode.gates import gates
from nanobench.decode.roofline import PROBE, kv_read_bytes, step_flops, weight_bytes
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec
from nanobench.decode.samples import sample_text, tokenizer_for
from nanobench.decode.spec import DecodeSpec
from nanobench.decode.vs import changes
from nanobench.harness import load  # looked up per run: the tests' seam
from nanobench.harness.console import say_warning, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.export import export_decode
from nanobench.harness.history_store import RunHistory, settle
from nanobench.harness.measured_run import MeasuredRun, RunKind, for_each_side
from nanobench.harness.member import Member
from nanobench.harness.validate import device_option, dtype_option, fits_option, model_option
from reports.change import DECODE_PANELS, draw_compare, render_changes
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


class DecodeKind(RunKind):
    """What decode brings to a measured run: members are (side, system), each side's probe
    one of them."""

    command, label, row_type = "decode", "system", DecodeRow

    def __init__(self, spec: DecodeSpec, runs: dict[str, RunSpec], directory) -> None:
        super().__init__(spec)
        self.runs, self.directory = runs, directory
        self.run = runs.get("after", runs.get(""))
        self.store = RunHistory() if spec.history and not spec.compared else None
        self.facts: dict = {}

    def derive(self, side, rows, windows, level, history) -> list[DecodeRow]:
        probe = next((r for r in rows if isinstance(r, ProbeRow)), None)
        systems = [r for r in rows if not isinstance(r, ProbeRow)]
        return derive(systems, self.runs[side], probe, windows, level, history)

    def changes(self, rows, windows, level) -> list:
        return changes(rows, windows, level)

    def gates(self, rows) -> list:
        return gates(self.spec, rows)

    def public(self, rows, sided: bool) -> list[dict]:
        return public(rows)

    def csv_columns(self, sided: bool) -> list[str]:
        return CSV_COLUMNS

    def failed(self, rows) -> bool:
        return any(r.status != "ok" or r.tokens_match is False for r in rows)

    def finished(self, rows) -> list[DecodeRow]:
        return add_samples(rows, self.directory)

    def heading(self, rows) -> str:
        return heading(self.spec, self.runs, rows)

    def report(self, run: MeasuredRun, rows, found, changed, head):
        if run.sided:
            png = draw_compare(public(rows), run.where / "compare.png", head, DECODE_PANELS)
            return png, partial(render_changes, stdout_console(), changed, found, head)
        probe = run.done.get(Member("", PROBE))
        png = draw_decode(rows, run.where / "decode.png", head)
        return png, partial(render_decode, stdout_console(), rows, found, head, probe)

    def export(self, rows, record):
        return export_decode(self.spec, self.run.dtype, rows, record)

    def open_history(self, run: MeasuredRun) -> dict | None:
        """A plain run's earlier ratios on this machine; what the stop rule borrows of them."""
        if self.store is None:
            return None
        self.facts = decode_history.keys(self.run, self.spec.processes, self.spec.systems)
        run.history = decode_history.load(self.store, self.facts)
        return decode_history.by_comparison(run.history)

    def settle_history(self, run: MeasuredRun, rows, found) -> str | None:
        """A sound run's ratios recorded; what it read and recorded written beside its CSV;
        the store's problems said, one line each (`settle`)."""
        if self.store is None:
            return None
        probes = [r for r in run.done.values() if isinstance(r, ProbeRow)]
        statuses = [r.status for r in rows] + [p.status for p in probes]
        return settle(
            self.store, run.path("-history", "json"), statuses, self.gates(rows),
            partial(decode_history.record, self.store, self.facts, rows, run.windows),
            decode_history.use(self.facts, run.history, rows), say_warning,
        )  # fmt: skip


def run_specs(spec: DecodeSpec, status) -> tuple[dict[str, RunSpec], str]:
    """Each side's RunSpec ("" alone; before and after), and the after side's directory."""
    renames = {"--model": "--vs-model", "--dtype": "--vs-dtype"}
    found = for_each_side(spec.sides(), partial(run_spec, status=status), renames)
    return {side: run for side, (run, _) in found.items()}, next(reversed(found.values()))[1]


def run_decode(spec: DecodeSpec, status, *, json_mode: bool, check: bool) -> int:
    """Validate everything, then the sweep in rounds, report; the exit code `finish` picks."""
    runs, directory = run_specs(spec, status)
    run = MeasuredRun(DecodeKind(spec, runs, directory), status, check, spec.round_plan(),
                      spec.compared)  # fmt: skip
    run.open(load.look_before_timing)
    lent = run.kind.open_history(run)
    planned = [Member(side, s) for side in runs for s in spec.systems]

    def measure() -> None:
        bench.sweep_sides(runs, spec.systems, spec.round_plan(), timeout=spec.timeout,
                          processes=spec.processes, listener=run, on_status=status,
                          history=lent)  # fmt: skip

    return run.run(measure, planned, json_mode=json_mode,
                   crowded=lambda t, a: load.crowded_note(t, a))  # fmt: skip


def heading(spec: DecodeSpec, runs: dict[str, RunSpec], rows: list[DecodeRow]) -> str:
    """The table's and the figure's title: what ran, on what, how often."""
    run = runs.get("after", runs.get(""))
    what = "decode"
    if spec.compared:
        before = spec.sides()["before"]
        what = (f"decode of {spec.model} {run.dtype} (after) vs {before.model} "
                f"{runs['before'].dtype} (before)")  # fmt: skip
    return title(
        what,
        model=None if spec.compared else spec.model,
        device=spec.device,
        dtype=run.dtype,
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        threads=spec.threads or "default",
        interleaved_rounds=max((r.rounds for r in rows), default=0),
        processes=spec.processes,
    )
