"""The GPU check script on a machine without one: its refusal, its row log, its table, its Makefile.

The orchestration runs on fake stages (the real ones need CUDA); the `gpu` test runs the real
capture path and holds its pool to counts made by hand.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

import nanobench.gpu.check as gpu_check
from nanobench.gpu.check import NO_CUDA, parse_junit, run_checks
from reports.gpu_check import GPU_CHECK_COLUMNS, RowLog, render_gpu_check

REPO = Path(__file__).resolve().parents[1]


def script(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "nanobench.gpu.check", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_cuda_exits_2_with_one_line(tmp_path):
    # Hide any GPU so this runs the no-CUDA path on every machine, never the full check.
    done = script("--out", str(tmp_path), env=os.environ | {"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == NO_CUDA and NO_CUDA.startswith("no CUDA device")
    assert done.stdout == ""
    assert not (tmp_path / "gpu-check.csv").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--checks", "kernel,flash"], "--checks 'kernel,flash': expected names from"),
        (["--budget-s", "0"], "--budget-s 0: expected a positive number"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args, message):
    done = script(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr


def read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def test_each_row_is_on_disk_when_the_next_is_made_and_a_failure_keeps_them(tmp_path, monkeypatch):
    log = RowLog(tmp_path / "gpu-check.csv")
    seen = []

    def check_device():
        yield {"check": "device", "name": "fake", "ok": True}

    def check_kernel(hbm):
        yield {"check": "hbm", "name": "copy", "ok": True, "gbps": 4000.0}
        seen.append(read(log.path)["check"].tolist())  # the hbm row is already on disk
        yield {"check": "kernel", "name": "triton 1x1024", "ok": True, "ms": 0.01, "gbps": 1.0}
        seen.append(read(log.path)["check"].tolist())
        raise RuntimeError("device lost\nsecond line")

    monkeypatch.setattr(gpu_check, "check_device", check_device)
    monkeypatch.setattr(gpu_check, "check_kernel", check_kernel)
    run_checks(log, ("kernel",), budget_s=100.0, say=lambda _m: None)
    assert seen == [["device", "hbm"], ["device", "hbm", "kernel"]]
    frame = read(log.path)
    assert frame["check"].tolist() == ["device", "hbm", "kernel", "kernel"]
    assert frame["detail"].iloc[-1] == "RuntimeError: device lost"
    assert frame["ok"].tolist() == [True, True, True, False]
    assert list(frame.columns[: len(GPU_CHECK_COLUMNS)]) == GPU_CHECK_COLUMNS


def test_a_stage_past_the_budget_is_a_skipped_row(tmp_path, monkeypatch):
    log = RowLog(tmp_path / "gpu-check.csv")
    ran = []
    monkeypatch.setattr(gpu_check, "check_device", lambda: iter([{"check": "device", "ok": True}]))
    monkeypatch.setattr(gpu_check, "check_capture", lambda: ran.append("capture") or iter([]))
    # capture needs ~20 s; a 5 s budget leaves less than that after the device row
    run_checks(log, ("capture",), budget_s=5.0, say=lambda _m: None)
    assert ran == []
    (device, skipped) = log.rows
    assert skipped["check"] == "capture" and skipped["ok"] is None
    assert re.fullmatch(r"skipped: \d+ s of the 5 s budget left, needs ~20 s", skipped["detail"])


def test_pytest_stopped_by_the_budget_is_a_skip_that_says_so(monkeypatch):
    def run_past_the_budget(cmd, timeout, **kwargs):
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(gpu_check.subprocess, "run", run_past_the_budget)
    (row,) = gpu_check.check_pytest(lambda: 12.0)
    assert (row["check"], row["ok"]) == ("pytest", None)
    assert row["detail"] == "skipped: the budget cut it after 12 s"


def test_a_compile_mode_stopped_by_the_budget_is_a_skip_and_the_others_keep_their_rows(
    monkeypatch,
):
    from types import SimpleNamespace

    import engine.sources
    import nanobench.compile.bench
    import nanobench.compile.rows

    # The fresh worker's own word for a mode past its timeout (harness.workers.fresh): "timeout".
    statuses = {"off": "ok", "dynamic": "timeout", "static": "error: boom"}

    def sweep(spec, modes, timeout):
        return [SimpleNamespace(mode=modes[0], status=statuses[modes[0]])]

    def derive(done, horizon):
        return [
            SimpleNamespace(status=r.status, step_ms=1.0, compile_s=None, builds=1, speedup=None)
            for r in done
        ]

    monkeypatch.setattr(engine.sources, "materialize_preset", lambda name: name)
    monkeypatch.setattr(nanobench.compile.bench, "sweep", sweep)
    monkeypatch.setattr(nanobench.compile.rows, "derive", derive)
    rows = list(gpu_check.check_compile("tiny", lambda: 100.0))
    assert [(r["name"], r["ok"]) for r in rows] == [
        ("tiny off", True),
        ("tiny dynamic", None),
        ("tiny static", False),
    ]
    assert re.fullmatch(r"skipped: the budget cut it after \d+ s", rows[1]["detail"])
    assert rows[2]["detail"] == "error: boom"


FAKE_ROWS = [
    {"check": "hbm", "name": "copy 1024 MiB", "ok": True, "gbps": 4012.4},
    {
        "check": "kernel",
        "name": "triton 64x8192",
        "ok": True,
        "ms": 0.6125,
        "gbps": 3512.2,
        "hbm_fraction": 0.8753,
        "speedup": 12.04,
    },
    {"check": "kernel", "name": "reference 256x32768", "ok": None, "ms": None, "detail": "not run"},
    {
        "check": "capture",
        "name": "tiny triton bfloat16",
        "ok": True,
        "replays": 32,
        "max_abs_diff": 0.0,
        "tolerance": 0.125,
        "pool_reserved_bytes": 2_097_152,
        "predicted_pool_bytes": 65_536,
        "pool_diff_pct": 3100.0,
    },
    {
        "check": "capture-memory",
        "name": "llama-3.2-1b triton 64x2048 bfloat16 one graph",
        "ok": True,
        "traced_peak_bytes": 50 * 2**20,
        "measured_peak_bytes": 83 * 2**20,
        "library_bytes": 32 * 2**20,
        "diff_pct": 2.0,
    },
    {
        "check": "compile",
        "name": "tiny static",
        "ok": True,
        "step_ms": 1.234,
        "compile_s": 20.5,
        "speedup": 2.5,
    },
    {
        "check": "pytest",
        "name": "pytest -m gpu",
        "ok": False,
        "passed": 9,
        "failed": 1,
        "skipped": 0,
        "errors": 0,
        "detail": "tests/x::t: boom",
    },
]


def test_table_on_fake_rows(tmp_path):
    log = RowLog(tmp_path / "gpu-check.csv")
    for row in FAKE_ROWS:
        log.add(row)
    console = Console(record=True, width=250)
    render_gpu_check(console, log.rows, log.path, 42.0)
    text = console.export_text()
    assert "gpu-check (42 s)" in text
    for expected in (
        "4012 GB/s device-to-device copy",
        "612.5 us, 3512 GB/s (88% of HBM), x12.0 vs reference",
        # 2_097_152 B = 2 * 1024**2 and 65_536 B = 64 * 1024: binary units, named so
        "32 replays, diff 0.0e+00 (tol 1.2e-01), pool 2.0 MiB vs predicted 64.0 KiB (+3100%)",
        "peak 51.0 MiB (+32.0 MiB library) vs traced 50.0 MiB (+2.0%)",
        "1.23 ms/step, compile 20.5 s, x2.50 vs off",
        "9 passed, 1 failed, 0 skipped, 0 errors",
        "tests/x::t: boom",
    ):
        assert expected in text, expected
    marks = [line.split("│")[3].strip() for line in text.splitlines() if line.count("│") > 4]
    assert marks == ["pass", "pass", "skip", "pass", "pass", "pass", "FAIL"]
    assert len(read(log.path)) == len(FAKE_ROWS)


def test_junit_counts_and_failures():
    xml = (
        '<testsuites><testsuite tests="5" failures="1" errors="1" skipped="1">'
        '<testcase classname="tests.a" name="t_ok"/>'
        '<testcase classname="tests.a" name="t_ok2"/>'
        '<testcase classname="tests.a" name="t_bad"><failure message="assert 1 == 2&#10;more"/>'
        "</testcase>"
        '<testcase classname="tests.b" name="t_err"><error message="boom"/></testcase>'
        '<testcase classname="tests.b" name="t_skip"><skipped message="no cuda"/></testcase>'
        "</testsuite></testsuites>"
    )
    counts, failures = parse_junit(xml)
    assert counts == {"passed": 2, "failed": 1, "skipped": 1, "errors": 1}
    assert failures == ["tests.a::t_bad: assert 1 == 2", "tests.b::t_err: boom"]


def make_n(directory: Path, *args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-C", str(directory), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_gpu_check_runs_the_system_python_and_installs_nothing():
    out = make_n(REPO, "gpu-check")
    assert "PYTHONPATH=. python3 -m nanobench.gpu.check --out ${OUT:-nanobench-out}" in out
    assert "pip" not in out and "venv" not in out


def test_setup_reinstalls_torch_when_the_spec_changes(tmp_path):
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        (tmp_path / name).write_text((REPO / name).read_text())
    cpu, gpu = "torch==2.13.0", "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    first = make_n(tmp_path, "setup", f"TORCH_SPEC={cpu}")
    (stamp,) = re.findall(r"touch (\.venv/\.torch-\d+)", first)
    # Pretend that setup ran with the CPU spec: its stamp and the installed package are there.
    (tmp_path / ".venv/bin").mkdir(parents=True)
    (tmp_path / stamp).touch()
    os.utime(tmp_path / "pyproject.toml", (1, 1))
    os.utime(tmp_path / "requirements.lock", (1, 1))
    (tmp_path / ".venv/bin/nanobench").touch()
    assert "pip" not in make_n(tmp_path, "setup", f"TORCH_SPEC={cpu}")
    again = make_n(tmp_path, "setup", f"TORCH_SPEC={gpu}")
    assert f"pip install --quiet {gpu}" in again
    assert "pip uninstall --quiet --yes torch" in again


@pytest.mark.gpu
@pytest.mark.parametrize("output", ["shared", "per-graph"])
@pytest.mark.parametrize("kernel", ["reference", "triton"])
def test_capture_path_on_cuda_holds_its_outputs_and_the_predicted_rectangle(kernel, output):
    from nanobench.gpu.capture import check_capture_path

    row = check_capture_path(kernel, capture_output=output)
    assert row["ok"], row
    assert row["steps"] == row["replays"] == 32 and row["recorded_mid_run"] == 0
    # tiny: 8 heads, vocab 4096; list: rows 1, 2, 4, 8 x widths 64..256 (reference) or one width
    widths = 4 if kernel == "reference" else 1
    assert row["shapes"] == 4 * widths
    outputs = widths * (1 + 2 + 4 + 8) * 4096 * 4
    if output == "per-graph":
        # Every graph keeps its fp32 logits (rows x 4096 x 4 bytes) alive in the pool.
        assert row["graph_output_bytes"] == outputs
        assert row["pool_allocated_bytes"] >= outputs, row
    else:
        # One [8, 4096] fp32 buffer, allocated with the engine, before the walk.
        assert row["graph_output_bytes"] == 8 * 4096 * 4
        assert row["pool_allocated_bytes"] < outputs, row
    if kernel == "reference":
        # nanobench's prediction: the largest score rectangle, 8 rows x 8 heads x 256 x fp32
        assert row["predicted_pool_bytes"] == 8 * 8 * 256 * 4
        assert row["pool_peak_bytes"] >= row["predicted_pool_bytes"], row
    else:
        assert row["predicted_pool_bytes"] == 0 and row["pool_diff_pct"] is None


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["reference", "triton"])
def test_one_graphs_allocator_peak_is_its_traced_peak(kernel):
    from engine.config import preset
    from nanobench.gpu.memory_check import cuda_capture_check

    found = cuda_capture_check(preset("tiny").config, kernel, "bfloat16", rows=8, width=256)
    assert found["traced_peak_bytes"] > 0
    assert abs(found["diff_pct"]) <= 10.0, found


def test_capture_path_on_cpu_replays_every_step_equal_to_eager():
    from nanobench.gpu.capture import check_capture_path

    row = check_capture_path("reference", dtype="float32", device="cpu")
    assert row["ok"], row
    assert row["capture_output"] == "shared" and row["graph_output_bytes"] == 8 * 4096 * 4
    per_graph = check_capture_path(
        "reference", dtype="float32", device="cpu", capture_output="per-graph"
    )
    # rows 1 + 2 + 4 + 8 at each of 4 widths keep their own [rows, 4096] fp32 logits
    assert per_graph["ok"], per_graph
    assert per_graph["graph_output_bytes"] == per_graph["traced_kept_bytes"] == 4 * 15 * 4096 * 4
    assert row["steps"] == row["replays"] == 32 and row["recorded_mid_run"] == 0
    assert row["shapes"] == 16  # rows 1, 2, 4, 8 x widths 64, 128, 192, 256
    # Same kernels on the same shapes, on CPU: the eager recorder's replays are bitwise eager.
    assert row["max_abs_diff"] == 0.0
    # nanobench's prediction: the largest score rectangle, 8 rows x 8 heads x 256 x fp32
    assert row["predicted_pool_bytes"] == 8 * 8 * 256 * 4
    assert "pool_reserved_bytes" not in row and row["pool_diff_pct"] is None  # no device memory


def conftest_decides(cuda: bool) -> str:
    """TRITON_INTERPRET after conftest is imported on a machine with or without CUDA."""
    code = (
        "import os, torch\n"
        f"torch.cuda.is_available = lambda: {cuda}\n"
        "import tests.conftest\n"
        "print(os.environ.get('TRITON_INTERPRET', 'unset'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_conftest_turns_the_interpreter_on_only_without_cuda():
    assert conftest_decides(cuda=False) == "1"
    assert conftest_decides(cuda=True) == "unset"


def test_no_test_module_sets_the_interpreter():
    # conftest is the one place that decides; a module setting it at import would force the
    # interpreter on CUDA tensors for every test that reaches Triton after it.
    setters = re.compile(r"environ(\[.TRITON_INTERPRET.\]\s*=|\.setdefault\(.TRITON_INTERPRET)")
    found = [p.name for p in (REPO / "tests").glob("*.py") if p.name != "conftest.py"]
    assert [n for n in found if setters.search((REPO / "tests" / n).read_text())] == []


def test_startup_rows_are_each_start_and_a_miss_or_failure_is_not_ok():
    from nanobench.gpu.check import startup_rows

    ok = {"mode": "dynamic", "kind": "hot", "status": "ok", "ready_s": 9.5, "first_token_s": 9.4,
          "build_s": 3.25, "cache_load_s": 1.0, "runtime_s": 0.125, "unattributed_s": 0.2,
          "fx_hits": 1, "fx_misses": 0, "aot_hits": 1, "aot_misses": 0, "missed": None,
          "compile_s": 5.0}  # fmt: skip
    missed = {**ok, "kind": "warm", "missed": "graph 1: FX graph cache"}
    failed = {"mode": "dynamic", "kind": "cold", "status": "timeout"}
    rows = list(startup_rows({"rows": [ok, missed, failed]}))
    assert [(r["name"], r["ok"]) for r in rows] == [
        ("tiny dynamic hot", True), ("tiny dynamic warm", False), ("tiny dynamic cold", False)]  # fmt: skip
    assert "build 3.25 s" in rows[0]["detail"] and "first replay 0.125 s" in rows[0]["detail"]
    assert rows[1]["detail"].endswith("missed graph 1: FX graph cache")
    assert rows[2]["detail"] == "timeout"


def test_profile_rows_say_each_modes_device_side_and_fail_a_mode_without_one():
    from dataclasses import asdict

    from nanobench.gpu.profile_check import profile_rows
    from nanobench.profile.rows import ProfileRow

    # as `nanobench profile --json` writes them (H200-shaped figures, recorded, not measured)
    common = dict(step_ms=2.68, host_share=0.3, overhead=0.4, launches_per_step=60.0)
    dynamic = ProfileRow("dynamic", device_ms_per_step=1.2, device_busy_share=0.45,
                         graph_replays_per_step=0.0, graph_device_share=0.0, **common)  # fmt: skip
    graphs = ProfileRow("reduce-overhead", device_ms_per_step=1.1, device_busy_share=0.9,
                        graph_replays_per_step=1.0, graph_device_share=0.98,
                        cudagraph_skips="skipping cudagraphs due to mutated inputs", **common)  # fmt: skip
    host_only = ProfileRow("off", **common)  # no device record came back
    doc = {"rows": [asdict(r) for r in (host_only, dynamic, graphs)],
           "gates": [{"name": "categories_add_up[dynamic]", "passed": True},
                     {"name": "categories_add_up[reduce-overhead]", "passed": False}]}  # fmt: skip
    off, dyn, ro = profile_rows(doc)
    assert dyn["name"] == "static_kv dynamic"
    assert (off["ok"], off["detail"]) == (False, "no device time recorded")
    assert dyn["ok"] is True
    assert (
        "device 1.200 ms (busy 45% of the host's step), 60 launches and 0 graph replays"
        in (dyn["detail"])
    )
    # its categories did not add up: not ok, and the skip's reason is in its detail
    assert ro["ok"] is False and "98% of device time in graphs" in ro["detail"]
    assert ro["detail"].endswith("cudagraphs skipped: skipping cudagraphs due to mutated inputs")
