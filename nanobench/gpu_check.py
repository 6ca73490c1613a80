"""`python -m nanobench.gpu_check`: the one prepared script for a machine with a GPU.

What it is: three checks run in order, each recorded as rows of `<out>/gpu-check.csv`, then a
short table on stdout (progress goes to stderr):
(a) `pytest -m gpu -q` in a subprocess, with its pass/fail counts;
(b) `bench_kernels` on CUDA in bf16 at a few (rows, context) points: reference vs Triton, ms,
    effective GB/s of K/V read and the error against an fp32 reference;
(c) a CUDA-graph capture of the engine's planned decode step (`tiny` preset, bucketed): one step
    eagerly, a warm-up on a side stream, `_planned_forward` recorded into a `torch.cuda.CUDAGraph`,
    then each following step planned into the same persistent buffers, replayed, and compared
    with the eager forward of that plan (max abs diff, greedy agreement, replay ms vs eager ms).
Sized to finish well under five minutes on one H200. Exit 0 when every check passes, 1 when one
fails, 2 without CUDA ("gpu-check needs CUDA; ..." on one line, no traceback).
What it is not: a unit test (the pytest `gpu` tests are that; one of them calls
`check_decode_graph` from here) or a benchmark sweep: one short run, for a machine that is lent.
Invariant: importing this module touches no CUDA state; every CUDA call sits inside a function
that runs only after `torch.cuda.is_available()`. A check that raises becomes a failed row with
the exception's first line; the script carries on to the next check.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import torch

from nanobench.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

REPO = Path(__file__).resolve().parents[1]
NO_CUDA = "gpu-check needs CUDA; torch.cuda.is_available() is False"
POINTS = ((1, 1024), (8, 4096), (32, 8192), (64, 2048))
PYTEST_TIMEOUT_S = 180
# Triton's error against the fp32 reference, as in tests/test_triton_decode.py.
KERNEL_ATOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 5e-3}
GRAPH_ATOL = 1e-4
DETAIL_CHARS = 160
COLUMNS = [
    "check",
    "name",
    "ok",
    "rows",
    "context",
    "kernel",
    "dtype",
    "ms",
    "kv_bytes",
    "gbps",
    "max_err",
    "speedup",
    "eager_ms",
    "replay_ms",
    "max_abs_diff",
    "passed",
    "failed",
    "skipped",
    "errors",
    "seconds",
    "detail",
]


class GraphCheckError(RuntimeError):
    """The engine's decode step could not be recorded or replayed as the check requires."""


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


# -- (a) the gpu-marked tests ----------------------------------------------------------------


def parse_junit(xml_text: str) -> tuple[dict[str, int], list[str]]:
    """Counts and failing test ids from pytest's JUnit XML (the -q summary line is not
    reliable: the project's addopts already hold -q, and -qq prints no summary)."""
    root = ElementTree.fromstring(xml_text)
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    failures = []
    for suite in suites:
        failed, errors = int(suite.get("failures", 0)), int(suite.get("errors", 0))
        skipped, tests = int(suite.get("skipped", 0)), int(suite.get("tests", 0))
        counts["failed"] += failed
        counts["errors"] += errors
        counts["skipped"] += skipped
        counts["passed"] += tests - failed - errors - skipped
        for case in suite.iter("testcase"):
            bad = case.find("failure")
            bad = case.find("error") if bad is None else bad
            if bad is not None:
                message = (bad.get("message") or "").strip().splitlines()
                test_id = f"{case.get('classname')}::{case.get('name')}"
                failures.append(f"{test_id}: {message[0] if message else bad.tag}")
    return counts, failures


