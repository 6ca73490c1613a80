"""A history that belongs to the code it measured, screened, safe to share, seen and cleared.

The expected values come from the files the test writes (a target changed by a byte, a wild
run of known size) and from intervals computed without the wild run, never from the row under
test.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from nanobench.compile import history as compile_history
from nanobench.compile.rows import CompileRow
from nanobench.compile.rows import derive as compile_derive
from nanobench.compile.spec import WorkerSpec
from nanobench.harness.runs.code_identity import code_identity, model_sha, target_files
from nanobench.harness.runs.history_store import RunHistory, unsound
from nanobench.harness.statistics.history import MIN_RUNS, Calibration, Past, past_of
from tests.test_history import compile_windows, simulated_run

STEP = """
import helper


def factory(*, rows, prompt_len, steps, device, dtype):
    return helper.make(rows)
"""


def target_folder(tmp_path: Path) -> Path:
    """A user's target: a factory file, the sibling it imports and one it does not."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "step.py").write_text(STEP)
    (folder / "helper.py").write_text("def make(rows):\n    return rows\n")
    (folder / "unrelated.py").write_text("x = 1\n")
    return folder


def test_a_targets_identity_is_its_file_and_the_siblings_it_imports(tmp_path, monkeypatch):
    folder = target_folder(tmp_path)
    spec = f"{folder / 'step.py'}:factory"
    assert [p.name for p in target_files(spec)] == ["helper.py", "step.py"]
    before = code_identity(spec, "")
    (folder / "unrelated.py").write_text("x = 2\n")
    assert code_identity(spec, "") == before, "a sibling it never imports is not its code"
    (folder / "helper.py").write_text("def make(rows):\n    return rows + 0\n")
    assert code_identity(spec, "").target_sha != before.target_sha
    monkeypatch.chdir(folder)  # module:factory resolves from the working folder, as load does
    assert [p.name for p in target_files("step:factory")] == ["helper.py", "step.py"]
    assert target_files("hf-static") == [] and target_files("") == []


def test_a_models_identity_follows_its_weights(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(bytes(range(256)) * 8192)  # 2 MiB: head and tail sampled, middle not
    first = model_sha(str(tmp_path))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert model_sha(str(tmp_path)) != first
    (tmp_path / "config.json").write_text('{"hidden_size": 16}')
    assert model_sha(str(tmp_path)) not in (first, "")


def record_runs(store, worker, n: int, rng, slowdown: float = 1.0) -> None:
    made = [CompileRow(mode="off", status="ok", compile_s=0.0),
            CompileRow(mode="dynamic", status="ok", compile_s=3.0)]  # fmt: skip
    keys = compile_history.keys(worker, 2, ("off", "dynamic"))
    for _ in range(n):
        windows = compile_windows(rng, run_effect=math.log(slowdown) + rng.normal(0, 0.05))
        rows = compile_derive(made, 10_000, windows, history=compile_history.load(store, keys))
        assert compile_history.record(store, keys, rows, windows) == 1


def test_changed_code_starts_its_own_history_and_leaves_the_old_one_untouched(tmp_path):
    """Five runs of a target, then its file edited to a step 30% slower: the edited code's
    first runs borrow nothing and say so; the first version's file is byte for byte as it was."""
    folder, rng = target_folder(tmp_path), np.random.default_rng(1)
    store = RunHistory(tmp_path / "history")
    worker = WorkerSpec(model="", target=f"{folder / 'step.py'}:factory")
    record_runs(store, worker, 5, rng)
    old_key = compile_history.keys(worker, 2, ("dynamic",))["dynamic"].key()
    old_bytes = (store.root / f"{old_key}.jsonl").read_bytes()
    (folder / "step.py").write_text(STEP + "\n# one layer deeper: 30% slower\n")
    keys = compile_history.keys(worker, 2, ("dynamic",))
    assert keys["dynamic"].key() != old_key
    loaded = compile_history.load(store, keys)
    assert loaded["dynamic"].runs == 0
    made = [CompileRow(mode="off", status="ok", compile_s=0.0),
            CompileRow(mode="dynamic", status="ok", compile_s=3.0)]  # fmt: skip
    windows = compile_windows(rng, run_effect=math.log(1.3))
    row = compile_derive(made, 10_000, windows, history=loaded)[1]
    assert not row.speedup_variance.startswith("history"), "its own interval"
    assert row.history == "none yet for this code"
    record_runs(store, worker, MIN_RUNS - 1, rng, slowdown=1.3)
    assert compile_history.load(store, keys)["dynamic"].runs == MIN_RUNS - 1
    assert (store.root / f"{old_key}.jsonl").read_bytes() == old_bytes


def test_one_wild_run_among_ten_moves_the_lent_interval_under_five_percent():
    rng = np.random.default_rng(8)
    ten = tuple(past_of(*simulated_run(rng)) for _ in range(10))
    wild = Past(3.0, ten[0].within_var, ten[0].rounds, "2026-12-02T14:03:00Z")
    num, den, labels = simulated_run(rng)
    alone = Calibration.of(ten).interval(num, den, labels, 0.95)
    screened = Calibration.of((*ten[:5], wild, *ten[5:]))
    with_wild = screened.interval(num, den, labels, 0.95)
    assert alone is not None and with_wild is not None
    for end in ("low", "high"):
        assert abs(getattr(with_wild, end) / getattr(alone, end) - 1) < 0.05
    assert screened.out == (wild,)
    assert "1 run out of band kept out (2026-12-02 14:03, 20.1x)" in with_wild.variance_from
    unscreened = Calibration(ten + (wild,)).interval(num, den, labels, 0.95)
    assert unscreened is None or unscreened.high / alone.high > 1.05, "the test can fail"


def test_only_a_sound_run_is_recorded():
    ok = CompileRow(mode="off", status="ok")
    assert unsound([ok.status, "ok"], []) == ""
    assert unsound(["ok", "crashed: SIGKILL"], []).startswith("1 of 2 rows or probes not ok")
    from nanobench.harness.runs.gates import Gate

    noise = Gate("amortised", False, "can't tell", "inconclusive", 1.1, 0.9, 1.3)
    broken = Gate("best_engine_vs_floor", False, "probe failed", "inconclusive")
    assert unsound(["ok"], [noise]) == "", "undecided at this noise is still a sound run"
    assert unsound(["ok"], [broken]) == "gate best_engine_vs_floor had no interval"


def append_lines(root: str, n: int, tag: int) -> None:
    from nanobench.harness.runs.history_store import RunHistory
    from tests.test_history import facts

    store = RunHistory(Path(root))
    for i in range(n):
        store.record(facts(), Past(tag + i / 1e6, 1e-4, 10 + tag, "2026-12-03T00:00:00Z"))


def test_two_runs_appending_at_once_never_tear_a_line(tmp_path):
    from tests.test_history import facts

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=append_lines, args=(str(tmp_path), 300, t)) for t in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    pasts, skipped = RunHistory(tmp_path).runs(facts().key())
    assert skipped == 0 and len(pasts) == 600
    assert sorted({p.rounds for p in pasts}) == [11, 12]


def test_an_append_waits_for_the_lock_another_run_holds(tmp_path):
    """What keeps two runs' lines whole: a record takes the file's exclusive lock."""
    import fcntl
    import threading

    from tests.test_history import facts

    store = RunHistory(tmp_path)
    append_lines(str(tmp_path), 1, 1)
    path = tmp_path / f"{facts().key()}.jsonl"
    with open(path) as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        writer = threading.Thread(target=store.record, args=(facts(), Past(0.5, 1e-4, 10, "t")))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and len(path.read_text().splitlines()) == 1, "it waited"
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    writer.join(5)
    assert len(path.read_text().splitlines()) == 2


def fake_compile(monkeypatch, seed: int = 9):
    import nanobench.compile.run as compile_run
    from tests.test_history import fake_compile_sweep

    monkeypatch.setattr(
        compile_run, "interleaved_sweep", fake_compile_sweep(np.random.default_rng(seed))
    )


def test_an_unwritable_history_is_one_warning_and_the_run_is_still_measured(tmp_path, monkeypatch):
    from nanobench.cli import app
    from tests.test_decode_cmd import runner

    fake_compile(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NANOBENCH_HISTORY", str(blocker / "history"))
    result = runner.invoke(app, ["compile", "--modes", "off,dynamic", "--out", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    said = [line for line in result.stderr.splitlines() if "history" in line]
    assert len(said) == 1 and "not writable" in said[0], result.stderr
    assert "dynamic" in (tmp_path / "compile.csv").read_text()
    used = json.loads((tmp_path / "compile-history.json").read_text())
    assert used["recorded"] == 0


def test_nanobench_history_lists_shows_tells_what_a_run_borrowed_and_clears(tmp_path, monkeypatch):
    from nanobench.cli import app
    from tests.test_decode_cmd import runner

    fake_compile(monkeypatch)
    out = tmp_path / "out"
    for _ in range(MIN_RUNS + 1):
        run = runner.invoke(app, ["compile", "--modes", "off,dynamic", "--out", str(out)])
        assert run.exit_code in (0, 1), run.output
    listed = runner.invoke(app, ["history", "--json"])
    keys = json.loads(listed.stdout)["keys"]
    assert [(k["command"], k["comparison"], k["runs"]) for k in keys] == [
        ("compile", "dynamic speedup", MIN_RUNS + 1)
    ]
    table = runner.invoke(app, ["history"])
    assert table.exit_code == 0 and "dynamic speedup" in table.stdout, table.output
    assert keys[0]["key"][:12] in table.stdout
    shown = runner.invoke(app, ["history", keys[0]["key"][:6]])
    assert shown.exit_code == 0 and shown.stdout.count(" in ") >= MIN_RUNS + 1, shown.output
    borrowed = json.loads(runner.invoke(app, ["history", "--of", str(out), "--json"]).stdout)
    assert borrowed["read"][0]["runs"] == MIN_RUNS and borrowed["recorded"] == 1
    said = runner.invoke(app, ["history", "--of", str(out)])
    assert "this run recorded 1 ratio in" in said.stdout, said.output
    cleared = runner.invoke(app, ["history", "--clear", keys[0]["key"][:8]])
    assert cleared.exit_code == 0 and f"({MIN_RUNS + 1} runs)" in cleared.stdout
    assert json.loads(runner.invoke(app, ["history", "--json"]).stdout)["keys"] == []


@pytest.mark.parametrize(
    "args, says",
    [
        (["history", "nope"], "history key 'nope': no such key"),
        (["history", "--clear"], "--clear needs what to clear"),
        (["history", "--all"], "--all goes with --clear"),
        (["history", "--of", "/nonexistent"], "--of '/nonexistent': no such folder"),
        (["history", "--target", "x.py:f", "--clear"], "--target 'x.py:f': no history"),
    ],
)
def test_bad_history_input_is_one_line_and_exit_2(args, says, tmp_path):
    from nanobench.cli import app
    from tests.test_decode_cmd import runner

    append_lines(os.environ["NANOBENCH_HISTORY"], 1, 1)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_unreadable_history_folder_is_exit_2(tmp_path, monkeypatch):
    from nanobench.cli import app
    from tests.test_decode_cmd import runner

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("NANOBENCH_HISTORY", str(blocker))
    result = runner.invoke(app, ["history"])
    assert result.exit_code == 2 and "is a file, expected a folder" in result.stderr
