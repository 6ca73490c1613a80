"""`nanobench profile` end to end, in its default table output, and its pure pieces: the gates
and the changes by category. The real run profiles the corpus's gpt-fast-style step (one graph,
the smallest step Inductor compiles) and is checked against the profiler's own chrome trace of
the same passes, which the attribution never reads."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.runs.sides import Sides
from nanobench.profile.attribution import nest, self_times_us
from nanobench.profile.gates import gates
from nanobench.profile.joined import with_amdahl
from nanobench.profile.overhead import charged_us, event_cost_us, net_of_profiler
from nanobench.profile.rows import CATEGORIES, CategoryRow, Event, ProfileRow
from nanobench.profile.spec import ProfileSpec
from nanobench.profile.vs import calls_changed, category_changes, moved_most
from tests.helpers import text_tables

runner = CliRunner()
STEP = "tests/corpus/static_kv.py:factory"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("profile")
    result = runner.invoke(app, [
        "profile", "--target", STEP, "--modes", "off,dynamic", "--steps", "4", "--passes", "1",
        "--rounds", "2", "--max-rounds", "2", "--threads", "1", "--out", str(out),
    ], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result


def trace_steps(path: Path) -> tuple[list[float], set[str]]:
    """The profiler's own export: each step range's duration (ms) and every fused kernel named."""
    events = json.loads(path.read_text())["traceEvents"]
    steps = [e["dur"] / 1e3 for e in events if e.get("name") == "nanobench::step"]
    fused = {e["name"] for e in events if "cpp_fused" in str(e.get("name"))}
    return steps, fused


@pytest.mark.slow
def test_a_profiled_step_reads_as_the_profilers_own_trace(profiled):
    out, _ = profiled
    rows = {r["mode"]: r for r in pd.read_csv(out / "profile.csv").to_dict("records")}
    for mode in ("off", "dynamic"):
        steps, fused = trace_steps(out / "profile-traces" / f"{mode}.json")
        # one pass of 4 steps, none built (warmed first): the mean step is the trace's
        assert rows[mode]["steps_profiled"] == len(steps) == 4
        mean = sum(steps) / len(steps)
        assert abs(rows[mode]["profiled_step_ms"] - mean) <= 0.01 * mean + 1e-3
        # every fused kernel the trace names is one the row counts, and the generated module
        # defines as many as the profiler saw run
        assert rows[mode]["fused_kernels"] == len(fused)
    assert rows["dynamic"]["fused_kernels"] >= 1
    assert rows["dynamic"]["generated_kernels"] == rows["dynamic"]["fused_kernels"]
    assert rows["off"]["fused_kernels"] == 0
    # one guard check as profiled, of the order dynamo's own compile-time figure says: dynamo
    # times one cold check after a cache flush, once, at compile (4,291 µs on a loaded CI box
    # against 83 profiled), so two orders of magnitude either way, not one
    guard, ledger = rows["dynamic"]["guard_us_per_call"], rows["dynamic"]["guard_latency_us"]
    assert ledger > 0 and 0.01 < guard / ledger < 100, (guard, ledger)


@pytest.mark.slow
def test_every_category_is_in_the_csv_and_the_table_and_adds_up_to_the_step(profiled):
    out, result = profiled
    frame = pd.read_csv(out / "profile-categories.csv")
    rows = {r["mode"]: r for r in pd.read_csv(out / "profile.csv").to_dict("records")}
    for mode, cats in frame.groupby("mode"):
        assert list(cats["category"]) == list(CATEGORIES)
        # as profiled, they add up to the profiled step; net of the profiler's cost, with
        # unattributed the rest, to the step timed without it
        assert abs(cats["profiled_ms_per_step"].sum() - rows[mode]["profiled_step_ms"]) < 1e-3
        assert abs(cats["ms_per_step"].sum() - rows[mode]["plain_step_ms"]) < 1e-3
        # what was taken out is what was charged: never more than the step's events cost
        paid = cats["profiled_ms_per_step"] - cats["ms_per_step"]
        assert (paid[cats["category"] != "unattributed"] >= -1e-9).all()
        cost = rows[mode]["events_per_step"] * rows[mode]["event_cost_us"] / 1e3
        assert paid[cats["category"] != "unattributed"].sum() <= cost + 1e-6
    by = {(r["mode"], r["category"]): r for r in frame.to_dict("records")}
    # dynamo's guard check runs on every compiled call and never in eager
    assert by[("off", "guards")]["ms_per_step"] == 0 < by[("dynamic", "guards")]["ms_per_step"]
    assert by[("dynamic", "fused kernels")]["calls_per_step"] >= 1
    (table,) = [t for t in text_tables(result.stdout) if t.header[0] == "where the step goes"]
    assert list(table.header[1:]) == ["off", "dynamic"]
    assert [line[0] for line in table.rows][: len(CATEGORIES)] == list(CATEGORIES)
    assert "why: dynamic" in result.stdout and "profile-kernels.csv" not in result.stdout


@pytest.mark.slow
def test_the_kernels_csv_holds_the_gemms_bytes_and_flops_from_their_shapes(profiled):
    out, _ = profiled
    kernels = pd.read_csv(out / "profile-kernels.csv")
    mm = kernels[(kernels["mode"] == "off") & kernels["name"].str.fullmatch("aten::(mm|addmm)")]
    assert len(mm) >= 1
    # gptfast.py's wqkv: x (B*S, 32) @ (32, 96), 4 rows a step: 2*4*32*96 flops, the hand count
    assert (mm["flops"] == 2 * 4 * 32 * 96).any(), mm[["name", "flops", "bytes"]]


# The model the corpus's step runs, read here as text: what each user line must point at.
MODEL = Path("tests/corpus/gptfast.py").read_text().splitlines()


def line_with(text: str) -> int:
    """The one line (1-based) of the model's file holding `text`."""
    (found,) = [i for i, line in enumerate(MODEL, 1) if text in line]
    return found


