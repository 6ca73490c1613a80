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

import typer

from nanobench.capture.spec import CaptureSpec
from nanobench.harness.cli.console import run_command
from nanobench.harness.cli.options import (
    BudgetS,
    CaptureRows,
    CaptureSizes,
    CaptureTokens,
    CheckOpt,
    Device,
    Dtype,
    Heads,
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
from nanobench.harness.cli.registry import TIMED, Command
from nanobench.harness.cli.validate import out_dir, out_dir_tried, step_named


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
    (median, IQR) per side and replayed / eager with its 95% interval. Each graph's recording
    is timed too (wall clock, device synchronised), and each run's list in total.

    Example: nanobench capture --run-lengths 8,32,64,128 --width-multiple 128 --up-front

    Example: nanobench capture --capture-sizes vllm --capture-rows 64 --width-multiples 128,512

    Example: nanobench capture --kernel triton --heads 32 --check

    Example: nanobench capture --target my_step.py:factory --capture-sizes 1,8,64

    Example: nanobench capture --run-lengths 8,32 --threads 1
    """
    with run_command(quiet) as status:
        # The names first, with nothing imported: a built-in target's check loads torch.
        step_named(model, target)
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
        out_dir_tried(out)
        # Heavy on purpose: torch and the engine load when the command runs, not at the CLI's start.
        if spec.target:
            from nanobench.capture.target import capture_target

            code = capture_target(
                spec, target, out_dir(out), status, json_mode=json_mode, check=check
            )
            raise typer.Exit(code)
        from nanobench.capture.run import run_capture

        code = run_capture(spec, status, json_mode=json_mode, check=check)
    raise typer.Exit(code)


COMMAND = Command("capture", capture, ("capturebench",), "docs/capture-lists.md", TIMED)
