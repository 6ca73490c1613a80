"""`nanobench decode`: the engine against transformers, side by side, each in a fresh process.

Example: nanobench decode --rows 4 --prompt-len 16 --steps 128 --threads 1 --rounds 5
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import typer

from nanobench.common import (
    Gate,
    choice,
    choice_list,
    device_option,
    dtype_option,
    finish,
    fits_option,
    gate,
    interval_gate,
    model_option,
    out_dir,
    positive,
    threads_option,
)
from nanobench.console import run_command, say_error, stdout_console
from nanobench.errors import BadInput


def transformers_can_load(directory) -> None:
    """The checkpoint's config resolves to a transformers model class, without reading weights."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(str(directory), local_files_only=True)
    except Exception as e:  # whatever transformers raises, it means it cannot load this
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BadInput(
            f"--model {directory}: transformers cannot load its config ({first})"
        ) from None
    archs = getattr(config, "architectures", None) or []
    if not archs or getattr(transformers, archs[0], None) is None:
        raise BadInput(
            f"--model {directory}: transformers has no model class for architectures {archs}"
        )


def decode_gates(rows: list[dict], targets) -> list[Gate]:
    """Tokens and warm-up gates for every row (pass/fail); the ratio gates `targets`
    (DecodeTargets) sets, each judged on its 95% interval (pass / fail / inconclusive)."""
    from nanobench.decode_bench import (
        best_engine_row,
        check_nothing_built,
        check_tokens_match,
        ratio_of,
    )

    gates = []
    by_name = {r["system"]: r for r in rows}
    for r in rows:
        system, status = r["system"], str(r.get("status"))
        if status != "ok":
            gates.append(Gate(f"measured[{system}]", False, status))
            continue
        gates.append(gate(f"tokens_match[{system}]", check_tokens_match, system, r))
        if r.get("compile_s") is not None:
            gates.append(
                gate(
                    f"nothing_built_while_timed[{system}]",
                    check_nothing_built,
                    system,
                    int(r.get("builds_measured") or 0),
                )
            )
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
        gates.append(ratio_gate(name, what, ratio_of(by_name[ours], column), target))
    best = best_engine_row(rows)
    if targets.best_vs_floor is not None and best is not None:
        what = f"{best['system']} (the fastest engine mode) / the {best.get('floor_bound')} floor"
        gates.append(
            ratio_gate(
                "best_engine_vs_floor",
                what,
                ratio_of(best, "ratio_vs_floor"),
                targets.best_vs_floor,
            )
        )
    return gates


def add_samples(rows: list[dict], directory) -> None:
    """Each row's first generated sequence as text, when the checkpoint ships a tokenizer."""
    from nanobench.samples import sample_text, tokenizer_for

    tokenizer = tokenizer_for(directory)
    for r in rows:
        if tokenizer is not None and r.get("tokens"):
            r["sample"] = sample_text(tokenizer, r["tokens"][0])


def ratio_gate(name: str, what: str, interval, target: float) -> Gate:
    """A step-time ratio at most `target`: pass only when its whole 95% interval is."""
    from nanobench.common import INCONCLUSIVE
    from nanobench.stats import MIN_ROUNDS, rounds_to_decide, verdict_at_most

    if interval.estimate != interval.estimate:
        return Gate(name, False, f"{what}: not measured (both systems must run in the sweep)")
    verdict = verdict_at_most(interval, target)
    if interval.low != interval.low:
        span = f"no interval yet ({interval.rounds} rounds; one needs {MIN_ROUNDS})"
    else:
        span = f"[{interval.low:.2f}, {interval.high:.2f}] over {interval.rounds} rounds"
    detail = f"{what} is {interval.estimate:.2f}x {span}; the target is at most {target:.2f}x"
    if verdict == INCONCLUSIVE:
        more = rounds_to_decide(interval, target)
        detail += "; can't tell at this noise" + (
            f" (about {more} more rounds would likely decide)" if more else ""
        )
    return interval_gate(name, verdict, detail, interval, target)


def public(row: dict) -> dict:
    """A row as written: the token lists stay in the worker's answer, their digest goes out."""
    return {k: v for k, v in row.items() if k != "tokens"}