def named(user_line: str) -> set[int]:
    """The model's lines a row's `user_line` names: "gptfast.py:31,32" -> {31, 32}."""
    file, _, lines = user_line.partition(":")
    assert file == "gptfast.py", user_line  # one file, the model's, and never a reason
    return {int(n) for n in lines.split(",")}


# An op Inductor names a fused kernel after -> the text of a model line that calls it.
CALLS = {
    "embedding": "self.tok_embeddings(",
    "index_put": "_cache[:, :, input_pos] =",
    "index": "self.causal_mask[None, None, input_pos]",
    "scaled_dot_product": "F.scaled_dot_product_attention(",
}


@pytest.mark.slow
def test_a_compiled_modes_kernels_name_the_model_lines_their_fx_nodes_came_from(profiled):
    out, result = profiled
    kernels = pd.read_csv(out / "profile-kernels.csv")
    dynamic = kernels[kernels["mode"] == "dynamic"]
    fused = dynamic[dynamic["kind"] == "fused kernels"]
    defs = {i for i, line in enumerate(MODEL, 1) if line.lstrip().startswith("def ")}
    checked = set()
    for name, user_line in zip(fused["name"], fused["user_line"]):
        lines = named(user_line)
        assert not lines & defs, (name, user_line)
        # each op the kernel's name says it fused is called on a line it names
        for op, text in CALLS.items():
            if f"_{op}_" in name.partition("cpp_fused")[2] + "_":
                assert any(text in MODEL[n - 1] for n in lines), (name, op, user_line)
                checked.add(op)
    assert {"embedding", "index_put"} <= checked, list(fused["name"])
    # the embedding's kernel names the embedding's line alone
    (embedding,) = fused[fused["name"].str.endswith("cpp_fused_embedding_0")]["user_line"]
    assert named(embedding) == {line_with("self.tok_embeddings(")}
    # the GEMMs Inductor calls as they are: the Linears' lines, each from its own
    gemms = [named(u) for u in dynamic[dynamic["name"] == "aten::mm"]["user_line"]]
    assert sorted(map(len, gemms)) == [1, 1, 1]
    assert set().union(*gemms) == {line_with("self.wqkv("), line_with("self.wo(")}
    assert "user line" in result.stdout


@pytest.mark.slow
def test_an_eager_op_names_the_line_that_called_it_not_its_functions_def(profiled):
    out, _ = profiled
    kernels = pd.read_csv(out / "profile-kernels.csv")
    off = kernels[kernels["mode"] == "off"]
    defs = {i for i, line in enumerate(MODEL, 1) if line.lstrip().startswith("def ")}
    for name, user_line in zip(off["name"], off["user_line"]):
        assert not named(user_line) & defs, (name, user_line)
    lines = {
        name: set().union(*map(named, rows["user_line"])) for name, rows in off.groupby("name")
    }
    # the cache writes are subscripts inside update(): no call of their own, yet their lines
    assert lines["aten::index_put_"] == {
        line_with("self.k_cache[:, :, input_pos] = k"),
        line_with("self.v_cache[:, :, input_pos] = v"),
    }
    assert lines["aten::index"] == {line_with("self.causal_mask[None, None, input_pos]")}
    assert lines["aten::embedding"] == {line_with("self.tok_embeddings(")}
    assert lines["aten::mm"] == {line_with("self.wqkv("), line_with("self.wo(")}
    assert lines["aten::scaled_dot_product_attention"] == {line_with("F.scaled_dot_product_")}


