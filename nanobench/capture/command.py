"""`nanobench capture` (alias `capturebench`): record once per shape, replay after; pool table.

What it is: the command and its spec (`CaptureSpec`: every option's default and the
cross-option rules), and its gates: pass/fail for counts and logits; on CUDA the tri-state
`replay_not_slower` (replayed / eager step time at most 1.0x, judged on its 95% interval).
What it is not: the measurement (`nanobench.capture.bench`, `nanobench.capture.timing`,
`nanobench.capture.workspace`) or the tables and diagram (`reports.capture`).
Invariant: bad input is one line and exit 2 before anything is measured or written. On a CPU
the replay ratio's verdict is informational (in the row and a note, not a gate): the eager
recorder replays by calling the same eager forward, so there is no launch cost to save and
a gate there would only say how much its checks cost.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, replace

import typer

from nanobench.capture.rows import RunRow, capture_columns
from nanobench.capture.timing import (
    BUDGET_S,
    MAX_ROUNDS,
    REL_CI,
    ROUNDS,
    SAMPLE_HEADER,
    ratio_notes,
)
from nanobench.harness.common import (
    Gate,
    capture_sizes_option,
    device_option,
    dtype_option,
    finish,
    fits_option,
    gate,
    model_option,
    out_dir,
    threads_applied,
)
from nanobench.harness.console import run_command, stdout_console
from nanobench.harness.errors import BadInput
from nanobench.harness.options import (
    BudgetS,
    CaptureRows,
    CaptureSizes,
    CaptureTokens,
    CheckOpt,
    Device,
    Dtype,
    Heads,
    Ints,
    JsonOpt,
    Kernel,
    MaxRounds,
    Model,
    Out,
    PromptLen,
    QuietOpt,
    RelCi,
    Rounds,
    Rows,
    RunLengths,
    Target,
    Threads,
    UpFront,
    WidthMultiple,
    WidthMultiples,
)
from nanobench.harness.rows import as_dicts
from reports.style import binary_bytes, title


@dataclass(frozen=True)
class CaptureSpec:
    """One capture invocation: the command's option defaults live here."""

    model: str = "tiny"
    rows: int = 2
    prompt_len: int = 16
    run_lengths: tuple[int, ...] = Ints((8, 32, 64, 128))
    width_multiple: int = 128
    up_front: bool = False
    kernel: str = "reference"
    device: str = "cpu"
    dtype: str = "auto"
    capture_rows: int = 256
    capture_tokens: int = 8192
    width_multiples: tuple[int, ...] = Ints((128, 512, 2048, 8192))
    capture_sizes: str | None = None
    heads: int = 0
    rounds: int = ROUNDS
    max_rounds: int = MAX_ROUNDS
    rel_ci: float = REL_CI
    budget_s: float = BUDGET_S  # shared by every run length
    threads: int = 0  # torch threads while both engines run and are timed (0: torch's default)
    out: str = "nanobench-out"
    # module:factory or file.py:factory: the user's own step, its capture memory priced per size.
    target: str = ""
    # Resolved by validate(): the concrete dtype and the capture list's rows.
    sizes: tuple[int, ...] | None = None

    def validate(self) -> CaptureSpec:
        """Cross-option rules; returns the spec with dtype and the list's rows resolved."""
        device_option(self.device)
        self.round_plan()
        if self.target:
            from nanobench.harness.targets import target_option

            target_option(self.target)
        return replace(
            self,
            dtype=dtype_option(self.dtype, self.model, self.device),
            sizes=capture_sizes_option(self.capture_sizes, self.capture_rows),
        )

    def round_plan(self):
        from nanobench.harness.rounds import round_plan

        return round_plan(self.rounds, self.max_rounds, self.rel_ci, self.budget_s)


