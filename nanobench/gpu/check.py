"""`python -m nanobench.gpu.check --out DIR`: the one script for a machine with a GPU.

What it is: the checks that need CUDA, in order, each row appended to `DIR/gpu-check.csv` the
moment it exists (`reports.gpu_check.RowLog`), then a table on stdout (progress on stderr):
`device` (names and versions); `hbm` (bandwidth of a device-to-device copy); `kernel` (the
Triton decode read against the reference read in bf16 at `POINTS`, by `do_bench` in
interleaved rounds, the speedup with its 95% interval, and the tri-state gate of at least half
the measured bandwidth at 64 rows x 8k on its interval: a `can't tell` row has ok empty);
`capture` (the real capture path, `nanobench.gpu.capture`, for both kernels, each graph writing
one shared logits buffer and each keeping its own; then one llama-3.2-1b-shaped graph's
allocator peak against its traced peak, `capture_memory_check.cuda_capture_check`; then the
gpt-fast-style corpus step recorded at two sizes, its pool's reserved growth beside the traced
workspace and the caching-allocator model, `gpu.capture.check_target_reserved`); `compile`
(off / dynamic / static of `tiny` and `llama-3.2-1b` in bf16, each mode in a fresh process);
`startup` (`nanobench startup` of `tiny` on CUDA: cold, warm and hot starts of dynamic and
reduce-overhead, by phase, the Triton build and the first replay among them); `profile`
(`gpu.profile_check`: each mode's device time, launches and graph replays); `pytest`
(`pytest -m gpu`).
It runs with the interpreter that starts it and installs nothing. A time budget (`--budget-s`,
under five minutes by default) is spent in that order; a check that would start with too
little left becomes a skipped row, so the script ends inside the budget with every row written.
What it is not: a unit test (the `gpu` tests are that) or a benchmark sweep.
Invariant: importing this module touches no CUDA state. Without CUDA the script prints one
line and exits 2 before writing anything. A check that raises becomes a failed row with the
exception's first line and the script goes on; one the budget stops (a compile mode's worker
or `pytest -m gpu` past the seconds left) is a skipped row saying so, never a failed one.
Exit 0 when no row failed, else 1.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from xml.etree import ElementTree

from nanobench.gpu.cli_run import CUT, run_json
from nanobench.gpu.profile_check import check_profile
from nanobench.harness.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from nanobench.harness.statistics.verdicts import INCONCLUSIVE

REPO = Path(__file__).resolve().parents[2]  # nanobench/gpu/check.py -> the checkout
NO_CUDA = "no CUDA device: torch.cuda.is_available() is False; gpu-check needs a GPU"
CHECKS = ("kernel", "capture", "compile", "startup", "profile", "pytest")
BUDGET_S = 280
POINTS = tuple((r, c) for r in (1, 8, 64, 256) for c in (1024, 8192, 32768))
COPY_BYTES = 2**30
KERNEL_ATOL = 2e-2  # bf16 against the fp32 oracle, as tests/test_triton_decode.py
COMPILE_MODELS = ("tiny", "llama-3.2-1b")
COMPILE_MODES = ("off", "dynamic", "static")
# Seconds a stage needs before it is worth starting (a fresh process, a model, a compile).
NEEDS_S = {
    "kernel": 40,
    "capture": 20,
    "tiny": 45,
    "llama-3.2-1b": 60,
    "startup": 60,
    "profile": 90,
    "pytest": 30,
}
MODE_NEEDS_S = 15


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def check_device() -> Iterator[dict]:
    import torch
    import triton

    versions = f"torch {torch.__version__}, cuda {torch.version.cuda}, triton {triton.__version__}"
    yield {"check": "device", "name": torch.cuda.get_device_name(), "ok": True, "detail": versions}


def check_kernel(hbm: list[float]) -> Iterator[dict]:
    """The copy bandwidth, then both kernels point by point (an OOM costs only its point)."""
    import torch

    from nanobench.gpu.kernel_bench import (
        bench_kernels,
        copy_bandwidth_gbps,
        cuda_ms,
        kernel_bandwidth_gate,
    )

    gbps = copy_bandwidth_gbps("cuda", COPY_BYTES, cuda_ms)
    hbm.append(gbps)
    yield {"check": "hbm", "name": f"copy {COPY_BYTES >> 20} MiB", "ok": True, "gbps": gbps}
    timings = []
    for rows, context in POINTS:
        try:
            found = bench_kernels(
                [(rows, context)], device="cuda", dtype=torch.bfloat16, hbm_gbps=gbps
            )
        except Exception as e:
            yield {
                "check": "kernel",
                "name": f"{rows}x{context}",
                "ok": False,
                "detail": first_line(e),
            }
            continue
        finally:
            torch.cuda.empty_cache()
        timings += found
        for t in found:
            ran = t.ms is not None
            good = t.kernel == "reference" or (t.max_err is not None and t.max_err <= KERNEL_ATOL)
            detail = t.note or ("" if good else f"max_err {t.max_err:.3g} above {KERNEL_ATOL}")
            name = f"{t.kernel} {rows}x{context}"
            yield asdict(t) | {
                "check": "kernel",
                "name": name,
                "ok": good if ran else None,
                "hbm_gbps": gbps,
                "detail": detail,
            }
    yield gate_row(kernel_bandwidth_gate(timings))


def gate_row(g) -> dict:
    """A tri-state gate as a row: ok True (pass), False (fail) or None (can't tell)."""
    return {
        "check": "kernel-gate",
        "name": g.name,
        "ok": None if g.verdict == INCONCLUSIVE else g.passed,
        "verdict": g.verdict,
        "hbm_fraction": g.estimate,
        "hbm_fraction_low": g.ci_low,
        "hbm_fraction_high": g.ci_high,
        "detail": g.detail,
    }


def check_capture() -> Iterator[dict]:
    import torch

    from nanobench.gpu.capture import check_capture_path

    for kernel in ("reference", "triton"):
        for output in ("shared", "per-graph"):
            try:
                yield check_capture_path(kernel, capture_output=output)
            except Exception as e:
                yield {
                    "check": "capture",
                    "name": f"tiny {kernel} bfloat16 {output} output",
                    "ok": False,
                    "detail": first_line(e),
                }
            finally:
                # The engines and their graphs are gone; hand their memory back for what follows.
                gc.collect()
                torch.cuda.empty_cache()
    yield from check_capture_memory()
    yield from check_target_memory()


# The gpt-fast-style step of the test corpus (a user's own step), recorded at two sizes.
CHECKOUT = REPO
TARGET_SPEC = str(CHECKOUT / "tests" / "corpus" / "memory_gptfast.py") + ":small"
TARGET_SIZES = (8, 64)


def check_target_memory() -> Iterator[dict]:
    import torch

    from nanobench.gpu.capture import check_target_reserved

    for rows in TARGET_SIZES:
        try:
            yield check_target_reserved(TARGET_SPEC, rows)
        except Exception as e:
            name = f"{TARGET_SPEC} {rows} rows bfloat16 one graph"
            yield {"check": "target-memory", "name": name, "ok": False, "detail": first_line(e)}
        finally:
            gc.collect()
            torch.cuda.empty_cache()


# One graph of a llama-3.2-1b-shaped engine (random weights): traced peak against the allocator.
MEMORY_POINTS = (("triton", 64, 2048), ("reference", 64, 2048))
MEMORY_TOLERANCE_PCT = 10.0


def check_capture_memory() -> Iterator[dict]:
    import torch

    from engine.config import preset
    from nanobench.gpu.memory_check import cuda_capture_check

    model = preset("llama-3.2-1b").config
    for kernel, rows, width in MEMORY_POINTS:
        name = f"llama-3.2-1b {kernel} {rows}x{width} bfloat16 one graph"
        try:
            found = cuda_capture_check(model, kernel, "bfloat16", rows, width)
            off = abs(found["diff_pct"])
            yield {
                "check": "capture-memory",
                "name": name,
                "ok": off <= MEMORY_TOLERANCE_PCT,
                **found,
                "detail": (
                    ""
                    if off <= MEMORY_TOLERANCE_PCT
                    else f"measured peak {found['measured_peak_bytes']:,} bytes is "
                    f"{found['diff_pct']:+.1f}% off the traced {found['traced_peak_bytes']:,}"
                ),
            }
        except Exception as e:
            yield {"check": "capture-memory", "name": name, "ok": False, "detail": first_line(e)}
        finally:
            gc.collect()
            torch.cuda.empty_cache()


def cut_by_budget(row: dict, seconds: float) -> dict:
    """A stage the budget stopped: a skip (ok None), never a failure, and the row says why."""
    return row | {"ok": None, "detail": f"skipped: the budget cut it after {seconds:.0f} s"}


def check_compile(model: str, seconds_left: Callable[[], float]) -> Iterator[dict]:
    """off / dynamic / static of one model in bf16, each in a fresh process, one shape."""
    from engine.sources import materialize_preset
    from nanobench.compile.bench import sweep
    from nanobench.compile.rows import derive
    from nanobench.compile.spec import WorkerSpec

    spec = WorkerSpec(
        model=str(materialize_preset(model)),
        device="cuda",
        dtype="bfloat16",
        rows=4,
        prompt_len=16,
        steps=8,
        bucketed=True,
        width_multiple=64,
        max_model_len=64,
    )
    done: list = []
    for mode in COMPILE_MODES:
        if seconds_left() < MODE_NEEDS_S:
            detail = f"skipped: {max(0.0, seconds_left()):.0f} s of the budget left"
            yield {"check": "compile", "name": f"{model} {mode}", "ok": None, "detail": detail}
            continue
        began = time.perf_counter()
        done += sweep(spec, [mode], timeout=seconds_left())
        row = derive(done, horizon=1000)[-1]
        status = row.status
        if str(status).startswith("timeout"):
            # The worker's timeout is the budget left: it was cut, not found wanting.
            name = {"check": "compile", "name": f"{model} {mode}", "model": model, "mode": mode}
            yield cut_by_budget(name, time.perf_counter() - began)
            continue
        yield {
            "check": "compile",
            "name": f"{model} {mode}",
            "ok": status == "ok",
            "model": model,
            "mode": mode,
            "step_ms": row.step_ms,
            "compile_s": row.compile_s,
            "builds": row.builds,
            "speedup": row.speedup,
            "detail": "" if status == "ok" else str(status),
        }


def startup_rows(doc: dict) -> Iterator[dict]:
    """`nanobench startup --json`'s starts as check rows: ready seconds, the Triton build, the
    first replay, the cache's answers; a start that missed or failed is not ok."""
    for r in doc["rows"]:
        name = f"tiny {r['mode']} {r['kind']}"
        if r["status"] != "ok":
            yield {"check": "startup", "name": name, "ok": False, "detail": r["status"]}
            continue
        detail = (
            f"ready {r['ready_s']:.2f} s (1st token {r['first_token_s']:.2f} s): build "
            f"{r['build_s']:.2f} s, cache load {r['cache_load_s']:.2f} s, first replay "
            f"{r['runtime_s']:.3f} s, unattributed {r['unattributed_s']:.2f} s; FX "
            f"{r['fx_hits']}/{r['fx_misses']}, AOT {r['aot_hits']}/{r['aot_misses']}"
        )
        if r["missed"]:
            detail += f"; missed {r['missed']}"
        yield {"check": "startup", "name": name, "ok": not r["missed"], "model": "tiny",
               "mode": r["mode"], "compile_s": r["compile_s"], "detail": detail}  # fmt: skip


def check_startup(seconds_left: Callable[[], float]) -> Iterator[dict]:
    """Cold, warm and hot starts of `tiny` on CUDA (dynamic and reduce-overhead), by phase."""
    with tempfile.TemporaryDirectory() as out:
        args = ["startup", "--device", "cuda", "--dtype", "bfloat16", "--modes",
                "dynamic,reduce-overhead", "--runs", "1", "--steps", "2", "--out", out]  # fmt: skip
        doc = run_json(args, seconds_left)
    if doc == CUT:
        yield cut_by_budget({"check": "startup", "name": "tiny"}, seconds_left())
    elif isinstance(doc, str):
        yield {"check": "startup", "name": "tiny", "ok": False, "detail": doc}
    else:
        yield from startup_rows(doc)


def parse_junit(xml_text: str) -> tuple[dict[str, int], list[str]]:
    """Counts and failing test ids from pytest's JUnit XML (-q output is not a stable format)."""
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


def check_pytest(seconds_left: Callable[[], float]) -> Iterator[dict]:
    """`pytest -m gpu` in a subprocess at the repository root, stopped at the budget."""
    row = {"check": "pytest", "name": "pytest -m gpu"}
    timeout = max(1.0, seconds_left())
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "gpu.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider"]
        try:
            done = subprocess.run(
                [*cmd, f"--junitxml={junit}"],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            yield cut_by_budget(row, timeout)
            return
        if not junit.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()
            yield row | {
                "ok": False,
                "detail": f"exit {done.returncode}: {tail[-1] if tail else ''}",
            }
            return
        counts, failures = parse_junit(junit.read_text())
    detail = "; ".join(failures)[:600] or f"exit {done.returncode}"
    if done.returncode == 5:
        detail = "no gpu-marked tests were collected"
    yield row | counts | {"ok": done.returncode == 0, "detail": detail}


def run_checks(log, checks: tuple[str, ...], budget_s: float, say: Callable[[str], None]) -> None:
    """Every stage in order, each row added as it comes; stages past the budget are skipped."""
    start = time.perf_counter()

    def left() -> float:
        return budget_s - (time.perf_counter() - start)

    hbm: list[float] = []
    stages = [("device", "device", check_device)]
    if "kernel" in checks:
        stages.append(("kernel", "kernel", lambda: check_kernel(hbm)))
    if "capture" in checks:
        stages.append(("capture", "capture", check_capture))
    if "compile" in checks:
        for model in COMPILE_MODELS:
            stages.append(("compile", model, lambda m=model: check_compile(m, left)))
    if "startup" in checks:
        stages.append(("startup", "startup", lambda: check_startup(left)))
    if "profile" in checks:
        stages.append(("profile", "profile", lambda: check_profile(left)))
    if "pytest" in checks:
        stages.append(("pytest", "pytest", lambda: check_pytest(left)))
    for check, name, stage in stages:
        need = NEEDS_S.get(name, 0)
        if left() < need:
            log.add(
                {
                    "check": check,
                    "name": name,
                    "ok": None,
                    "detail": f"skipped: {max(0.0, left()):.0f} s of the {budget_s:.0f} s budget left, needs ~{need} s",
                }
            )
            continue
        say(f"gpu-check: {name} ({left():.0f} s left) ...")
        began = time.perf_counter()
        try:
            for row in stage():
                log.add(row | {"seconds": time.perf_counter() - began})
                began = time.perf_counter()
        except Exception as e:
            log.add({"check": check, "name": name, "ok": False, "detail": first_line(e)})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m nanobench.gpu.check",
        description="Kernel timing, the real capture path, compile rows and the gpu tests.",
    )
    parser.add_argument("--out", default="nanobench-out", help="directory for gpu-check.csv")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds for all checks")
    parser.add_argument("--checks", default=",".join(CHECKS), help=f"subset of {','.join(CHECKS)}")
    args = parser.parse_args(argv)
    checks = tuple(c.strip() for c in args.checks.split(",") if c.strip())
    unknown = [c for c in checks if c not in CHECKS]
    if unknown or not checks:
        parser.exit(
            EXIT_BAD_INPUT, f"--checks {args.checks!r}: expected names from {','.join(CHECKS)}\n"
        )
    if args.budget_s <= 0:
        parser.exit(EXIT_BAD_INPUT, f"--budget-s {args.budget_s:g}: expected a positive number\n")
    args.checks = checks
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return EXIT_BAD_INPUT
    # Compile for real: the interpreter would run Python on CUDA tensors.
    os.environ.pop("TRITON_INTERPRET", None)
    from nanobench.harness.cli.console import stderr_console, stdout_console
    from reports.gpu_check import RowLog, render_gpu_check

    progress = stderr_console()
    log = RowLog(Path(args.out) / "gpu-check.csv")
    start = time.perf_counter()
    run_checks(log, args.checks, args.budget_s, progress.print)
    render_gpu_check(stdout_console(), log.rows, log.path, time.perf_counter() - start)
    return EXIT_FAILED if any(r.get("ok") is False for r in log.rows) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