def run_gpu_tests(timeout_s: int = PYTEST_TIMEOUT_S) -> dict:
    """`pytest -m gpu -q` in a subprocess at the repository root."""
    # 0, not unset: the test conftest defaults it to the interpreter for CPU-only machines
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    row = {"check": "pytest-gpu", "name": "pytest -m gpu -q"}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "gpu.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
        cmd.append(f"--junitxml={junit}")
        try:
            done = subprocess.run(
                cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return row | {
                "ok": False,
                "seconds": timeout_s,
                "detail": f"timed out after {timeout_s} s",
            }
        seconds = time.perf_counter() - start
        if not junit.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()
            detail = f"exit {done.returncode}: {tail[-1] if tail else 'no output'}"
            return row | {"ok": False, "seconds": seconds, "detail": detail}
        counts, failures = parse_junit(junit.read_text())
    if done.returncode == 5:
        detail = "no gpu-marked tests were collected"
    elif failures:
        detail = "; ".join(failures)[:600]
    else:
        detail = f"exit {done.returncode}"
    return row | counts | {"ok": done.returncode == 0, "seconds": seconds, "detail": detail}


# -- (b) kernel timing -----------------------------------------------------------------------


def kernel_rows(points=POINTS, dtype: torch.dtype = torch.bfloat16) -> list[dict]:
    """bench_kernels on CUDA, one point at a time so a failure (an OOM) costs only its point."""
    from nanobench.kernel_bench import bench_kernels

    rows: list[dict] = []
    for point in points:
        name = f"{point[0]}x{point[1]}"
        try:
            measured = bench_kernels([point], device="cuda", dtype=dtype)
        except Exception as e:
            rows.append(
                {"check": "kernel-bench", "name": name, "ok": False, "detail": first_line(e)}
            )
            continue
        finally:
            torch.cuda.empty_cache()
        ref_ms = next(r["ms"] for r in measured if r["kernel"] == "reference")
        for r in measured:
            within = r["kernel"] == "reference" or r["max_err"] <= KERNEL_ATOL[dtype]
            rows.append(
                r
                | {
                    "check": "kernel-bench",
                    "name": f"{r['kernel']} {name}",
                    "ok": within and math.isfinite(r["max_err"]),
                    "speedup": ref_ms / r["ms"],
                    "detail": "" if within else f"max_err above {KERNEL_ATOL[dtype]}",
                }
            )
    return rows


# -- (c) CUDA graph of the engine's decode step ----------------------------------------------


def _median_ms(fn: Callable[[], object], iters: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def off_device_tensors(engine) -> list[str]:
    """Parameters and buffers of the model that are not on the engine's device type."""
    # By type: the cache says "cuda", a tensor says "cuda:0", and those compare unequal.
    kind = engine.cache.device.type
    named = list(engine.model.named_parameters()) + list(engine.model.named_buffers())
    return [name for name, t in named if t.device.type != kind]


def check_decode_graph(
    attention: str = "triton",
    *,
    dtype: str = "float32",
    prompt_lens: tuple[int, ...] = (5, 9, 3),
    steps: int = 4,
    iters: int = 30,
    max_model_len: int = 256,
    repair_devices: bool = False,
) -> dict:
    """Record `engine._planned_forward` once, replay it on later plans, compare with eager.

    Three prompts decode in a row bucket of four, so one padded row rides along. Each later
    step is planned with the engine's own buckets into `engine.inputs` (the persistent
    buffers the graph recorded); its shape and addresses must equal the recorded plan's.
    With `repair_devices` a model tensor left off the device is moved there and named in the
    detail instead of failing the check.
    """
    from engine.engine import Engine
    from engine.inputs import check_step_inputs_persistent
    from engine.plan import plan_decode
    from engine.slots import check_mapping_is_window

    engine = Engine.from_checkpoint(
        "tiny",
        device="cuda",
        dtype=dtype,
        attention=attention,
        bucket_decode=True,
        max_batch_size=8,
        max_model_len=max_model_len,
    )
    notes = []
    misplaced = off_device_tensors(engine)
    if misplaced:
        where = f"engine left {', '.join(misplaced)} off {engine.cache.device}"
        if not repair_devices:
            raise GraphCheckError(where)
        notes.append(f"{where} (moved them to run the check)")
        engine.model.to(engine.cache.device)
    gen = torch.Generator().manual_seed(0)
    vocab = engine.model_config.vocab_size
    batch = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in prompt_lens]
    n = len(batch)
    with torch.no_grad():
        tokens = engine.prefill(batch).argmax(-1).tolist()
        logits = engine.decode_step(tokens)  # (B, V): one planned step, eager
        plan = engine.last_plan
        input_ids = engine.inputs.input_ids[: plan.graph_rows]  # (B, 1)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # Same plan, same inputs: rewrites the same K/V, so the warm-up changes nothing.
            for _ in range(3):
                engine._planned_forward(input_ids, plan)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = engine._planned_forward(input_ids, plan)  # (B, V) graph-owned

        tokens = logits.argmax(-1).tolist()
        worst = 0.0
        agree = True
        for _ in range(steps):
            nxt = plan_decode(
                engine.cache,
                list(engine.active_rows),
                engine.buckets,
                engine.inputs,
                engine.width_free,
            )
            shape, recorded = (nxt.graph_rows, nxt.graph_width), (plan.graph_rows, plan.graph_width)
            if shape != recorded:
                raise GraphCheckError(f"step shape {shape} differs from the recorded {recorded}")
            check_step_inputs_persistent(nxt, engine.inputs)
            check_mapping_is_window(nxt.slot_mapping, engine.cache.slots)
            engine.inputs.write_ids(tokens + [0] * nxt.pad_rows)
            graph.replay()
            replayed = static_out[:n].clone()  # (B, V) copied out: one-step lifetime
            eager = engine._planned_forward(input_ids, nxt)[:n]  # (B, V)
            worst = max(worst, float((replayed - eager).abs().max()))
            agree = agree and replayed.argmax(-1).tolist() == eager.argmax(-1).tolist()
            tokens = eager.argmax(-1).tolist()

        eager_ms = _median_ms(lambda: engine._planned_forward(input_ids, nxt), iters)
        replay_ms = _median_ms(graph.replay, iters)
    engine.release_all()
    ok = agree and worst <= GRAPH_ATOL
    if not agree:
        notes.append("greedy tokens of replay and eager differ")
    if worst > GRAPH_ATOL:
        notes.append(f"max abs diff above {GRAPH_ATOL}")
    return {
        "check": "cuda-graph",
        "name": f"decode {attention}",
        "ok": ok,
        "rows": plan.graph_rows,
        "context": plan.graph_width,
        "kernel": attention,
        "dtype": dtype,
        "eager_ms": eager_ms,
        "replay_ms": replay_ms,
        "speedup": eager_ms / replay_ms,
        "max_abs_diff": worst,
        "detail": "; ".join(notes),
    }


# -- the script ------------------------------------------------------------------------------


def device_row() -> dict:
    import triton

    versions = f"torch {torch.__version__}, cuda {torch.version.cuda}, triton {triton.__version__}"
    return {"check": "device", "name": torch.cuda.get_device_name(), "ok": True, "detail": versions}


def summary(row: dict) -> str:
    def has(key: str) -> bool:
        value = row.get(key)
        return isinstance(value, (int, float)) and math.isfinite(value)

    if row["check"] == "pytest-gpu" and has("passed"):
        return (
            f"{row['passed']} passed, {row['failed']} failed, {row['skipped']} skipped, "
            f"{row['errors']} errors in {row['seconds']:.0f} s"
        )
    if row["check"] == "kernel-bench" and has("ms"):
        return (
            f"{row['ms']:.3f} ms, {row['gbps']:.0f} GB/s, x{row['speedup']:.2f}, "
            f"err {row['max_err']:.1e}"
        )
    if row["check"] == "cuda-graph" and has("replay_ms"):
        return (
            f"replay {row['replay_ms']:.3f} ms vs eager {row['eager_ms']:.3f} ms "
            f"(x{row['speedup']:.2f}), diff {row['max_abs_diff']:.1e}"
        )
    return ""


def print_table(rows: list[dict], csv_path: Path, seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gpu-check ({seconds:.0f} s) -> {csv_path}")
    for column in ("check", "name", "ok"):
        table.add_column(column, no_wrap=True)
    table.add_column("result", overflow="fold")
    table.add_column("detail (full text in the CSV)", overflow="fold")
    for row in rows:
        mark = "[green]pass[/]" if row.get("ok") else "[red]FAIL[/]"
        detail = str(row.get("detail") or "")
        detail = detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 3] + "..."
        table.add_row(row["check"], row["name"], mark, summary(row), detail)
    # A log file or CI console is no terminal; 80 columns would fold every cell.
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160).print(table)


