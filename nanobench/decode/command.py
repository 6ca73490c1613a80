"""`nanobench decode`: the engine against transformers, side by side, each in a fresh process.

What it is: the command: its options (each defaulting to `DecodeSpec`'s), which it validates
into a spec and hands to `decode/run.py`.
What it is not: the spec (`decode/spec.py`), the gates (`decode/gates.py`), the measurement
(`decode/bench.py`, `decode/session.py`), the rows (`decode/rows.py`, `decode/derive.py`) or
the report (`reports.decode`).
Invariant: every user mistake is refused before a worker starts, a mistaken name or path before
torch is imported; a row's columns are its type's.
"""

from __future__ import annotations

import typer

from nanobench.decode.spec import DecodeSpec
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.options import (
    Backend,
    BudgetS,
    CheckOpt,
    Device,
    Dtype,
    ExportJson,
    HfAttention,
    History,
    JsonOpt,
    Margin,
    MaxModelLen,
    MaxRounds,
    Model,
    NoMore,
    NoSlower,
    Out,
    Processes,
    PromptLen,
    Python,
    QuietOpt,
    RelCi,
    Rounds,
    Rows,
    Steps,
    Systems,
    Threads,
    Timeout,
    Try,
    VsDtype,
    VsEnv,
    VsModel,
    VsPython,
    WidthMultiple,
)
from nanobench.harness.cli.registry import TIMED, Command
from nanobench.harness.cli.validate import model_named, out_dir_tried, out_file
from nanobench.harness.runs.sides import Sides


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
    processes: Processes = DecodeSpec.processes,
    history: History = DecodeSpec.history,
    export_json: ExportJson = DecodeSpec.export_json,
    vs_model: VsModel = DecodeSpec.vs_model,
    vs_dtype: VsDtype = DecodeSpec.vs_dtype,
    no_more: NoMore = DecodeSpec.no_more,
    no_slower: NoSlower = DecodeSpec.no_slower,
    margin: Margin = DecodeSpec.margin,
    tries: Try = DecodeSpec.tries,
    python: Python = DecodeSpec.python,
    vs_python: VsPython = DecodeSpec.vs_python,
    vs_env: VsEnv = DecodeSpec.vs_env,
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

    Example: nanobench decode --threads 1 --export-json decode-records.json

    Example: nanobench decode --dtype bfloat16 --vs-dtype float32 --check --no-slower step_ms

    Example: nanobench decode --systems engine-eager,engine-compiled --try cpp-wrapper
    """
    spec = DecodeSpec(
        model=model,
        systems=systems,
        rows=rows,
        prompt_len=prompt_len,
        steps=steps,
        rounds=rounds,
        max_rounds=max_rounds,
        rel_ci=rel_ci,
        budget_s=budget_s,
        max_model_len=max_model_len,
        width_multiple=width_multiple,
        device=device,
        dtype=dtype,
        threads=threads,
        backend=backend,
        hf_attn=hf_attn,
        timeout=timeout,
        out=out,
        processes=processes,
        history=history,
        export_json=export_json,
        vs_model=vs_model,
        vs_dtype=vs_dtype,
        no_more=no_more,
        no_slower=no_slower,
        margin=margin,
        tries=tries,
        python=python,
        vs_python=vs_python,
        vs_env=vs_env,
    )
    with run_command(quiet) as status:
        spec = names_checked(spec)
        # Heavy on purpose: torch and the workers' code load once the names are checked.
        from nanobench.decode.run import run_decode

        code = run_decode(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def names_checked(spec: DecodeSpec) -> DecodeSpec:
    """What a typing mistake spoils, checked before torch loads (`run_decode` checks the rest,
    in this order): --export-json, the rules across options, each side's model, --out; the
    validated spec."""
    out_file(spec.export_json, "--export-json")
    spec = spec.validate()
    # each side's model, the before side's named by the option typed for it (--vs-model)
    Sides.of(spec).resolved(lambda side: model_named(side.model))
    out_dir_tried(spec.out)
    return spec


def decode_kind() -> type:
    """decode's kind, imported when asked for: it loads the statistics."""
    from nanobench.decode.run import DecodeKind

    return DecodeKind


COMMAND = Command(
    "decode",
    decode_command,
    doc="docs/measuring.md",
    sweep=TIMED,
    kind=decode_kind,
    comparable=True,
)
