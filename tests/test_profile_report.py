"""`reports.profile`: the profile's tables and figure say what the rows handed in say.

Every expected value here comes from the rows built below (or is worked out by hand from
them), never from the functions under test: a category dropped, a number drawn from a constant,
a kernel past the top-N cut printed, each fails a test.
"""

from __future__ import annotations

from dataclasses import replace

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.container import BarContainer
from rich.console import Console

from nanobench.harness.runs.gates import Gate
from nanobench.profile.rows import CATEGORIES, CategoryRow, KernelRow, ProfileRow
from nanobench.profile.user_lines import NO_NODE
from reports.profile import CATEGORY_COLOURS, draw_profile, profile_figure, render_profile

LONG = "triton_per_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0"  # 61 characters
# dynamic's step by category, ms a step: guards 0.44 ms of a 1.26 ms profiled step is 35%.
DYNAMIC_MS = dict(zip(CATEGORIES, (0.44, 0.05, 0.07, 0.30, 0.20, 0.0, 0.04, 0.0, 0.16, 0.0)))
OFF_MS = dict(zip(CATEGORIES, (0.0, 0.0, 0.0, 0.0, 0.50, 0.90, 0.10, 0.25, 0.15, 0.02)))


@pytest.fixture(autouse=True)
def headless():
    matplotlib.use("Agg")
    plt.close("all")


def category_rows(mode: str, ms: dict, side: str = "") -> list[CategoryRow]:
    step = sum(ms.values())
    return [
        CategoryRow(
            category=c, ms_per_step=v, share=v / step, calls_per_step=1.0, mode=mode, side=side
        )  # fmt: skip
        for c, v in ms.items()
    ]


def profile_row(mode: str, **fields) -> ProfileRow:
    base = dict(
        step_ms=2.0,
        step_ms_q1=1.9,
        step_ms_q3=2.1,
        profiled_step_ms=2.2,
        plain_step_ms=2.0,
        overhead=2.2 / 2.0 - 1,
        attributed_ms=1.9,
        forward_share=0.8,
        host_share=0.3,
        bandwidth_gbs=50.0,
        gemm_gflops=400.0,
    )
    return ProfileRow(mode=mode, **{**base, **fields})


def kernel(name: str, ms: float, mode: str = "dynamic", **fields) -> KernelRow:
    fields = {"kind": "fused kernels", "user_line": "model.py:12", **fields}
    return KernelRow(name=name, calls_per_step=2.0, ms_per_step=ms, mode=mode, **fields)


@pytest.fixture
def run():
    """off and dynamic: dynamic's numbers chosen so each printed figure is known by hand."""
    rows = [
        # off against itself: 1.00x, which the table leaves out
        profile_row(
            "off",
            step_ms=3.0,
            step_ms_q1=2.9,
            step_ms_q3=3.1,
            speedup=1.0,
            speedup_low=1.0,
            speedup_high=1.0,
        ),
        profile_row(
            "dynamic",
            step_ms=1.25,
            step_ms_q1=1.20,
            step_ms_q3=1.31,
            profiled_step_ms=1.40,
            plain_step_ms=1.25,
            beside_spread=0.034,
            overhead=1.40 / 1.25 - 1,
            event_cost_us=1.5,
            probe_event_cost_us=0.75,
            attributed_ms=1.10,
            forward_share=0.61,
            host_share=0.47,
            speedup=2.4,
            speedup_low=2.3,
            speedup_high=2.5,
            words="dynamic 1.1x: guards take 35% of the step: a recorded graph would remove them",
        ),
    ]
    categories = category_rows("off", OFF_MS) + category_rows("dynamic", DYNAMIC_MS)
    kernels = [
        kernel("mm_small", 0.011, bytes=4096, flops=65536, gflops=2.9, floor_ratio=None),
        kernel(
            LONG,
            0.30,
            bytes=8192,
            flops=16384,
            gflops=0.11,
            gbs=0.05,
            floor_ratio=12.34,
            source="model.py:41",
            user_line="model.py:40,41",
        ),
        kernel(
            "aten::addmm",
            0.20,
            bytes=1_000_000,
            flops=64_000_000,
            gflops=320.0,
            kind="extern kernels",
        ),
        kernel("aten::copy_", 0.04, kind="copies and allocation", user_line=NO_NODE),
        kernel("aten::mm", 0.9, mode="off", bytes=2_000_000, flops=8_000_000, gflops=17.7),
    ]
    gates = [
        Gate("measured[off]", True, "profiled"),
        Gate("categories_add_up[dynamic]", False, "attributed 1.100 ms: 12% apart"),
    ]
    return rows, categories, kernels, gates