def decode_command(
    model: str = typer.Option("tiny", help="Preset name (tiny, llama-3.2-1b) or checkpoint dir."),
    systems: str = typer.Option(
        ",".join(
            ("engine-eager", "engine-compiled", "engine-captured", "hf-eager", "hf-static-compiled")
        ),
        help="Comma-separated: engine-eager, engine-compiled, engine-captured, hf-eager, "
        "hf-static-compiled.",
    ),
    rows: int = typer.Option(4, help="Rows (prompts) decoded together."),
    prompt_len: int = typer.Option(16, help="Prompt tokens per row (seeded, the same for all)."),
    steps: int = typer.Option(128, help="Greedy tokens per row: the prefill's first, then decode."),
    rounds: int = typer.Option(
        3,
        "--rounds",
        "--repeat",
        help="Rounds at least: each system one timed generation a round, after one warm-up.",
    ),
    max_rounds: int = typer.Option(30, help="Rounds at most."),
    rel_ci: float = typer.Option(
        0.03, help="Stop adding rounds once every ratio's 95% interval is this tight (half-width)."
    ),
    budget_s: float = typer.Option(120.0, help="Stop adding rounds after this many seconds."),
    max_model_len: int = typer.Option(
        0, help="The engine's slot table width; default prompt-len + steps."
    ),
    width_multiple: int = typer.Option(128, help="Width bucket multiple of engine-captured."),
    device: str = typer.Option("cpu", help="cpu | cuda."),
    dtype: str = typer.Option(
        "auto",
        help="auto (the checkpoint's dtype on CUDA, float32 on CPU) | float32 | bfloat16 | float16.",
    ),
    threads: int = typer.Option(
        0, help="torch threads in every system's worker (0: torch's default); the same for all."
    ),
    backend: str = typer.Option(
        "inductor",
        help="torch.compile backend of the compiled systems: inductor | aot_eager | eager.",
    ),
    hf_attn: str = typer.Option("sdpa", help="transformers attention: sdpa (its default) | eager."),
    timeout: int = typer.Option(900, help="Seconds before a system's worker is killed."),
    out: str = typer.Option("nanobench-out", help="Directory for decode.csv and decode.png."),
    json_mode: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables."
    ),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when a gate fails, 3 when none fails but one can't tell."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress display."),
) -> None:
    """Decode the same prompts with the engine (eager, compiled, captured) and transformers
    (eager, static cache + compiled), each in a fresh process: ms per step, tokens/s, prefill,
    compile seconds, peak RSS, token agreement, and the ratio to a measured memory floor.

    Example: nanobench decode --rows 4 --prompt-len 16 --steps 128 --threads 1 --rounds 5
    """
    with run_command(quiet) as status:
        dtype = dtype_option(dtype, model, device)
        from nanobench.decode_bench import (
            BACKENDS,
            DTYPE_BYTES,
            HF_ATTENTION,
            HF_SYSTEMS,
            SYSTEMS,
            derive,
            spec_for,
            sweep,
            targets_for,
        )
        from nanobench.env_record import collect_env, write_env
        from nanobench.roofline import kv_read_bytes, step_flops, weight_bytes
        from nanobench.rounds import SAMPLE_COLUMNS, describe, round_plan, sample_rows
        from reports.csvio import write_rows
        from reports.decode import DECODE_COLUMNS, draw_decode, render_decode

        system_list = choice_list("--systems", systems, SYSTEMS)
        if len(set(system_list)) != len(system_list):
            raise BadInput(f"--systems {systems!r}: a system is named twice")
        for name, value in (
            ("--rows", rows),
            ("--prompt-len", prompt_len),
            ("--steps", steps),
            ("--width-multiple", width_multiple),
            ("--timeout", timeout),
        ):
            positive(name, value)
        if steps < 2:
            raise BadInput(
                f"--steps {steps}: expected at least 2 (the prefill's token, then decode steps)"
            )
        threads_option(threads)
        plan = round_plan(rounds, max_rounds, rel_ci, budget_s)
        if max_model_len < 0:
            raise BadInput(f"--max-model-len {max_model_len}: expected a positive integer")
        if max_model_len and prompt_len + steps > max_model_len:
            raise BadInput(
                f"--prompt-len {prompt_len} + --steps {steps} exceed "
                f"--max-model-len {max_model_len}"
            )
        choice("--backend", backend, BACKENDS)
        choice("--hf-attn", hf_attn, HF_ATTENTION)
        device_option(device)
        directory, config = model_option(model)
        # Every system's worker holds its own copy of the weights for the whole run.
        fits_option(config, dtype, device, copies=len(system_list))
        if prompt_len + steps > config.max_position_embeddings:
            raise BadInput(
                f"--prompt-len {prompt_len} + --steps {steps} exceed the model's "
                f"max_position_embeddings {config.max_position_embeddings}"
            )
        if any(s in HF_SYSTEMS for s in system_list):
            status("checking that transformers can load the checkpoint")
            transformers_can_load(directory)
        target = out_dir(out)
        elem = DTYPE_BYTES[dtype]
        spec = spec_for(
            model=directory,
            rows=rows,
            prompt_len=prompt_len,
            steps=steps,
            max_model_len=max_model_len,
            width_multiple=width_multiple,
            device=device,
            dtype=dtype,
            threads=threads,
            backend=backend,
            hf_attn=hf_attn,
            weight_bytes=weight_bytes(config, elem),
            kv_bytes=kv_read_bytes(config, elem, rows, prompt_len, steps),
            step_flops=step_flops(config, rows, prompt_len, steps),
        )
        csv_path = target / "decode.csv"
        samples_path = target / "decode-samples.csv"
        record = collect_env(threads, sys.argv)
        env = asdict(record)
        env_path = write_env(target / "decode-env.json", record)
        done: dict[str, dict] = {}
        windows: list = []
        probe_row: dict = {}

        def save() -> list[dict]:
            rows_now = derive(list(done.values()), spec, probe_row, windows)
            write_rows(csv_path, [public(r) for r in rows_now], DECODE_COLUMNS)
            write_rows(samples_path, sample_rows(windows, "system"), ["system", *SAMPLE_COLUMNS])
            return rows_now

        def on_row(row: dict) -> None:
            done[row["system"]] = row
            save()

        def on_round(r: int, found: dict) -> None:
            save()
            status(f"round {r}: " + "; ".join(describe(n, i) for n, i in found.items()))

        try:
            systems_rows, probe = sweep(
                spec,
                system_list,
                plan,
                timeout=timeout,
                on_status=status,
                on_row=on_row,
                on_window=windows.append,
                on_round=on_round,
                on_probe=probe_row.update,
            )
        except KeyboardInterrupt:
            save()
            missing = [s for s in system_list if s not in done]
            say_error(
                f"interrupted: {len(done)} rows and {len(windows)} windows are in {csv_path} and "
                f"{samples_path}; not run: {', '.join(missing) or 'none'}"
            )
            raise typer.Exit(130) from None
        for row in systems_rows:
            done[row["system"]] = row
        rows_out = save()
        add_samples(rows_out, directory)
        written = [public(r) for r in rows_out]
        gates = decode_gates(rows_out, targets_for(model, spec["weight_bytes"]))
        failed = any(r.get("status") != "ok" or r.get("tokens_match") is False for r in rows_out)
        rounds_run = max((r.get("rounds") or 0 for r in rows_out), default=0)
        title = (
            f"{model} {device} {dtype}: {rows} rows, {prompt_len}-token prompts, {steps} steps, "
            f"{threads or 'default'} threads, {rounds_run} interleaved rounds"
        )
        png = draw_decode(written, target / "decode.png", title)
        code = finish(
            "decode",
            written,
            gates,
            {
                "csv": str(csv_path),
                "png": str(png),
                "samples": str(samples_path),
                "env": str(env_path),
            },
            json_mode=json_mode,
            check=check,
            render=lambda: render_decode(stdout_console(), written, gates, title, probe),
            failed=failed,
            env=env,
        )
    raise typer.Exit(code)