def capture(
    model: Model = CaptureSpec.model,
    rows: Rows = CaptureSpec.rows,
    prompt_len: PromptLen = CaptureSpec.prompt_len,
    run_lengths: RunLengths = CaptureSpec.run_lengths,
    width_multiple: WidthMultiple = CaptureSpec.width_multiple,
    up_front: UpFront = CaptureSpec.up_front,
    kernel: Kernel = CaptureSpec.kernel,
    device: Device = CaptureSpec.device,
    dtype: Dtype = CaptureSpec.dtype,
    capture_rows: CaptureRows = CaptureSpec.capture_rows,
    capture_tokens: CaptureTokens = CaptureSpec.capture_tokens,
    width_multiples: WidthMultiples = CaptureSpec.width_multiples,
    capture_sizes: CaptureSizes = CaptureSpec.capture_sizes,
    heads: Heads = CaptureSpec.heads,
    rounds: Rounds = CaptureSpec.rounds,
    max_rounds: MaxRounds = CaptureSpec.max_rounds,
    rel_ci: RelCi = CaptureSpec.rel_ci,
    budget_s: BudgetS = CaptureSpec.budget_s,
    threads: Threads = CaptureSpec.threads,
    out: Out = CaptureSpec.out,
    target: Target = CaptureSpec.target,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Record the decode step once per shape and replay it: counts, logits, step times, pools.

    Eager and replayed steps are timed in interleaved rounds (rotating order): step ms
    (median, IQR) per side and replayed / eager with its 95% interval.

    Example: nanobench capture --run-lengths 8,32,64,128 --width-multiple 128 --up-front

    Example: nanobench capture --capture-sizes vllm --capture-rows 64 --width-multiples 128,512

    Example: nanobench capture --kernel triton --heads 32 --check

    Example: nanobench capture --target my_step.py:factory --capture-sizes 1,8,64

    Example: nanobench capture --run-lengths 8,32 --threads 1
    """
    with run_command(quiet) as status:
        spec = CaptureSpec(
            model=model,
            rows=rows,
            prompt_len=prompt_len,
            run_lengths=tuple(run_lengths),
            width_multiple=width_multiple,
            up_front=up_front,
            kernel=kernel,
            device=device,
            dtype=dtype,
            capture_rows=capture_rows,
            capture_tokens=capture_tokens,
            width_multiples=tuple(width_multiples),
            capture_sizes=capture_sizes,
            heads=heads,
            rounds=rounds,
            max_rounds=max_rounds,
            rel_ci=rel_ci,
            budget_s=budget_s,
            threads=threads,
            out=out,
            target=target,
        ).validate()
        if spec.target:
            from nanobench.memory.target_capture import capture_target

            code = capture_target(
                spec, target, out_dir(out), status, json_mode=json_mode, check=check
            )
            raise typer.Exit(code)
        dtype = spec.dtype
        directory, config = model_option(model)
        fits_option(config, dtype, device)
        sizes = spec.sizes
        widths = list(spec.width_multiples)
        run_lengths = list(spec.run_lengths)
        pool_heads = config.num_heads if heads == 0 else heads
        target = out_dir(out)
        if kernel == "triton" and device == "cpu":
            # Without a device the Triton kernel runs under its interpreter; set before any build.
            os.environ.setdefault("TRITON_INTERPRET", "1")

        from engine.config import ConfigError
        from engine.sources import load_model
        from kernels.reference import KernelInputError
        from nanobench.capture.bench import run_rows
        from nanobench.memory.decode_workspace import with_heads
        from nanobench.capture.pools import held_rows, measure_pools, pool_rows, with_measured
        from nanobench.capture.workspace import with_traced, workspace_rows
        from nanobench.harness.env_record import collect_env, write_env
        from nanobench.harness.rounds import sample_rows
        from reports.capture import plot_capture, render_capture, write_capture_csv
        from reports.csvio import write_rows

        try:
            with_heads(config, pool_heads)
        except ConfigError as e:
            raise BadInput(f"--heads {pool_heads}: {e}") from None
        status(f"loading {directory}")
        _, tensors = load_model(directory)  # a GGUF too
        record = collect_env(spec.threads, sys.argv)
        env_path = write_env(target / "capture-env.json", record)
        samples_path = target / "capture-samples.csv"
        samples: list[dict] = []

        def keep(steps: int, window) -> None:
            # Every timed step on disk as it comes: a run stopped midway keeps what it timed.
            samples.extend({"run_length": steps, **s} for s in sample_rows([window], "system"))
            write_rows(samples_path, samples, SAMPLE_HEADER)

        try:
            # Both engines are built, driven and timed in this process, under --threads.
            with threads_applied(spec.threads):
                runs, shapes = run_rows(
                    config,
                    tensors,
                    rows=rows,
                    prompt_len=prompt_len,
                    steps=run_lengths,
                    width_multiple=width_multiple,
                    up_front=up_front,
                    kernel=kernel,
                    device=device,
                    dtype=dtype,
                    status=status,
                    plan=spec.round_plan(),
                    on_window=keep,
                )
        except KernelInputError as e:
            # The model's shapes are outside what the chosen kernel takes (e.g. Triton's head_dim).
            raise BadInput(f"--kernel {kernel} with --model {model}: {e}") from None
        pools = pool_rows(pool_heads, capture_rows, capture_tokens, widths, sizes)
        status("tracing the decode forward's memory under fake tensors")
        pools = with_traced(pools, config, dtype)
        workspace = workspace_rows(config, pool_heads, capture_rows, capture_tokens, dtype, sizes)
        if device == "cuda":
            measured = measure_pools(config, capture_rows, capture_tokens, widths, dtype, status)
            pools = with_measured(pools, measured)
        held = held_rows(pool_heads, capture_rows, capture_tokens)
        rows_out = [*runs, *pools, *workspace, *held]
        found = gates(spec, runs)
        notes = up_front_notes(runs) + ratio_notes(runs)
        csv_path = write_capture_csv(
            target / "capture.csv", as_dicts(rows_out), capture_columns()
        )
        heading = title(
            "captured decode",
            model=model,
            device=device,
            dtype=dtype,
            rows=rows,
            prompt_len=prompt_len,
            width_multiple=width_multiple,
        )
        png_path = plot_capture(target / "captured-decode-replay.png", rows_out, heading)
        outputs = {
            "csv": str(csv_path),
            "png": str(png_path),
            "samples": str(samples_path),
            "env": str(env_path),
        }
        if shapes:
            outputs["shapes"] = shapes
        code = finish(
            "capture",
            as_dicts(rows_out),
            found,
            outputs,
            json_mode=json_mode,
            check=check,
            render=lambda: render_capture(stdout_console(), rows_out, found, notes),
            failed=any(r.status != "ok" for r in runs),
            env=asdict(record),
        )
    raise typer.Exit(code)


def gates(spec: CaptureSpec, rows: list[RunRow]) -> list[Gate]:
    """Per run length: measured, replay equals eager, closed as predicted, replays dominate,
    one shared pool, no held output; up front also every shape captured and none mid-run; on
    CUDA also replay_not_slower, tri-state on the ratio's interval (on CPU: `ratio_notes`)."""
    from engine.captured import check_replays_dominate  # torch: not at the CLI's import

    found = []
    for r in rows:
        n = r.steps
        found += [
            Gate(f"measured[{n}]", r.status == "ok", r.status),
            gate(f"replay_equals_eager[{n}]", check_close, r.max_abs_diff, r.replay_tolerance),
            gate(
                f"closed_as_predicted[{n}]",
                check_equal,
                "graphs the run used",
                r.captures_closed,
                r.predicted_closed,
            ),
            gate(f"check_replays_dominate[{n}]", check_replays_dominate, r.recorded_mid_run, n),
            Gate(f"check_pool_shared[{n}]", r.pool_shared == "ok", r.pool_shared),
            Gate(f"check_output_not_held[{n}]", r.output_not_held == "ok", r.output_not_held),
        ]
        if spec.up_front:
            shapes = r.all_shapes_captured
            found += [
                Gate(f"check_all_shapes_captured[{n}]", shapes == "ok", str(shapes)),
                gate(
                    f"first_decode_replayed[{n}]",
                    check_equal,
                    "graphs recorded mid-run",
                    r.recorded_mid_run,
                    0,
                ),
            ]
        if spec.device == "cuda" and r.status == "ok":
            found.append(replay_gate(r))
    return found


def replay_gate(r: RunRow) -> Gate:
    """replay_not_slower[n]: replayed / eager step time at most 1.0x on its 95% interval."""
    from nanobench.capture.timing import REPLAY_TARGET, ratio_of
    from nanobench.harness.common import ratio_gate

    what = f"replayed / eager step time at {r.steps} steps"
    return ratio_gate(f"replay_not_slower[{r.steps}]", what, ratio_of(r), REPLAY_TARGET)


def check_close(diff: float, tol: float) -> None:
    from engine.captured import CaptureUnsound

    if not diff <= tol:
        raise CaptureUnsound(f"replayed logits differ from eager by {diff:.3g} (tolerance {tol})")


def check_equal(what: str, got: int, expected: int) -> None:
    from engine.captured import CaptureUnsound

    if got != expected:
        raise CaptureUnsound(f"{what}: {got}, predicted {expected}")


def up_front_notes(runs: list[RunRow]) -> list[str]:
    """vLLM's line for each up-front walk: "Graph capturing finished in X secs, took Y GiB"."""
    notes = []
    for r in runs:
        if r.mode != "up-front":
            continue
        took = r.capture_pool_bytes
        size = "n/a on cpu" if took is None else binary_bytes(took)
        notes.append(
            f"{r.steps} steps: graph capturing finished in {r.capture_s:.3f} secs "
            f"({r.captured_up_front} shapes, largest first, one pool), took {size}"
        )
    return notes