def rendered(run, width: int = 200, top: int = 3) -> str:
    console = Console(record=True, width=width)
    render_profile(console, *run, title="profiled decode step: tiny", top=top)
    return console.export_text()


def line_of(text: str, start: str) -> list[str]:
    """The words after `start` on the table line that begins with it (the box's bars dropped)."""
    for line in text.splitlines():
        words = line.replace("│", " ").replace("┃", " ").split()
        if words[: len(start.split())] == start.split():
            return words[len(start.split()) :]
    raise AssertionError(f"no line starting {start!r} in\n{text}")


def test_every_category_prints_with_its_time_and_share(run):
    text = rendered(run)
    for c in CATEGORIES:
        assert c in text, c
    # Measured zeros are zeros, not dashes: off's guards, dynamic's unattributed.
    assert line_of(text, "guards") == ["0.00", "ms", "0%", "0.44", "ms", "35%"]  # 0.44 / 1.26
    assert line_of(text, "unattributed") == ["0.02", "ms", "1%", "0.00", "ms", "0%"]
    off_share = OFF_MS["eager ops"] / sum(OFF_MS.values())  # 0.90 / 1.92
    assert line_of(text, "eager ops") == ["0.90", "ms", f"{off_share:.0%}", "0.00", "ms", "0%"]
    labels = [line.replace("│", " ").split() for line in text.splitlines()]
    order = [c for c in CATEGORIES for words in labels if words[: len(c.split())] == c.split()]
    assert order == list(CATEGORIES)  # each once, in the rows' order


def test_the_step_lines_carry_the_rows_numbers(run):
    text = rendered(run)
    assert line_of(text, "step ms (unprofiled) [q1, q3]") == [
        *("3.00", "[2.90,", "3.10]"),
        *("1.25", "[1.20,", "1.31]"),
    ]
    # off's passes' noise unknown (one pass a side): the step alone; dynamic's 3.4% rounds to 3%
    assert line_of(text, "step ms beside the profile (± passes)") == ["2.00", "1.25", "(±3%)"]
    assert line_of(text, "profiled step ms") == ["2.20", "1.40"]
    # The profiler's cost by hand: 1.40 / 1.25 - 1 = 12%; off's 2.2 / 2.0 - 1 = 10%.
    assert line_of(text, "profiler overhead") == ["+10%", "+12%"]
    assert line_of(text, "profiler us / event (probe's)") == ["-", "1.50", "(0.75)"]
    # attributed over the step beside the profile: 1.9 / 2.0 = 95%, 1.10 / 1.25 = 88%.
    assert line_of(text, "attributed / beside") == ["95%", "88%"]
    assert line_of(text, "forward share") == ["80%", "61%"]
    assert line_of(text, "host share") == ["30%", "47%"]
    # off has no speedup: a dash, never 1.00x.
    assert line_of(text, "speedup [95%]") == ["-", "2.40x", "[2.30,", "2.50]"]


def test_a_missing_figure_prints_a_dash(run):
    rows, categories, kernels, gates = run
    rows = [
        replace(rows[0], profiled_step_ms=None, host_share=None),
        replace(rows[1], speedup=None, speedup_low=None, speedup_high=None),
    ]
    categories = [c for c in categories if not (c.mode == "dynamic" and c.category == "guards")]
    text = rendered((rows, categories, kernels, gates))
    assert line_of(text, "profiled step ms") == ["-", "1.40"]
    assert line_of(text, "host share") == ["-", "47%"]
    assert line_of(text, "speedup [95%]") == ["-", "-"]
    # dynamic without a guards row: its cell is a dash, off's measured zero stays.
    assert line_of(text, "guards") == ["0.00", "ms", "0%", "-"]