def guarded(rows: list[dict], check: str, name: str, fn: Callable[[], object]) -> None:
    """Run one check; an exception becomes a failed row and the script goes on."""
    try:
        result = fn()
    except Exception as e:
        rows.append({"check": check, "name": name, "ok": False, "detail": first_line(e)})
        return
    rows.extend(result if isinstance(result, list) else [result])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nanobench.gpu_check",
        description="GPU tests, kernel timing and a CUDA-graph check of the decode step.",
    )
    parser.add_argument("--out", default="nanobench-out", help="output directory")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return EXIT_BAD_INPUT
    # Compile for real: the interpreter would time Python, not the GPU.
    os.environ.pop("TRITON_INTERPRET", None)
    from rich.console import Console

    from reports.csvio import write_rows

    progress = Console(stderr=True)
    start = time.perf_counter()
    rows: list[dict] = []
    # The tests run first, before this process holds any GPU memory.
    progress.print("gpu-check: pytest -m gpu -q ...")
    guarded(rows, "pytest-gpu", "pytest -m gpu -q", run_gpu_tests)
    guarded(rows, "device", "cuda", device_row)
    progress.print(f"gpu-check: kernel timing at {', '.join(f'{r}x{c}' for r, c in POINTS)} ...")
    guarded(rows, "kernel-bench", "bench_kernels", kernel_rows)
    for attention in ("triton", "reference"):
        progress.print(f"gpu-check: CUDA graph of the decode step ({attention}) ...")
        guarded(
            rows,
            "cuda-graph",
            f"decode {attention}",
            lambda a=attention: check_decode_graph(a, repair_devices=True),
        )
    csv_path = write_rows(Path(args.out) / "gpu-check.csv", rows, COLUMNS)
    print_table(rows, csv_path, time.perf_counter() - start)
    return EXIT_OK if all(r.get("ok") for r in rows) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
