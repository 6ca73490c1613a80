"""profile.words: the sentence names the mode's largest category and quotes the rows' numbers."""

from __future__ import annotations

from nanobench.profile.rows import CATEGORIES, CategoryRow
from nanobench.profile.words import why_speedup


def rows(ms: dict[str, float], shares: dict[str, float] | None = None) -> list[CategoryRow]:
    """Every category, ms a step as given; shares as given, else ms over their sum."""
    step = sum(ms.values())
    shares = shares or {c: v / step for c, v in ms.items()}
    return [CategoryRow(c, ms.get(c, 0.0), shares.get(c, 0.0), 1.0) for c in CATEGORIES]


DYNAMIC = {
    "extern kernels": 0.44,
    "fused kernels": 0.30,
    "guards": 0.10,
    "dynamo entry": 0.06,
    "wrapper python": 0.04,
    "forward python": 0.10,
    "outside the forward": 0.22,
}
OFF = {
    "extern kernels": 0.55,
    "eager ops": 0.96,
    "copies and allocation": 0.40,
    "forward python": 0.24,
    "outside the forward": 0.25,
}


def test_the_capping_category_against_off_and_the_per_call_work():
    shares = {c: v / 1.26 for c, v in DYNAMIC.items()} | {"extern kernels": 0.35}
    words = why_speedup("dynamic", 1.7, 1.6, 1.8, rows(DYNAMIC, shares), rows(OFF), device="cpu")
    # extern 0.44 ms, 35%; off's 0.55; per call 0.10 + 0.06 + 0.04 = 0.20, guards the most.
    assert words == (
        "dynamic 1.7x [1.6, 1.8]: extern kernels, 35% of the step, are unchanged by compiling "
        "(0.44 ms against 0.55 in off); compiling adds 0.20 ms of per-call work, 0.10 ms of it "
        "guards."
    )


def test_changing_the_largest_category_changes_the_one_named():
    fused_first = DYNAMIC | {"fused kernels": 0.60}  # 0.60 > extern's 0.44
    words = why_speedup("dynamic", 1.7, None, None, rows(fused_first), rows(OFF), device="cpu")
    assert words.startswith("dynamic 1.7x: fused kernels, 38% of the step")  # 0.60 / 1.56
    assert "(0.60 ms against 0 in off)" in words
    assert "extern" not in words
    unattributed_first = DYNAMIC | {"unattributed": 5.0}
    words = why_speedup(
        "dynamic", 1.7, None, None, rows(unattributed_first), rows(OFF), device="cpu"
    )
    assert "extern kernels" in words and "unattributed" not in words  # never the cap


def test_host_work_as_the_cap_says_what_the_device_can_take_to_remove_it():
    static = {
        "wrapper python": 0.37,
        "guards": 0.10,
        "dynamo entry": 0.05,
        "forward python": 0.06,
        "outside the forward": 0.04,
        "extern kernels": 0.30,
        "eager ops": 0.08,
    }  # 1.00 ms: host 0.37 + 0.10 + 0.05 + 0.06 + 0.04 = 62%
    on_gpu = why_speedup("static", 1.2, None, None, rows(static), rows(OFF), device="cuda")
    assert on_gpu == (
        "static 1.2x: host work is 62% of the step (wrapper python 0.37 ms, guards 0.10 ms): "
        "a recorded graph (--modes reduce-overhead) could remove most of it."
    )
    # a CPU has no recorded graph (compile refuses reduce-overhead without CUDA): it is told
    # what it can take, each a --try knob the CPU reads
    on_cpu = why_speedup("static", 1.2, None, None, rows(static), rows(OFF), device="cpu")
    assert "on a CPU, try --try cpp-wrapper,guard-filter" in on_cpu
    assert "a recorded graph removes it on a GPU only" in on_cpu
    # vLLM compiled its own mode: compile refuses --try for it, so none is offered
    by_vllm = why_speedup(
        "dynamo-trace-once", 1.2, None, None, rows(static), rows(OFF), device="cpu"
    )
    assert "try --try" not in by_vllm and "vLLM compiled it, so no --try reaches it" in by_vllm
    assert "inductor_compile_config={'cpp_wrapper': True}" in by_vllm


def test_off_names_its_two_largest_and_the_forwards_python():
    words = why_speedup("off", 1.0, 1.0, 1.0, rows(OFF), rows(OFF), device="cpu")
    # 2.40 ms: eager 0.96 = 40%, extern 0.55 = 23%, python 0.24 = 10%.
    assert (
        words == "off: eager ops 40% and extern kernels 23% of the step; the forward's Python 10%."
    )


def test_a_speedup_not_measured_says_so_and_still_names_the_cap():
    words = why_speedup("dynamic", None, None, None, rows(DYNAMIC), None, device="cpu")
    assert words.startswith("dynamic, speedup not measured: extern kernels, 35% of the step")
    assert "(0.44 ms)" in words  # no off to compare with
    assert "x" not in words.split(":")[0]


def test_percents_and_ms_are_the_rows_numbers_rounded():
    shares = {c: v / 1.26 for c, v in DYNAMIC.items()} | {"extern kernels": 0.356}
    tiny = DYNAMIC | {"guards": 0.004, "dynamo entry": 0.003, "wrapper python": 0.001}
    words = why_speedup("dynamic", 0.93, 0.9, 0.97, rows(tiny, shares), None, device="cpu")
    assert words.startswith("dynamic 0.93x [0.90, 0.97]: extern kernels, 36% of the step")
    assert "compiling adds 0.008 ms of per-call work, 0.004 ms of it guards" in words


def test_no_time_in_any_category_is_said_plainly():
    empty = [CategoryRow(c, 0.0, 0.0, 0.0) for c in CATEGORIES]
    assert (
        why_speedup("dynamic", 1.1, None, None, empty, None, device="cpu")
        == "dynamic 1.1x: no time attributed."
    )