def test_the_top_kernels_are_the_heaviest_printed_whole(run):
    text = rendered(run, top=3)
    assert LONG in text and "aten::addmm" in text and "aten::copy_" in text
    assert "mm_small" not in text  # the 4th heaviest of dynamic's four, though listed first
    assert "top 3 of 4 kernels" in text
    cells = line_of(text, f"1 {LONG}")
    assert cells == ["fused", "kernels", "2.0", "0.300", "0.1", "0.1", "12.3x", "model.py:41",
                     "model.py:40,41"]  # fmt: skip
    # no GB/s, no floor ratio, no source: dashes; the user line after the source
    assert line_of(text, "2 aten::addmm") == ["extern", "kernels", "2.0", "0.200", "-", "320.0",
                                              "-", "-", "model.py:12"]  # fmt: skip
    # no user line: why, in its cell
    assert " ".join(line_of(text, "3 aten::copy_")).endswith(f"0.040 - - - - {NO_NODE}")
    assert "mm_small" in rendered(run, top=4)


def test_a_gpu_rows_device_side_prints_and_a_cpu_run_prints_none(run):
    rows, categories, kernels, gates = run
    assert "device ms" not in rendered(run) and "graph replays" not in rendered(run)
    dyn = replace(rows[1], device_ms_per_step=0.9, device_busy_share=0.64, launches_per_step=41.0,
                  graph_replays_per_step=2.0, graph_device_share=0.25,
                  cudagraph_skips="skipping cudagraphs due to mutated inputs (1 instances)")  # fmt: skip
    gpu_kernels = [replace(k, device_ms_per_step=0.0075) if k.name == "aten::addmm" else k
                   for k in kernels]  # fmt: skip
    # wide enough for the device column beside the source and the user line on one line each
    text = rendered(([rows[0], dyn], categories, gpu_kernels, gates), width=240)
    # off has no device figures: a dash in each of its cells, never 0
    assert line_of(text, "device ms (busy / host step)") == ["-", "(-)", "0.90", "(64%)"]
    assert line_of(text, "launches / graph replays") == ["-", "41", "/", "2"]
    assert line_of(text, "device time in graphs") == ["-", "25%"]
    assert "dynamic: cudagraphs skipped: skipping cudagraphs due to mutated inputs" in text
    (mm,) = [ln.replace("│", " ").split() for ln in text.splitlines() if "aten::addmm" in ln]
    # rank, name, kind (two words), calls, host ms, then its device ms
    assert mm[5:7] == ["0.200", "0.007"], mm


def test_a_narrow_terminal_prints_every_kernel_name_whole(run):
    text = rendered(run, width=80)
    assert "kernel: " not in text  # the blocks, titled by rank, not rich's squeezed table
    assert ["kernel", LONG] in [line.split() for line in text.splitlines()]
    assert "…" not in text


def test_words_status_and_gates_follow_the_tables(run):
    rows, categories, kernels, gates = run
    rows = [*rows, ProfileRow(mode="static", status="failed: worker exited 1")]
    text = rendered((rows, categories, kernels, gates))
    assert (
        "why: dynamic 1.1x: guards take 35% of the step: a recorded graph would remove them" in text
    )
    assert "static: failed: worker exited 1" in text
    assert "pass measured[off]: profiled" in text
    assert "FAIL categories_add_up[dynamic]: attributed 1.100 ms: 12% apart" in text


def test_sides_head_their_columns(run):
    rows, categories, kernels, gates = run
    dyn = rows[1]
    sides = [replace(dyn, side="before", step_ms=1.6), replace(dyn, side="after")]
    cats = category_rows("dynamic", OFF_MS, "before") + category_rows(
        "dynamic", DYNAMIC_MS, "after"
    )
    text = rendered((sides, cats, [], gates))
    assert line_of(text, "where the step goes") == ["before", "dynamic", "after", "dynamic"]
    off_share = OFF_MS["eager ops"] / sum(OFF_MS.values())
    assert line_of(text, "eager ops") == ["0.90", "ms", f"{off_share:.0%}", "0.00", "ms", "0%"]
    assert line_of(text, "step ms (unprofiled) [q1, q3]")[:3] == ["1.60", "[1.20,", "1.31]"]


def test_every_category_has_its_own_colour():
    assert set(CATEGORY_COLOURS) == set(CATEGORIES)
    assert len(set(CATEGORY_COLOURS.values())) == len(CATEGORIES)