def test_net_of_the_profiler_each_category_loses_what_was_charged_and_the_rest_is_unattributed():
    profiled = [CategoryRow("eager ops", 1.0, 0.5, 100.0, profiler_ms_per_step=0.2),
                CategoryRow("guards", 0.05, 0.1, 1.0, profiler_ms_per_step=0.002),
                CategoryRow("unattributed", 0.0, 0.0, 0.0, profiler_ms_per_step=0.0)]  # fmt: skip
    net, facts = net_of_profiler(profiled, step_ms=1.2)
    by = {c.category: c for c in net}
    assert by["eager ops"].ms_per_step == pytest.approx(0.8)
    assert by["guards"].ms_per_step == pytest.approx(0.048)
    assert by["unattributed"].ms_per_step == pytest.approx(1.2 - 0.848)
    assert by["eager ops"].share == pytest.approx(0.8 / 1.2)
    assert by["eager ops"].profiled_ms_per_step == 1.0
    assert facts["attributed_ms"] == pytest.approx(0.848)
    assert facts["host_share"] == pytest.approx(0.048 / 1.2)
    assert facts["guard_us_per_call"] == pytest.approx(48.0)  # 0.048 ms over its one call
    # no unprofiled step, or a category without its charge (an older worker): as profiled
    assert net_of_profiler(profiled, None) == (profiled, {})
    bare = [replace(c, profiler_ms_per_step=None) for c in profiled]
    assert net_of_profiler(bare, 1.2) == (bare, {})
    # net categories past the step (1.05 ms against 0.5): unattributed negative, shown; the
    # shares are of the categories then, so none passes 100%
    free = [replace(c, profiler_ms_per_step=0.0) for c in profiled]
    over, facts = net_of_profiler(free, step_ms=0.5)
    by = {c.category: c for c in over}
    assert by["unattributed"].ms_per_step == pytest.approx(0.5 - 1.05)
    assert by["eager ops"].share == pytest.approx(1.0 / 1.05)
    assert sum(c.share for c in over if c.category != "unattributed") == pytest.approx(1.0)


def charges(events: list[Event], cost: tuple[float, float]) -> list[float]:
    parent = nest(events)
    owner = list(range(len(events)))
    return charged_us(events, parent, owner, self_times_us(events, parent), cost)


def test_the_profilers_cost_lands_inside_each_event_and_around_it_in_its_parent():
    # a forward [0, 100] calling three near-empty ops (1 µs each) and one GEMM of 50 µs
    events = [
        Event("nanobench::forward", 0, 100),
        Event("aten::view", 10, 11),
        Event("aten::view", 20, 21),
        Event("aten::view", 30, 31),
        Event("aten::mm", 40, 90),
    ]
    # 0.6 µs inside each event, 1.0 around it: each child pays 0.6, the forward its own 0.6 and
    # four children's 1.0 (its self time, 100 - 53 = 47 µs, holds it)
    assert charges(events, (0.6, 1.0)) == pytest.approx([0.6 + 4.0, 0.6, 0.6, 0.6, 0.6])
    # 1.5 inside: a view holds 1 µs, the other 0.5 goes up to the forward, never below 0
    assert charges(events, (1.5, 0.0)) == pytest.approx([1.5 + 3 * 0.5, 1.0, 1.0, 1.0, 1.5])
    # more than the forward holds: it pays its self time and the rest is dropped, not negative
    small = [Event("nanobench::forward", 0, 3), Event("aten::view", 1, 2)]
    assert charges(small, (0.0, 5.0)) == pytest.approx([2.0, 0.0])
    # outside the steady steps (no owner): nothing charged
    parent = nest(events)
    unowned = charged_us(events, parent, [-1] * 5, self_times_us(events, parent), (0.6, 1.0))
    assert unowned == [0.0] * 5


