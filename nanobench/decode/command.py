"""`nanobench decode`: the engine against transformers, side by side, each in a fresh process.

What it is: `DecodeSpec` (every option's default and the rules across options), `gates(spec,
rows)` (tokens, warm-up and the target ratios, each judged on its 95% interval) and the command,
which validates, runs `decode_bench.sweep`, derives the rows and writes the CSV, figure and env.
What it is not: the measurement (`decode_bench`, `decode_session`) or the report
(`reports.decode`).
Invariant: every user mistake is refused before a worker starts; a row's columns are its type's.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, fields, replace

import typer

from nanobench.harness.common import (
    Gate,
    device_option,
    dtype_option,
    finish,
    fits_option,
    gate,
    model_option,
    out_dir,
    ratio_gate,
)
from nanobench.harness.console import interrupted, run_command, stdout_console
from nanobench.decode.bench import SYSTEMS
from nanobench.decode.rows import DecodeRow
from nanobench.harness.errors import BadInput
from nanobench.harness.options import (
    Backend,
    BudgetS,
    CheckOpt,
    Device,
    Dtype,
    HfAttention,
    JsonOpt,
    MaxModelLen,
    MaxRounds,
    Model,
    Names,
    Out,
    PromptLen,
    QuietOpt,
    RelCi,
    Rounds,
    Rows,
    Steps,
    Systems,
    Threads,
    Timeout,
    WidthMultiple,
)


@dataclass(frozen=True)
class DecodeSpec:
    """`nanobench decode`'s options: the one place their defaults live."""

    model: str = "tiny"
    systems: Names = Names(SYSTEMS)
    rows: int = 4
    prompt_len: int = 16
    steps: int = 128  # greedy tokens per row: the prefill's first, then decode steps
    rounds: int = 3
    max_rounds: int = 30
    rel_ci: float = 0.03
    budget_s: float = 120.0
    max_model_len: int = 0  # 0: prompt_len + steps
    width_multiple: int = 128  # engine-captured's width buckets
    device: str = "cpu"
    dtype: str = "auto"
    threads: int = 0
    backend: str = "inductor"
    hf_attn: str = "sdpa"
    timeout: int = 900
    out: str = "nanobench-out"

    def round_plan(self):
        from nanobench.harness.rounds import round_plan

        return round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)

    def validate(self) -> None:
        """Rules across options (ranges and choices are the options' own): BadInput, one line."""
        if self.steps < 2:
            raise BadInput(
                f"--steps {self.steps}: expected at least 2 (the prefill's token, then decode steps)"
            )
        if self.max_model_len and self.prompt_len + self.steps > self.max_model_len:
            raise BadInput(
                f"--prompt-len {self.prompt_len} + --steps {self.steps} exceed "
                f"--max-model-len {self.max_model_len}"
            )
        self.round_plan()


def gates(spec: DecodeSpec, rows: list[DecodeRow]) -> list[Gate]:
    """Tokens and warm-up gates for every row (pass/fail); the ratio gates the model's targets
    (`decode_bench.targets_for`) set, each judged on its 95% interval (pass/fail/inconclusive)."""
    from nanobench.decode.bench import (
        best_engine_row,
        check_nothing_built,
        check_tokens_match,
        ratio_of,
        targets_for,
    )

    targets = targets_for(spec.model, rows[0].weight_bytes if rows else 0)
    found = []
    by_name = {r.system: r for r in rows}
    for r in rows:
        if r.status != "ok":
            found.append(Gate(f"measured[{r.system}]", False, r.status))
            continue
        found.append(gate(f"tokens_match[{r.system}]", check_tokens_match, r))
        if r.compile_s is not None:
            found.append(gate(f"nothing_built_while_timed[{r.system}]", check_nothing_built, r))
    ratio_gates = (
        # gate name, our system, their system, column, target
        ("engine_eager_vs_hf_eager", "engine-eager", "hf-eager", "ratio_vs_hf_eager",
         targets.eager_vs_hf_eager),
        ("engine_compiled_vs_hf_compiled", "engine-compiled", "hf-static-compiled",
         "ratio_vs_hf_compiled", targets.compiled_vs_hf_compiled),
    )  # fmt: skip
    for name, ours, theirs, column, target in ratio_gates:
        if target is None or ours not in by_name or theirs not in by_name:
            continue
        what = f"{ours} / {theirs} step time"
        found.append(ratio_gate(name, what, ratio_of(by_name[ours], column), target))
    best = best_engine_row(rows)
    if targets.best_vs_floor is not None and best is not None:
        what = f"{best.system} (the fastest engine mode) / the {best.floor_bound} floor"
        interval = ratio_of(best, "ratio_vs_floor")
        found.append(ratio_gate("best_engine_vs_floor", what, interval, targets.best_vs_floor))
    return found


def add_samples(rows: list[DecodeRow], directory) -> list[DecodeRow]:
    """Each row with its first generated sequence as text, when the checkpoint ships a tokenizer."""
    from nanobench.decode.samples import sample_text, tokenizer_for

    tokenizer = tokenizer_for(directory)
    if tokenizer is None:
        return rows
    return [replace(r, sample=sample_text(tokenizer, r.tokens[0])) if r.tokens else r for r in rows]


def public(rows: list[DecodeRow]) -> list[dict]:
    """Rows as written: the token lists stay in the worker's answer, their digest goes out."""
    return [{k: v for k, v in asdict(r).items() if k != "tokens"} for r in rows]


CSV_COLUMNS = [f.name for f in fields(DecodeRow) if f.name != "tokens"]