def stacks(fig) -> dict:
    """{(category, x): (bottom, height)} of the left panel's bars."""
    ax = fig.axes[0]
    out = {}
    for container in ax.containers:
        if isinstance(container, BarContainer):
            for bar in container.patches:
                x = round(bar.get_x() + bar.get_width() / 2)
                out[(container.get_label(), x)] = (bar.get_y(), bar.get_height())
    return out


def test_the_bars_stack_the_category_rows(run):
    rows, categories, kernels, _ = run
    drawn = stacks(profile_figure(rows, categories, kernels, "t"))
    for x, ms in enumerate((OFF_MS, DYNAMIC_MS)):
        below = 0.0
        for c in CATEGORIES:
            bottom, height = drawn[(c, x)]
            assert height == pytest.approx(ms[c]) and bottom == pytest.approx(below)
            below += ms[c]


def test_a_changed_row_changes_its_bar(run):
    rows, categories, kernels, _ = run
    changed = [replace(c, ms_per_step=0.93) if c.mode == "dynamic" and c.category == "guards"
               else c for c in categories]  # fmt: skip
    before = stacks(profile_figure(rows, categories, kernels, "t"))
    after = stacks(profile_figure(rows, changed, kernels, "t"))
    assert before[("guards", 1)][1] == pytest.approx(0.44)
    assert after[("guards", 1)][1] == pytest.approx(0.93)
    assert after[("dynamo entry", 1)][0] == pytest.approx(0.93)  # stacked on the new height


def test_the_tick_marks_the_unprofiled_step(run):
    rows, categories, kernels, _ = run
    ax = profile_figure(rows, categories, kernels, "t").axes[0]
    (tick,) = [ln for ln in ax.get_lines() if ln.get_label() == "step without the profiler"]
    assert list(tick.get_xdata()) == [0, 1]
    assert list(tick.get_ydata()) == pytest.approx([3.0, 1.25])


def test_the_roofline_places_each_kernel_with_bytes_and_flops(run):
    rows, categories, kernels, _ = run
    ax = profile_figure(rows, categories, kernels, "t").axes[1]
    points = {c.get_label(): [float(v) for p in c.get_offsets() for v in p] for c in ax.collections}
    assert points["off"] == pytest.approx([8_000_000 / 2_000_000, 17.7])
    # (flops / bytes, GFLOP/s) of each of dynamic's kernels with both; copy_ has neither
    expected = [65536 / 4096, 2.9, 16384 / 8192, 0.11, 64_000_000 / 1_000_000, 320.0]
    assert points["dynamic"] == pytest.approx(expected)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    roof = next(ln for ln in ax.get_lines() if ln.get_label().startswith("dynamic roof"))
    for x, y in zip(roof.get_xdata(), roof.get_ydata()):
        assert y == pytest.approx(min(400.0, 50.0 * x))
    assert 400.0 / 50.0 in list(roof.get_xdata())  # the ridge


def test_the_roofs_follow_each_rows_peaks_and_only_when_probed(run):
    rows, categories, kernels, _ = run
    rows = [replace(rows[0], bandwidth_gbs=None), replace(rows[1], gemm_gflops=900.0)]
    ax = profile_figure(rows, categories, kernels, "t").axes[1]
    roofs = [ln for ln in ax.get_lines() if "roof" in ln.get_label()]
    assert [ln.get_label().split(" roof")[0] for ln in roofs] == ["dynamic"]
    assert max(roofs[0].get_ydata()) == pytest.approx(900.0)


def test_no_kernel_with_bytes_and_flops_says_so(run):
    rows, categories, kernels, _ = run
    bare = [replace(k, bytes=None, flops=None) for k in kernels]
    ax = profile_figure(rows, categories, bare, "t").axes[1]
    assert len(ax.collections) == 0
    assert [t.get_text() for t in ax.texts] == ["no kernel with bytes and flops"]


def test_the_figure_is_saved_whole_and_closed(run, tmp_path):
    rows, categories, kernels, _ = run
    path = draw_profile(rows, categories, kernels, tmp_path / "out" / "profile.png", "t")
    assert path == tmp_path / "out" / "profile.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == []
