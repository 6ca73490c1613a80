"""`compile --try`: each knob a side of one fleet, measured against plain torch.compile.

Checked against peers: a knob's settings against the installed torch's own config entries, a
fresh process's config after a side is applied, each change's ratio against the geometric
mean of the paired rounds computed here by hand, its interval by a seeded A/A through the
run's own stop rule, and a changed output by Inductor's own bug injector
(`cpp.inject_relu_bug_TESTING_ONLY=accuracy` adds 1 to every ReLU it generates).
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.compile.bench import comparisons
from nanobench.compile.rows import CompileRow
from nanobench.compile.run import held_to_base
from nanobench.compile.spec import CompileSpec
from nanobench.compile.vs import changes
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.change import CANT_TELL, SLOWER
from nanobench.harness.runs.sides import Sides
from nanobench.harness.step.knobs import VOCABULARY, checked_side, parse_side
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import RoundPlan, Window, run_rounds
from tests.helpers import noisy_fleet, text_tables

runner = CliRunner()
KNOB = "cpp-wrapper"
MEMBERS = [Member("plain", "off"), Member("plain", "dynamic"), Member(KNOB, "dynamic")]
TRIED = Sides.of(CompileSpec(modes=("off", "dynamic"), tries=(KNOB,)))


def test_every_named_knob_sets_entries_the_installed_torch_has():
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor

    configs = {"inductor": inductor, "dynamo": dynamo}
    for name, knob in VOCABULARY.items():
        for s in knob.settings:
            assert s.key in configs[s.config]._config, (name, s.key)
            assert type(configs[s.config]._config[s.key].default) is type(s.value), (name, s)
        if knob.guard_filter:
            assert callable(getattr(torch.compiler, knob.guard_filter)), name
    # unsafe is said of exactly the knobs whose torch function torch itself names unsafe
    assert (
        [n for n, k in VOCABULARY.items() if k.unsafe]
        == [n for n, k in VOCABULARY.items() if k.guard_filter.endswith("_unsafe")]
        == ["guard-filter"]
    )


def test_the_docs_table_is_the_vocabulary():
    page = (Path(__file__).resolve().parent.parent / "docs" / "knobs.md").read_text()
    cells = [line.split("|") for line in page.splitlines() if line.startswith("| `")]
    table = {c[1].strip(" `"): c[2] for c in cells}
    assert list(table) == list(VOCABULARY)
    for name, knob in VOCABULARY.items():
        for s in knob.settings:
            assert f"{s.config}.{s.key}={s.value}" in table[name], name
        assert knob.guard_filter in table[name], name


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nope", "--try nope: not a knob; expected one of cpp-wrapper"),
        ("inductor.x", "--try inductor.x: not a knob"),
        ("plain", "--try plain: the side every knob is measured against"),
        ("freezing+freezing", "a knob named twice in one side"),
        ("inductor.no_such_key=1", f"torch {torch.__version__} has no inductor.no_such_key"),
        ("dynamo.recompile_limit=abc", "'abc' is not an int (its default is 8)"),
        ("inductor.cpp_wrapper=maybe", "'maybe' is not a bool (its default is False)"),
    ],
)
def test_a_knob_torch_does_not_know_is_one_line(text, says):
    with pytest.raises(BadInput, match=None) as e:
        checked_side(text)
    assert says in str(e.value)


def test_a_generic_value_is_parsed_as_its_entry_s_type():
    assert [s.value for s in checked_side("dynamo.recompile_limit=12")] == [12]
    assert [s.value for s in checked_side("inductor.cpp_wrapper=False")] == [False]
    settings = checked_side("inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy+freezing")
    assert [(s.key, s.value) for s in settings] == [
        ("cpp.inject_relu_bug_TESTING_ONLY", "accuracy"), ("freezing", True)
    ]  # fmt: skip
    assert [k.name for k in parse_side("cpp-wrapper+guard-filter")] == [KNOB, "guard-filter"]


def test_a_worker_applies_its_side_and_nothing_else():
    code = textwrap.dedent("""
        import torch._dynamo.config as d, torch._inductor.config as i
        from nanobench.harness.step.knobs import applied
        applied("cpp-wrapper+dynamo.recompile_limit=3")
        print(i.cpp_wrapper, d.recompile_limit, i.freezing, d.specialize_float)
    """)  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "3", "False", "False"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--try", "nope"], "--try nope: not a knob"),
        (["--try", "inductor.no_such_key=1"], "has no inductor.no_such_key"),
        (["--try", KNOB, "--backend", "eager"], "cpp-wrapper sets Inductor, which --backend "
                                                "eager never runs"),
        (["--try", KNOB, "--modes", "off"], "--try: knobs act on a compiled mode"),
        (["--try", KNOB, "--vs-path", "unplanned"], "--try with --vs or --vs-path"),
        (["--try", KNOB, "--no-slower", "speedup"], "use --no-slower step_ms"),
        (["--try", f"{KNOB},{KNOB}"], "named twice"),
    ],
)  # fmt: skip
def test_a_try_asked_wrongly_is_one_line_and_exit_2_before_any_worker(args, says, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["compile", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert not (out / "compile.csv").exists()


def test_a_guard_filter_beside_reduce_overhead_is_refused_as_torch_compile_would():
    # (on a CUDA machine; here the spec's own check, as the command runs it after --device's)
    from nanobench.compile.spec import CompileSpec, knob_rules

    spec = CompileSpec(modes=("off", "reduce-overhead"), tries=("guard-filter",),
                       target="hf-static", device="cuda")  # fmt: skip
    with pytest.raises(BadInput, match="torch.compile takes a mode or options, not both"):
        knob_rules(spec)
    knob_rules(replace(spec, tries=(KNOB,)))  # a config knob rides beside any mode


def test_a_knob_is_paired_with_plain_and_its_speedup_is_over_plain_s_off():
    found = {(c.name, str(c.numerator), str(c.denominator), c.family)
             for c in comparisons(MEMBERS, TRIED)}  # fmt: skip
    assert found == {
        ("plain dynamic", "plain off", "plain dynamic", 1),
        (f"{KNOB} dynamic", "plain off", f"{KNOB} dynamic", 1),
        (f"{KNOB} dynamic / plain", f"{KNOB} dynamic", "plain dynamic", 1),
    }


def window(member: Member, r: int, ms: float) -> Window:
    return Window(member.name, r, "ok", (ms, ms * 1.01, ms * 0.99), (0, 0, 0), (True,) * 3, 1,
                  member.side)  # fmt: skip


def rows(builds: int = 1) -> list[CompileRow]:
    return [CompileRow(mode=m.name, side=m.side, status="ok", builds=builds, unique_graphs=1,
                       graph_breaks=0, fell_back=False, shapes=1, step_ms=1.0, compile_s=2.0)
            for m in MEMBERS]  # fmt: skip


def test_a_knob_s_change_is_the_geometric_mean_of_its_paired_rounds():
    rng = np.random.default_rng(5)
    base = {"off": 10.0, "dynamic": 4.0}
    slower = {"plain": 1.0, KNOB: 1.25}
    windows = [window(m, r, base[m.name] * slower[m.side] * math.exp(0.03 * rng.standard_normal()))
               for r in range(1, 9) for m in MEMBERS]  # fmt: skip
    found = {(c.member, c.column): c for c in changes(rows(), windows, 0.95, TRIED)}
    med = {(m, w.round): w.ms[0] for w in windows for m in [w.member]}
    by_hand = math.exp(np.mean([math.log(med[(Member(KNOB, "dynamic"), r)]
                                         / med[(Member("plain", "dynamic"), r)])
                                for r in range(1, 9)]))  # fmt: skip
    step = found[(f"{KNOB} dynamic", "step_ms")]
    assert step.change == pytest.approx(by_hand, abs=1e-4) and step.verdict == SLOWER
    assert step.before == 1.0 and step.low < by_hand < step.high
    # both sides' speedups are over plain's off: no speedup change, and off is not a knob's
    assert not [k for k in found if k[1] == "speedup" or k[0].endswith(" off")]
    assert found[(f"{KNOB} dynamic", "builds")].verdict == "same"


def test_a_knob_at_its_default_decides_no_more_often_than_the_level():
    # 20 seeded A/A runs of plain against a knob that changes nothing, through the stop rule.
    plan = RoundPlan(12, 12, 0.03, 1e9)
    cmps = comparisons(MEMBERS, TRIED)
    claimed = 0
    for seed in range(20):
        fleet = noisy_fleet(3, seed, {m: 0.15 for m in MEMBERS}, hits=0.0)
        windows = run_rounds(fleet, plan, cmps)
        step = next(c for c in changes(rows(), windows, 0.95, TRIED)
                    if c.column == "step_ms")  # fmt: skip
        assert step.low is not None, step
        claimed += step.verdict != CANT_TELL
    assert claimed <= 3, claimed  # more than 3 of 20 at 95% has p = 1.6%


def fingerprints(logits: torch.Tensor) -> list:
    """Per step, per row: argmax then the 8 largest values, computed here by sorting."""
    out = []
    for step in logits:  # (B, V)
        rows_ = []
        for row in step.tolist():
            ordered = sorted(row, reverse=True)
            rows_.append([float(row.index(ordered[0]))] + [round(v, 6) for v in ordered[:8]])
        out.append(rows_)
    return out


def test_a_knob_whose_output_leaves_plain_s_fails_its_row_and_a_near_tie_does_not():
    from nanobench.harness.step.output_check import fingerprint

    g = torch.Generator().manual_seed(2)
    plain = torch.randn(3, 2, 50, generator=g)  # (S, B, V)
    got = [fingerprint(step) for step in plain]
    assert got == fingerprints(plain)
    first, second = plain[0, 0].topk(2).indices.tolist()
    plain[0, 0, second] = plain[0, 0, first] - 1e-5
    broken, tiny, tie = plain.clone(), plain.clone(), plain.clone()
    top = plain[1, 1].argmax()
    broken[1, 1, top] += 0.02  # step 2, row 1: its top logit moved 7x the tolerance (~3e-3)
    tiny += 1e-5 * torch.randn(tiny.shape, generator=g)
    # a near tie flipped step 1's token (values within tolerance): the later steps' inputs
    # differ, so their far-off values say nothing
    tie[0, 0, second], tie[0, 0, first] = plain[0, 0, first], plain[0, 0, first] - 1e-5
    tie[1:] += 1.0
    made = [CompileRow(mode="dynamic", side=s, status="ok", outputs=fingerprints(x))
            for s, x in (("plain", plain), (KNOB, broken), ("free-tensors", tiny),
                         ("freezing", tie))]  # fmt: skip
    tried = Sides.of(CompileSpec(modes=("dynamic",), tries=(KNOB, "free-tensors", "freezing")))
    held = {r.side: r.status for r in held_to_base(made, tried, "float32")}
    assert held["plain"] == "ok" and held["free-tensors"] == "ok" and held["freezing"] == "ok"
    assert held[KNOB].startswith("output changed: step 2 row 1's top logits differ by 0.02")
    assert held[KNOB].endswith("float32) against plain dynamic")


RELU_STEP = """
import torch


class ReluStep:
    def __init__(self, rows, steps):
        g = torch.Generator().manual_seed(0)
        self.w1 = torch.randn(32, 64, generator=g) / 6  # (W, 2W)
        self.w2 = torch.randn(64, 48, generator=g) / 8  # (2W, V)
        self.x = torch.randn(steps, rows, 32, generator=g)  # (S, B, W)

    def forward(self, x):  # x (B, W)
        return torch.relu(x @ self.w1) @ self.w2  # (B, V)

    def step_inputs(self, step):
        return (self.x[step],), {}


def factory(*, rows, prompt_len, steps, device, dtype):
    return ReluStep(rows, steps)
"""


@pytest.mark.slow
def test_a_knob_that_changes_the_output_is_a_failed_row_and_one_at_its_default_is_not(tmp_path):
    """One run, as a user types it: Inductor's ReLU bug injector against plain, and
    cpp_wrapper set to its default (an A/A), each its own side."""
    step = tmp_path / "relu_step.py"
    step.write_text(RELU_STEP)
    bug, same = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", "inductor.cpp_wrapper=false"
    out = tmp_path / "out"
    result = runner.invoke(app, [
        "compile", "--target", f"{step}:factory", "--modes", "off,dynamic", "--steps", "3",
        "--rows", "2", "--threads", "1", "--processes", "1", "--rounds", "1",
        "--max-rounds", "1", "--try", f"{bug},{same}", "--out", str(out),
    ])  # fmt: skip
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"FAIL measured[{bug} dynamic]: output changed: step 1 row 0's top logits" in text
    assert f"measured[{same} dynamic]" not in text
    assert f"measured: {same} dynamic: step" in text and "against plain, can't tell" in text
    table = text_tables(result.output)[0]
    assert table.header == ("", "measure", "plain", "knob", "change")
    graphs = [r for r in table.rows if r[1] == "graphs"]
    assert [r[2:] for r in graphs] == [("1", "1", "same")] * 2  # a failed row keeps its counts
    assert [r[0] for r in table.rows if r[0]] == [f"{bug} dynamic", f"{same} dynamic"]
    with open(out / "compile.csv") as f:
        written = {(r["side"], r["mode"]): r for r in csv.DictReader(f)}
    assert set(written) == {("plain", "off"), ("plain", "dynamic"), (bug, "dynamic"),
                            (same, "dynamic")}  # fmt: skip
    assert written[(same, "dynamic")]["status"] == "ok"
    assert written[(bug, "dynamic")]["status"].startswith("output changed")
    assert "outputs" not in written[("plain", "dynamic")]
    # a knob side has no off of its own: its speedup is plain off's round over its own, as the
    # saved samples give them (the median of each window's steady steps)
    with open(out / "compile-samples.csv") as f:
        samples = [r for r in csv.DictReader(f) if r["round"] == "1" and r["steady"] == "True"]

    def median(side, mode):
        return float(np.median([float(r["ms"]) for r in samples
                                if (r["side"], r["mode"]) == (side, mode)]))  # fmt: skip

    by_hand = median("plain", "off") / median(same, "dynamic")
    assert float(written[(same, "dynamic")]["speedup"]) == pytest.approx(by_hand, rel=2e-3)
    # a saved --try run compares with another by side and mode (here with itself)
    compared = runner.invoke(app, ["compare", str(out), str(out)])
    assert compared.exit_code == 0, compared.output
    named = [r[0] for r in text_tables(compared.output)[0].rows if r[0]]
    assert named == ["plain off", "plain dynamic", f"{bug} dynamic", f"{same} dynamic"]
    with open(out / "compile-changes.csv") as f:
        members = {r["member"] for r in csv.DictReader(f)}
    assert members == {f"{bug} dynamic", f"{same} dynamic"}


# -- decode --try: a knob is a side of the decode fleet too ---------------------------------------

DECODE = ("engine-eager", "engine-compiled", "hf-eager")


def test_a_decode_knob_side_runs_the_compiled_systems_and_borrows_plain_s_floor():
    from nanobench.decode.bench import PROBE, comparisons_of
    from nanobench.decode.spec import DecodeSpec

    members = [Member("plain", n) for n in (PROBE, *DECODE)] + [Member(KNOB, "engine-compiled")]
    found = {(c.name, str(c.numerator), str(c.denominator))
             for c in comparisons_of(members, Sides.of(DecodeSpec(systems=DECODE, tries=(KNOB,))))}  # fmt: skip
    knob = {f for f in found if f[0].startswith(KNOB)}
    assert knob == {
        (f"{KNOB} engine-compiled/hf-eager", f"{KNOB} engine-compiled", "plain hf-eager"),
        (f"{KNOB} engine-compiled/floor", f"{KNOB} engine-compiled", f"plain {PROBE}"),
        (f"{KNOB} engine-compiled / plain", f"{KNOB} engine-compiled", "plain engine-compiled"),
    }


def fake_tried(knob_ms: float, knob_tokens):
    """A stand-in for `decode.bench.sweep_sides`: plain's probe and systems, the knob's
    compiled system (its tokens `knob_tokens`), five rounds each."""

    def sweep_sides(runs, members, plan, **kw):
        from nanobench.decode.bench import PROBE
        from nanobench.decode.rows import ProbeRow, SystemRow

        assert (
            kw["sides"].pairs == (("plain", KNOB),)
            and runs[KNOB].knob == KNOB
            and not runs["plain"].knob
        )
        listener = kw["listener"]
        for m in members:
            if m.name == PROBE:
                listener.on_row(ProbeRow("ok", PROBE, side=m.side, bandwidth_gbs=10.0,
                                         gemm_gflops=1e3))  # fmt: skip
                continue
            tokens = knob_tokens if m.side == KNOB else [[1, 2], [3, 4]]
            listener.on_row(SystemRow(m.name, "ok", side=m.side, deterministic=True,
                                      builds_measured=0, tokens=tokens))  # fmt: skip
        rng = np.random.default_rng(0)
        for r in range(1, 6):
            for m in members:
                ms = (knob_ms if m.side == KNOB else 4.0) * math.exp(0.03 * rng.standard_normal())
                listener.on_window(Window(m.name, r, "ok", (ms,) * 3, (0,) * 3, (True,) * 3,
                                          (r - 1) % 3 + 1, m.side))  # fmt: skip

    return sweep_sides


def test_a_decode_try_tables_each_knob_against_plain_and_fails_one_whose_tokens_differ(
    tmp_path, monkeypatch
):
    import nanobench.decode.bench as bench

    args = ["decode", "--systems", ",".join(DECODE), "--try", KNOB, "--out", str(tmp_path)]
    monkeypatch.setattr(bench, "sweep_sides", fake_tried(6.0, [[1, 2], [3, 4]]))
    records = tmp_path / "records.json"
    result = runner.invoke(app, [*args, "--check", "--no-slower", "step_ms", "--json",
                                 "--export-json", str(records)])  # fmt: skip
    assert result.exit_code == 1, result.output  # 4 ms -> 6 ms: decided slower
    doc = json.loads(result.stdout)
    # the benchmark-DB records name the knob in the backend, its side in extra_info
    steps = {r["model"]["backend"]: r for r in json.loads(records.read_text())
             if r["metric"]["name"] == "step_latency_ms"}  # fmt: skip
    assert set(steps) == {*DECODE, f"engine-compiled {KNOB}"}
    assert steps[f"engine-compiled {KNOB}"]["benchmark"]["extra_info"]["side"] == KNOB
    rows = {(r["side"], r["system"]): r for r in doc["rows"]}
    assert set(rows) == {("plain", s) for s in DECODE} | {(KNOB, "engine-compiled")}
    knob = rows[(KNOB, "engine-compiled")]
    # its tokens held to plain's reference, its floor plain's probe's
    assert knob["tokens_match"] is True and knob["tokens_ref"] == "engine-eager"
    assert knob["ratio_vs_floor"] is not None
    assert {g["name"]: g["verdict"] for g in doc["gates"]} == {
        f"no_slower[step_ms {KNOB} engine-compiled]": "fail"}  # fmt: skip
    table = runner.invoke(app, args)
    assert text_tables(table.output)[0].header == ("", "measure", "plain", "knob", "change")
    monkeypatch.setattr(bench, "sweep_sides", fake_tried(4.0, [[1, 2], [3, 5]]))
    result = runner.invoke(app, [*args, "--json"])
    doc = json.loads(result.stdout)
    knob = next(r for r in doc["rows"] if r["side"] == KNOB)
    assert knob["tokens_match"] is False and result.exit_code == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--try", KNOB, "--systems", "engine-eager,hf-eager"], "knobs act on a compiled system"),
        (["--try", KNOB, "--vs-dtype", "bfloat16"], "--try with --vs-model or --vs-dtype"),
        (["--try", KNOB, "--backend", "eager"], "which --backend eager never runs"),
        (["--try", "inductor.nope=1"], "has no inductor.nope"),
    ],
)
def test_a_decode_try_asked_wrongly_is_one_line_and_exit_2(args, says, tmp_path):
    result = runner.invoke(app, ["decode", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_clean_mode_is_pointed_at_the_try_that_measures_its_knobs_and_a_try_run_quotes_it():
    from nanobench.compile.remedies import knobs_measured, knobs_next
    from nanobench.compile.spec import CompileSpec
    from nanobench.harness.runs.change import Change

    def row(mode, **kw):
        return CompileRow(**{"mode": mode, "status": "ok", "fell_back": False, "recompiles": 0,
                             **kw})  # fmt: skip

    clean = [row("off"), row("dynamic"), row("static", recompiles=7, remedies=["bucket: ..."])]
    (line,) = knobs_next(clean, CompileSpec())
    assert line.startswith("dynamic: compiles clean")
    assert "nanobench compile --modes off,dynamic --try cpp-wrapper,guard-filter,freezing" in line
    target = knobs_next(clean, CompileSpec(target="step.py:factory"))[0]
    assert "nanobench compile --target step.py:factory --modes off,dynamic --try" in target
    # under the eager backend only the knobs it reads: the command must run as printed
    eager = knobs_next(clean, CompileSpec(backend="eager"))[0]
    assert "--backend eager --modes off,dynamic --try guard-filter measures" in eager
    assert knobs_next([row("dynamic", fell_back=True), row("static", recompiles=1)],
                      CompileSpec()) == []  # fmt: skip
    step = Change(f"{KNOB} dynamic", "step_ms", "timing", 3.4, 3.1, 0.91, 0.87, 0.95,
                  verdict="faster")  # fmt: skip
    builds = Change(f"{KNOB} dynamic", "builds", "count", 1, 1, 0)
    assert knobs_measured([builds, step]) == [
        f"measured: {KNOB} dynamic: step 0.91x [0.87, 0.95] against plain, faster"
    ]


def test_the_estimate_counts_each_side_s_own_members():
    from nanobench.compile.spec import CompileSpec
    from nanobench.decode.spec import DecodeSpec

    # by hand: plain off and dynamic, then dynamic under each of two knobs; 3 processes each
    spec = CompileSpec(modes=("off", "dynamic"), tries=(KNOB, "freezing"))
    plan = spec.plan(Sides.of(spec), 2)
    assert (plan.starts, plan.cold_compiles, plan.later) == (4, 3, 4 * 2)
    # plain's probe and three systems, the knob's engine-compiled: one probe, two compiles
    spec = DecodeSpec(systems=("engine-eager", "engine-compiled", "hf-eager"), tries=(KNOB,))
    plan = spec.plan(Sides.of(spec), 2)
    assert (plan.starts, plan.cold_compiles, plan.later) == (4 + 1, 2, 4 * 2)


def test_a_profile_knob_names_the_category_that_moved():
    from nanobench.profile.joined import joined
    from nanobench.profile.rows import CategoryRow, Profile, ProfiledCompileRow, ProfileRow
    from nanobench.profile.run import ProfileKind
    from nanobench.profile.spec import ProfileSpec
    from nanobench.profile.vs import by_category, moved_most

    def profiled(side: str, guards_ms: float, kernels_ms: float, guard_calls: float):
        cats = (CategoryRow("guards", guards_ms, 0.1, guard_calls),
                CategoryRow("fused kernels", kernels_ms, 0.8, 4.0))  # fmt: skip
        profile = Profile(cats, (), ProfileRow("dynamic"))
        return joined(ProfiledCompileRow.of(CompileRow(mode="dynamic", side=side), profile))

    spec = ProfileSpec(modes=("off", "dynamic"), tries=("guard-filter",))
    kind = ProfileKind(spec, Sides.of(spec), "float32")
    rows = [profiled("plain", 0.30, 1.0, 2.0), profiled("guard-filter", 0.05, 1.01, 1.0)]
    every = kind.changes(rows, [], 0.95)
    found = {(c.member, c.column): c for c in every}
    guards = found[("guard-filter dynamic", "guards ms")]
    assert (guards.before, guards.after) == (0.30, 0.05)
    assert {m for m, _ in found} == {"guard-filter dynamic"}
    _, moved = by_category(every)
    assert {c.column for c in moved} == {"guards ms", "fused kernels ms"}
    # what moved most is the guards' 0.25 ms, not the kernels' 0.01; then the calls that moved
    said = "guard-filter dynamic: guards moved most, 0.300 -> 0.050 ms a step (-0.250)"
    assert moved_most(moved) == [said]
    calls = "guard-filter dynamic: calls a step changed: guards 2 -> 1"
    assert kind.why_lines(rows) == [said, calls]
    # the same rows, the same changes: the kind keeps nothing between calls
    assert kind.changes(rows, [], 0.95) == every and kind.why_lines(rows[:1]) == []
    assert kind.sides["guard-filter"].lent() == [Member("plain", "off")]
    assert kind.sides["plain"].lent() == []
    # the table of where the step moved names the sides plain and knob
    from rich.console import Console

    from reports.profile import render_moved

    console = Console(record=True, width=120)
    render_moved(console, moved, kind.sides.labels)
    assert text_tables(console.export_text())[0].header == (
        "mode", "category", "plain", "knob", "knob - plain")  # fmt: skip