def decode_command(
    model: Model = DecodeSpec.model,
    systems: Systems = DecodeSpec.systems,
    rows: Rows = DecodeSpec.rows,
    prompt_len: PromptLen = DecodeSpec.prompt_len,
    steps: Steps = DecodeSpec.steps,
    rounds: Rounds = DecodeSpec.rounds,
    max_rounds: MaxRounds = DecodeSpec.max_rounds,
    rel_ci: RelCi = DecodeSpec.rel_ci,
    budget_s: BudgetS = DecodeSpec.budget_s,
    max_model_len: MaxModelLen = DecodeSpec.max_model_len,
    width_multiple: WidthMultiple = DecodeSpec.width_multiple,
    device: Device = DecodeSpec.device,
    dtype: Dtype = DecodeSpec.dtype,
    threads: Threads = DecodeSpec.threads,
    backend: Backend = DecodeSpec.backend,
    hf_attn: HfAttention = DecodeSpec.hf_attn,
    timeout: Timeout = DecodeSpec.timeout,
    out: Out = DecodeSpec.out,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Decode the same prompts with the engine and with transformers, each system in its own fresh process, in interleaved rounds.

    The engine runs eager, compiled and captured; transformers eager and static cache +
    compiled. Reported: ms per step, tokens/s, prefill, compile seconds, peak RSS, token
    agreement, and each ratio to transformers and to a roofline floor measured in the same run.

    Example: nanobench decode --threads 1

    Example: nanobench decode --rows 4 --prompt-len 16 --steps 128 --threads 1 --rounds 5

    Example: nanobench decode --model smollm2-135m --systems engine-eager,hf-eager --json
    """
    spec = DecodeSpec(
        model, systems, rows, prompt_len, steps, rounds, max_rounds, rel_ci, budget_s,
        max_model_len, width_multiple, device, dtype, threads, backend, hf_attn, timeout, out,
    )  # fmt: skip
    with run_command(quiet) as status:
        code = run_decode(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def run_decode(spec: DecodeSpec, status, *, json_mode: bool, check: bool) -> int:
    """Validate everything, then the sweep; the exit code `finish` picks."""
    from nanobench.decode.bench import (
        DTYPE_BYTES,
        HF_SYSTEMS,
        derive,
        sweep,
        transformers_can_load,
    )
    from nanobench.decode.rows import ProbeRow, RunSpec, SystemRow
    from nanobench.harness.env_record import collect_env, write_env
    from nanobench.decode.roofline import kv_read_bytes, step_flops, weight_bytes
    from nanobench.harness.rounds import SAMPLE_COLUMNS, describe, sample_rows
    from reports.csvio import write_rows
    from reports.decode import draw_decode, render_decode
    from reports.style import title

    spec.validate()
    plan = spec.round_plan()
    dtype = dtype_option(spec.dtype, spec.model, spec.device)
    device_option(spec.device)
    directory, config = model_option(spec.model)
    # Every system's worker holds its own copy of the weights for the whole run.
    fits_option(config, dtype, spec.device, copies=len(spec.systems))
    if spec.prompt_len + spec.steps > config.max_position_embeddings:
        raise BadInput(
            f"--prompt-len {spec.prompt_len} + --steps {spec.steps} exceed the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    if any(s in HF_SYSTEMS for s in spec.systems):
        from engine.sources import materialize_gguf

        # transformers reads a HF directory, not a GGUF: both sides get the converted one.
        status("converting the GGUF for transformers (once)")
        directory = materialize_gguf(directory)
        status("checking that transformers can load the checkpoint")
        transformers_can_load(directory)
    target = out_dir(spec.out)
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
    csv_path = target / "decode.csv"
    samples_path = target / "decode-samples.csv"
    record = collect_env(spec.threads, sys.argv)
    env_path = write_env(target / "decode-env.json", record)
    done: dict[str, SystemRow] = {}
    windows: list = []
    probes: list[ProbeRow] = []

    def save() -> list[DecodeRow]:
        rows_now = derive(list(done.values()), run, probes[-1] if probes else None, windows)
        write_rows(csv_path, public(rows_now), CSV_COLUMNS)
        write_rows(samples_path, sample_rows(windows, "system"), ["system", *SAMPLE_COLUMNS])
        return rows_now

    def on_row(row: SystemRow) -> None:
        done[row.system] = row
        save()

    def on_round(r: int, found: dict) -> None:
        save()
        status(f"round {r}: " + "; ".join(describe(n, i) for n, i in found.items()))

    try:
        system_rows, probe = sweep(
            run,
            spec.systems,
            plan,
            timeout=spec.timeout,
            on_status=status,
            on_row=on_row,
            on_window=windows.append,
            on_round=on_round,
            on_probe=probes.append,
        )
    except KeyboardInterrupt:
        save()
        missing = [s for s in spec.systems if s not in done]
        raise interrupted(len(done), len(windows), missing, csv_path, samples_path) from None
    for row in system_rows:
        done[row.system] = row
    rows_out = add_samples(save(), directory)
    written = public(rows_out)
    found = gates(spec, rows_out)
    failed = any(r.status != "ok" or r.tokens_match is False for r in rows_out)
    rounds_run = max((r.rounds for r in rows_out), default=0)
    heading = title(
        "decode",
        model=spec.model,
        device=spec.device,
        dtype=dtype,
        rows=spec.rows,
        prompt_len=spec.prompt_len,
        steps=spec.steps,
        threads=spec.threads or "default",
        interleaved_rounds=rounds_run,
    )
    png = draw_decode(rows_out, target / "decode.png", heading)
    outputs = {"csv": str(csv_path), "png": str(png), "samples": str(samples_path)}
    return finish(
        "decode",
        written,
        found,
        {**outputs, "env": str(env_path)},
        json_mode=json_mode,
        check=check,
        render=lambda: render_decode(stdout_console(), rows_out, found, heading, probe),
        failed=failed,
        env=asdict(record),
    )