def test_one_events_cost_is_the_steps_slowdown_over_its_events():
    # means 5.0 and 4.0 ms: 1 ms over 500 events a step is 2 µs an event
    assert event_cost_us([5.0, 4.8, 5.2], [4.0, 4.1, 3.9], 500) == pytest.approx(2.0)
    # a mode alternating 2 ms compiled steps and 8 ms eager ones: the mean, as its events are;
    # the medians (2.0 and 2.0 here) would say the profiler cost nothing
    assert event_cost_us([2.0, 2.0, 9.0], [2.0, 2.0, 8.0], 100) == pytest.approx(1e3 / 3 / 100)
    # a profiled step no slower (noise): no cost, never a negative one
    assert event_cost_us([3.9], [4.0], 500) == 0.0
    assert event_cost_us([], [4.0], 500) == event_cost_us([5.0], [4.0], 0) == 0.0


@pytest.mark.slow
def test_compare_reads_two_saved_profiles_categories_as_their_csvs_hold_them(profiled, tmp_path):
    out, _ = profiled
    result = runner.invoke(app, ["compare", str(out), str(out), "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    changes = json.loads(result.stdout)["rows"]
    saved = pd.read_csv(out / "profile-categories.csv").to_dict("records")
    for c in saved:
        (found,) = [x for x in changes
                    if (x["member"], x["column"]) == (c["mode"], f"{c['category']} ms")]  # fmt: skip
        assert found["before"] == found["after"] == pytest.approx(c["ms_per_step"])
    assert {"step_ms", "speedup"} <= {x["column"] for x in changes if x["member"] == "dynamic"}


def test_a_modes_profile_travels_on_its_row_and_its_timing_is_copied_from_compile_rows():
    from nanobench.compile.rows import FIRST_PASS
    from nanobench.compile.spec import WorkerSpec
    from nanobench.harness.runs.rows import columns
    from nanobench.harness.workers.member import Member
    from nanobench.profile.bench import ProfilePart
    from nanobench.profile.joined import joined
    from nanobench.profile.rows import TIMING_FIELDS
    from nanobench.profile.run import ProfileKind
    from nanobench.profile.spec import ProfileJob

    cats = [asdict(CategoryRow(c, 0.1, 0.1, 1.0, profiler_ms_per_step=0.02)) for c in CATEGORIES]
    facts = {"plain_step_ms": 1.0, "profiled_step_ms": 1.1}
    part = ProfilePart(Member("after", "dynamic"), WorkerSpec("m"), {}, print, ProfileJob())
    ready = dict.fromkeys(FIRST_PASS) | {"mode": "dynamic", "status": "ok", "step_ms": 2.0}
    first = part.first(ready | {"profile": {"categories": cats, "kernels": [], "facts": facts}})
    assert first.step_ms == 2.0 and first.profile.facts.plain_step_ms == 1.0
    # closed, the row is the first final's (compile's), and the profile is still on it
    closed = part.closed(first, [ready | {"step_ms": 1.5}], 1.0, None)
    assert closed.step_ms == 1.5 and closed.profile == first.profile
    timed = replace(closed, compile_s=3.0, rounds=2, speedup=1.2, load_note="busy")
    row = joined(timed)
    for name in TIMING_FIELDS:
        assert getattr(row, name) == getattr(timed, name), name
    # the facts the profile brought, and its categories net of the profiler, named by member
    assert (row.plain_step_ms, row.profiled_step_ms) == (1.0, 1.1)
    assert [c.category for c in row.category_rows] == list(CATEGORIES)
    assert {(c.mode, c.side) for c in row.category_rows} == {("dynamic", "after")}
    assert row.category_rows[0].ms_per_step == pytest.approx(0.08)
    assert row.unattributed_ms == pytest.approx(1.0 - 0.08 * (len(CATEGORIES) - 1))
    # written as the CSV's columns alone, in their order
    kind = ProfileKind(ProfileSpec(), Sides.of(ProfileSpec()), "float32")
    assert list(kind.public([row])[0]) == columns(ProfileRow)
    # a failed row keeps its categories as measured, and no fact
    failed = joined(replace(timed, status="error"))
    assert failed.plain_step_ms is None and failed.category_rows[0].ms_per_step == 0.1


def test_a_compiled_modes_forward_speedup_and_the_step_speedup_amdahl_gives_it():
    # off: forward 90% of a 10 ms profiled step (9 ms); dynamic: 60% of 5 ms (3 ms)
    rows = with_amdahl([ProfileRow("off", forward_share=0.9, profiled_step_ms=10.0),
                        ProfileRow("dynamic", forward_share=0.6, profiled_step_ms=5.0)])  # fmt: skip
    assert rows[0].forward_speedup is None
    assert rows[1].forward_speedup == pytest.approx(3.0)  # 9 / 3
    assert rows[1].amdahl_speedup == pytest.approx(1 / (0.1 + 0.9 / 3.0))  # 2.5
    # no off to hold it against: nothing derived
    alone = with_amdahl([ProfileRow("dynamic", forward_share=0.6, profiled_step_ms=5.0)])
    assert alone[0].amdahl_speedup is None


def test_the_ranges_are_on_while_profiling_and_off_for_the_rounds_windows():
    from torch.profiler import ProfilerActivity, profile

    from nanobench.profile.session import ranges_marked

    class Engine:
        def decode_step(self, tokens):
            return self.decode_forward(tokens)

        def decode_forward(self, tokens):
            return tokens

    class Session:
        engine = Engine()

    session = Session()
    with ranges_marked(session), profile(activities=[ProfilerActivity.CPU]) as prof:
        session.engine.decode_step([1])
    assert [e.name for e in prof.events()] == ["nanobench::step", "nanobench::forward"]
    # taken off after: the engine's own methods again, so a timed window calls no range
    assert "decode_step" not in vars(session.engine) and "decode_forward" not in vars(
        session.engine
    )

    class Target:
        def forward(self, x):
            return x

    target = Target()
    target.forward = target.forward  # a target session holds its (compiled) forward
    own = target.forward
    with ranges_marked(target):
        assert target.forward is not own
    assert target.forward is own


def row(mode: str, **kw) -> ProfileRow:
    # the fleet's step (2.0) is not what the categories add up to: the worker's beside them is
    base = dict(step_ms=2.0, plain_step_ms=1.0, profiled_step_ms=1.1, attributed_ms=1.05,
                overhead=0.1, host_share=0.4)  # fmt: skip
    return ProfileRow(mode=mode, **{**base, **kw})


def test_the_gates_fail_a_row_without_a_profile_and_hold_the_sum_and_the_host_share():
    spec = ProfileSpec(max_overhead_share=0.5)
    found = {g.name: g for g in gates(spec, [row("off"), row("dynamic", host_share=0.6),
                                             row("static", profiled_step_ms=None)])}  # fmt: skip
    assert found["categories_add_up[off]"].passed  # |1.05 - 1.0| / 1.0 = 5%
    assert not found["max_overhead_share[dynamic]"].passed  # 60% > 50%
    assert "max_overhead_share[off]" not in found  # eager adds no per-call work to gate
    assert not found["measured[static]"].passed
    off_by = gates(ProfileSpec(), [row("off", attributed_ms=1.2)])
    assert not off_by[0].passed and "20%" in off_by[0].detail


def test_the_add_up_gate_is_inconclusive_where_the_passes_noise_could_make_the_miss():
    def verdict(**kw):
        (found,) = [g for g in gates(ProfileSpec(), [row("off", **kw)]) if "add_up" in g.name]
        return found.verdict, found.detail

    assert verdict(beside_spread=0.08)[0] == "pass"  # 5% missed: within 10% whatever the noise
    v, detail = verdict(attributed_ms=1.15, beside_spread=0.08)  # 15% missed, 8% of it noise
    assert v == "inconclusive" and "8% apart" in detail and "too busy" in detail
    assert verdict(attributed_ms=1.25, beside_spread=0.08)[0] == "fail"  # 25% - 8% > 10%
    assert verdict(attributed_ms=1.15)[0] == "fail"  # no noise known: 15% is a miss


def test_the_categories_whose_calls_a_step_changed_are_named_per_mode():
    before = [CategoryRow("guards", 0.10, 0.1, 2.0, mode="dynamic"),
              CategoryRow("dynamo entry", 0.2, 0.1, 6.0, mode="dynamic"),
              CategoryRow("extern kernels", 1.0, 0.5, 4.0, mode="dynamic"),
              CategoryRow("unattributed", 0.1, 0.1, 0.0, mode="dynamic"),
              CategoryRow("guards", 0.0, 0.0, 0.0, mode="off")]  # fmt: skip
    after = [CategoryRow("guards", 0.05, 0.1, 1.0, mode="dynamic"),
             CategoryRow("dynamo entry", 0.1, 0.1, 3.0, mode="dynamic"),
             CategoryRow("extern kernels", 2.0, 0.5, 4.0, mode="dynamic"),
             CategoryRow("unattributed", 0.1, 0.1, 1.0, mode="dynamic")]  # fmt: skip
    # extern kernels took twice as long but ran as often: not named; off ran on one side only
    assert calls_changed(before, after) == [
        "dynamic: calls a step changed: guards 2 -> 1, dynamo entry 6 -> 3"]  # fmt: skip
    assert calls_changed(before, before) == []


def test_a_category_change_is_after_over_before_and_the_one_that_moved_most_is_named():
    before = [CategoryRow("guards", 0.10, 0.1, 1.0, mode="dynamic"),
              CategoryRow("outside the forward", 0.05, 0.05, 3.0, mode="dynamic"),
              CategoryRow("guards", 0.0, 0.0, 0.0, mode="off")]  # fmt: skip
    after = [CategoryRow("guards", 0.11, 0.1, 1.0, mode="dynamic"),
             CategoryRow("outside the forward", 0.45, 0.3, 3.0, mode="dynamic")]  # fmt: skip
    found = category_changes(before, after)
    # off was profiled on one side only: nothing of it is compared
    assert [(c.member, c.column) for c in found] == [
        ("dynamic", "guards ms"), ("dynamic", "outside the forward ms")]  # fmt: skip
    assert found[1].change == pytest.approx(0.45 / 0.05, rel=1e-3)
    assert moved_most(found) == [
        "dynamic: outside the forward moved most, 0.050 -> 0.450 ms a step (+0.400)"
    ]


@pytest.mark.slow
def test_vs_on_a_pair_that_differs_in_one_host_read_names_what_moved(tmp_path):
    # item_in_step reads `input_pos.max().item()` on the host: a break, a second graph and its
    # entry; static_kv does not. One fleet, both sides; before is --vs's.
    result = runner.invoke(app, [
        "profile", "--target", STEP, "--vs", "tests/corpus/item_in_step.py:factory",
        "--modes", "dynamic", "--steps", "4", "--passes", "1", "--rounds", "2", "--max-rounds",
        "2", "--threads", "1", "--out", str(tmp_path),
    ], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    changes = pd.read_csv(tmp_path / "profile-changes.csv", dtype=str)
    # the categories' rows ("<category> ms"), beside compile's counts and timings
    moved = changes[
        changes["column"].str.endswith(" ms") & (changes["column"] != "unattributed ms")
    ]
    moved = moved.dropna(subset=["before", "after"]).astype({"before": float, "after": float})
    top = moved.loc[(moved["after"] - moved["before"]).abs().idxmax()]
    name = top["column"][: -len(" ms")]
    # the table's words name the category that moved most, with the CSV's figures (one
    # profiled pass a side: which one it is, this noisy box decides)
    said = f"dynamic: {name} moved most, {top['before']:.3f} -> {top['after']:.3f} ms a step"
    assert said in result.stdout, result.stdout[-2000:]
    # what moved for certain is the structure: the break's second compiled frame, its guard
    # check and its entry, counted in each side's profiled events (before is --vs's side)
    cats = pd.read_csv(tmp_path / "profile-categories.csv")
    calls = {(r["side"], r["category"]): r["calls_per_step"] for r in cats.to_dict("records")}
    assert calls[("before", "guards")] == 2 and calls[("after", "guards")] == 1
    assert calls[("before", "dynamo entry")] > calls[("after", "dynamo entry")]
    line = next(x for x in result.stdout.splitlines() if "calls a step changed" in x)
    assert "guards 2 -> 1" in line and "dynamo entry" in line, line


@pytest.mark.slow
def test_json_holds_the_kernel_rows_the_csv_holds_each_with_its_user_line(tmp_path):
    result = runner.invoke(app, [
        "profile", "--target", STEP, "--modes", "off", "--steps", "3", "--passes", "1",
        "--rounds", "2", "--max-rounds", "2", "--threads", "1", "--out", str(tmp_path), "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    csv_rows = pd.read_csv(tmp_path / "profile-kernels.csv").to_dict("records")
    assert len(said["kernels"]) == len(csv_rows) > 0
    assert [k["name"] for k in said["kernels"]] == [r["name"] for r in csv_rows]
    assert all(k["user_line"] for k in said["kernels"])
    assert any("gptfast.py:" in k["user_line"] for k in said["kernels"])
    assert len(said["categories"]) == len(pd.read_csv(tmp_path / "profile-categories.csv"))
