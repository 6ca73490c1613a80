"""Every figure's text is whole and apart: none leaves the figure, none overlaps another.

Each `reports` figure is drawn at its default size (Agg) from realistic rows, long strings
included (a dynamo recompile reason, a user's target path), and every text artist the canvas
actually drew is measured by its window extent: nothing past the figure's edge, no two texts
(titles, tick labels, interval labels, legends) sharing more than a pixel. `compare.png` also
marks a side that fell back to eager, and only that side.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text

from nanobench.compile.rows import CompileRow
from nanobench.decode.rows import DecodeRow
from nanobench.startup.phases import START_PHASES
from nanobench.startup.rows import StartRow
from reports.style import title

SAVERS = ("capture", "change", "compile", "decode", "pool_budget", "startup", "csvio")
REASON = "tensor 'L['x']' size mismatch at index 1. expected 17, actual 18"
TARGET = "tests/corpus/memory_gptfast.py:llama3_70b_sliding_window_factory"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the reports save, kept open here instead of written and closed."""
    matplotlib.use("Agg")
    plt.close("all")
    figures = []

    def keep(fig, path: Path) -> Path:
        figures.append(fig)
        return path

    for module in SAVERS:
        monkeypatch.setattr(f"reports.{module}.save_figure", keep)
    yield figures
    plt.close("all")


def drawn_texts(fig) -> list[Text]:
    """The texts the canvas drew (tick labels past the view limits are never drawn)."""
    seen: list[Text] = []
    original = Text.draw

    def recording(self, renderer):
        seen.append(self)
        return original(self, renderer)

    Text.draw = recording
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    return [t for t in dict.fromkeys(seen) if t.get_visible() and t.get_text().strip()]


def corners(t: Text, renderer) -> np.ndarray:
    """The four corners (pixels) of the text's own box, turned by its rotation: a rotated
    label's window extent is the upright box around it, wider than the text itself."""
    box = Text.get_window_extent(t, renderer)  # Text's own: an annotation's arrow is not text
    angle = np.deg2rad(t.get_rotation())
    if angle == 0:
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    with_rotation = t.get_rotation()
    t.set_rotation(0)
    upright = Text.get_window_extent(t, renderer)
    t.set_rotation(with_rotation)
    # A rotated rectangle and the upright box around it share their centre.
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [upright.width / 2, upright.height / 2]
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return half @ turn.T + [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]


def overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Two convex boxes share more than a pixel along every separating axis (their edges')."""
    for quad in (a, b):
        for edge in (quad[1] - quad[0], quad[3] - quad[0]):
            axis = edge / np.linalg.norm(edge)
            pa, pb = a @ axis, b @ axis
            if min(pa.max(), pb.max()) - max(pa.min(), pb.min()) <= 1:
                return False
    return True


def inside(quad: np.ndarray, box) -> bool:
    x, y = quad[:, 0], quad[:, 1]
    return (
        x.min() >= box.x0 - 1
        and y.min() >= box.y0 - 1
        and x.max() <= box.x1 + 1
        and (y.max() <= box.y1 + 1)
    )


def text_faults(fig) -> list[str]:
    """'cut: ...' for a text past the figure's edge, 'outside its axes: ...' for a label an
    axes holds (a bar's value, a note) that leaves it for the title's or a neighbour's space,
    'overlap: ... | ...' for two texts that meet."""
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    quads = [(t, corners(t, renderer)) for t in texts]
    held = {id(t): ax for ax in fig.axes for t in ax.texts}
    faults = [f"cut: {t.get_text()!r}" for t, q in quads if not inside(q, fig.bbox)]
    faults += [
        f"outside its axes: {t.get_text()!r}"
        for t, q in quads
        if id(t) in held and not inside(q, held[id(t)].bbox)
    ]
    for i, (t, a) in enumerate(quads):
        for u, b in quads[i + 1 :]:
            if overlap(a, b):
                faults.append(f"overlap: {t.get_text()!r} | {u.get_text()!r}")
    return faults


def assert_whole(fig, says=()) -> None:
    """No text cut or overlapping, and each of `says` drawn whole (wrapping aside)."""
    faults = text_faults(fig)
    assert not faults, "\n".join(faults)
    drawn = "".join("".join(t.get_text().split()) for t in drawn_texts(fig))
    for text in says:
        assert "".join(text.split()) in drawn, text


def compile_rows(side: str = "", fell_back: str = "static") -> list[CompileRow]:
    """off and three compiled modes; `fell_back` hit dynamo's recompile limit and ran eager."""
    common = dict(side=side, status="ok", recompile_limit=8, compile_s=41.7, builds=9)
    off = CompileRow(
        mode="off",
        step_ms=23.41,
        step_ms_q1=22.9,
        step_ms_q3=24.2,
        speedup=1.0,
        speedup_low=0.8,
        speedup_high=1.25,
        guard_kind="none",
        builds_per_step=[0] * 16,
        **{**common, "builds": 0, "compile_s": 0.0},
    )
    rows = [off]
    for mode, speedup in (("dynamic", 1.83), ("static", 0.97), ("reduce-overhead", 2.41)):
        rows.append(
            CompileRow(
                mode=mode,
                step_ms=23.41 / speedup,
                step_ms_q1=22.0 / speedup,
                step_ms_q3=25.0 / speedup,
                speedup=speedup,
                speedup_low=speedup * 0.8,
                speedup_high=speedup * 1.25,
                fell_back=mode == fell_back,
                reuse=0.94,
                guard_kind="size-specialised" if mode == "static" else "symbolic",
                recompile_reasons=[REASON] * 8 if mode == fell_back else [],
                builds_per_step=[1] * 9 + [0] * 7,
                saving_per_step_ms=4.2,
                breakeven_steps=9928.0,
                **common,
            )
        )
    return rows


def compile_title(what: str) -> str:
    return title(
        what,
        model=None,
        device="cuda",
        dtype="bfloat16",
        rows=64,
        steps="256 x 12 rounds in 3 processes",
        shapes="open",
        inductor_cache="fresh (per run)",
        backend="inductor",
    )


def test_the_compiled_decode_figure_keeps_its_text_whole_and_apart(drawn, tmp_path):
    from reports.compile import draw_compiled_decode

    head = compile_title(f"compiled decode of target {TARGET}")
    draw_compiled_decode(compile_rows(), tmp_path / "compiled-decode.png", head)
    # The recompile reason whole: its tail (expected 17, actual 18) is what it says.
    assert_whole(drawn[0], says=[head, f"first recompile: {REASON}", "1.00x [0.80, 1.25]"])


def decode_rows(side: str = "") -> list[DecodeRow]:
    """Every decode system; hf-static-compiled's tokens differ from the reference's."""
    found = []
    for i, system in enumerate(
        ("engine-eager", "engine-compiled", "engine-captured", "hf-eager", "hf-static-compiled")
    ):
        ms = 31.4 - 5.1 * i
        found.append(
            DecodeRow(
                system,
                "ok",
                side=side,
                tokens_match=system != "hf-static-compiled",
                ms_per_step=ms,
                ms_q1=ms * 0.97,
                ms_q3=ms * 1.04,
                rows=64,
                tokens_per_s=64e3 / ms,
                ratio_vs_hf_eager=ms / 16.1,
                ratio_vs_hf_eager_low=ms / 16.1 * 0.93,
                ratio_vs_hf_eager_high=ms / 16.1 * 1.08,
                floor_ms=4.87,
                floor_bound="memory",
                ratio_vs_floor=ms / 4.87,
                ratio_vs_floor_low=ms / 4.87 * 0.95,
                ratio_vs_floor_high=ms / 4.87 * 1.06,
            )
        )
    return found


def test_the_decode_figure_keeps_its_text_whole_and_apart(drawn, tmp_path):
    from reports.decode import draw_decode

    head = title(
        "decode of meta-llama/Llama-3.2-1B-Instruct bfloat16 (after) vs "
        "meta-llama/Llama-3.2-1B-Instruct float16 (before)",
        model=None,
        device="cuda",
        dtype="bfloat16",
        rows=64,
        prompt_len=512,
        steps=256,
        threads="default",
        interleaved_rounds=12,
        processes=3,
    )
    draw_decode(decode_rows(), tmp_path / "decode.png", head)
    assert_whole(drawn[0], says=[head, "1.95x [1.81, 2.11] x hf-eager"])


def test_the_capture_figure_keeps_its_text_whole_and_apart(drawn, tmp_path):
    from nanobench.capture.pools import held_rows
    from nanobench.capture.rows import PoolRow
    from reports.capture import plot_capture

    runs = [
        SimpleNamespace(
            table="run",
            steps=steps,
            captures_open=steps,
            captures_closed=min(steps, 24),
            step_ms_eager=9.8,
            step_ms_eager_q1=9.5,
            step_ms_eager_q3=10.3,
            step_ms_replayed=4.1,
            step_ms_replayed_q1=4.0,
            step_ms_replayed_q3=4.4,
            ratio_vs_eager=0.418,
            ratio_vs_eager_low=0.402,
            ratio_vs_eager_high=0.437,
        )
        for steps in (8, 64, 128, 512, 2048)
    ]
    pools = [
        PoolRow(
            "reference",
            m,
            8192 // m * 9,
            2**28 // m * 64,
            2**31 // m * 90,
            90.0,
            32,
            256,
            8192,
            [1, 2, 4, 8],
            traced_shared_pool_bytes=2**28 // m * 65,
            traced_private_pools_bytes=2**31 // m * 91,
        )
        for m in (64, 128, 512, 2048)
    ]
    head = title(
        "captured decode",
        model="meta-llama/Llama-3.2-1B-Instruct",
        device="cuda",
        dtype="bfloat16",
        rows=256,
        prompt_len=512,
        width_multiple=2048,
    )
    plot_capture(tmp_path / "c.png", [*runs, *pools, *held_rows(32, 256, 8192)], head)
    assert_whole(drawn[0])


def test_the_explain_figure_keeps_its_text_whole_and_apart(drawn, tmp_path):
    from reports.explain import draw_explain

    rows = [
        SimpleNamespace(
            layers=None,
            path=f"target step {k}",
            graphs=3,
            graph_breaks=2,
            value_guards=6,
            side=side,
        )
        for side in ("before", "after")
        for k in range(4)
    ]
    draw_explain(rows, tmp_path / "explain.png", f"explain: {TARGET} (after) vs {TARGET}.orig")
    assert_whole(drawn[0])


def test_the_startup_figure_keeps_its_text_whole_and_apart(drawn, tmp_path):
    from reports.startup import draw_startup

    rows = [
        asdict(
            StartRow(mode, kind, 0, **{f"{p}_s": 0.3 + 0.1 * i for i, p in enumerate(START_PHASES)})
        )
        for mode in ("off", "dynamic", "static", "reduce-overhead")
        for kind in ("cold", "warm", "hot")
    ]
    head = title(
        f"startup of target {TARGET}",
        model=None,
        device="cuda",
        dtype="bfloat16",
        rows=64,
        steps="16 in the first pass, 3 runs",
        backend="inductor",
        pgo="off (pinned)",
    )
    draw_startup(rows, START_PHASES, tmp_path / "startup.png", head)
    assert_whole(drawn[0])


def test_the_pool_budget_figures_keep_their_text_whole_and_apart(drawn, tmp_path):
    from nanobench.pool_budget.budget import TargetFitRow, TargetSizeRow
    from reports.pool_budget import plot_pool_budget, plot_target_budget

    gib, device = 2**30, 80 * 2**30
    rows = [
        SimpleNamespace(
            kernel=kernel,
            width_multiple=multiple,
            fits=multiple != 64,
            device_bytes=device,
            usable_bytes=int(0.9 * device),
            dtype="bfloat16",
            max_batch=256,
            max_model_len=8192,
            capture_output="shared",
            traced_peak_bytes=int(gib * 2048 / (multiple or 2048)),
            traced_workspace_bytes=gib,
            shared_output_bytes=gib // 4,
            graph_outputs_bytes=gib,
            weights_bytes=16 * gib,
            activation_bytes=gib // 2,
            persistent_bytes=gib // 8,
            kv_pool_bytes=48 * gib,
        )
        for kernel, multiple in (
            ("reference", 64),
            ("reference", 512),
            ("reference", 2048),
            ("triton", None),
        )
    ]
    plot_pool_budget(tmp_path / "a.png", rows, model="meta-llama/Llama-3.2-1B-Instruct")
    sizes = [
        TargetSizeRow(
            "size",
            TARGET,
            n,
            14 * gib + n * 2**24,
            n * 2**26,
            n * 2**26,
            n * 2**20,
            15 * gib,
            1200,
            "bfloat16",
        )
        for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    ]
    fit = TargetFitRow(
        "fit",
        TARGET,
        [s.rows for s in sizes],
        9,
        18 * gib,
        2**34,
        2**36,
        2**34,
        2**36,
        2**28,
        False,
        34 * gib,
        device,
        0.9,
        int(0.9 * device),
        True,
        0,
        [s.rows for s in sizes],
        "bfloat16",
    )
    plot_target_budget(tmp_path / "b.png", sizes, fit)
    for fig in drawn:
        assert_whole(fig)


def test_the_buckets_figure_keeps_its_text_whole_and_apart():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from nanobench.buckets.bench import measure
    from nanobench.buckets.spec import BucketsSpec
    from nanobench.harness.runs.rows import as_dicts
    from reports.buckets import draw_buckets

    spec = BucketsSpec().validate()
    result = measure(spec)
    traces = [asdict(t) for t in result.traces]
    fig = draw_buckets(
        as_dicts(result.runs), as_dicts(result.capture), traces, spec.max_shapes, spec.max_waste
    )
    FigureCanvasAgg(fig)  # the Figure is canvas-less until the caller saves it
    assert_whole(fig)


def test_the_sweep_figure_keeps_its_text_whole_and_apart():
    from nanobench.sweep.points import PointRecord
    from reports.sweep import FIGURES, draw_sweep

    axes = [
        ("rows", (1, 8, 64, 256)),
        ("backend", ("inductor", "aot_eager", "cudagraphs")),
        ("target", (TARGET, "hf-static")),
    ]
    records = [
        PointRecord(
            f"k{i}",
            i,
            "compile",
            {"rows": r, "backend": b, "target": t},
            "ok",
            "",
            12.0,
            {},
            [
                {"mode": "off", "speedup": 1.0},
                {"mode": "dynamic", "speedup": 1.8, "ci_low": 1.6, "ci_high": 2.0},
            ],
            [{"name": "check_speedup", "verdict": "pass"}],
            {},
        )
        for i, (r, b, t) in enumerate(
            (r, b, t) for r in axes[0][1] for b in axes[1][1] for t in axes[2][1]
        )
    ]
    run = {"model": "-", "device": "cuda", "dtype": "bfloat16"}
    fig = draw_sweep(records, axes, FIGURES["compile"], "compile", run)
    assert_whole(fig)
    # One row of two points: the smallest figure a sweep draws, under the same long title.
    one_row = [("backend", ("inductor",)), axes[2]]
    small = draw_sweep(records[:2], one_row, FIGURES["compile"], "compile", run)
    assert_whole(small)
    plt.close("all")


def sided_compile(fell_back: str, before_fell_back: str = "") -> list[dict]:
    """Both sides' compile rows; `fell_back` (after) and `before_fell_back` ran eager past
    dynamo's recompile limit, every other compiled mode compiled."""
    before = compile_rows("before", fell_back=before_fell_back)
    return [asdict(r) for r in (*before, *compile_rows("after", fell_back=fell_back))]


def marked(fig) -> list[tuple[int, float]]:
    """(panel, bar centre) of every bar drawn as fallen back: cross-hatched, outlined red."""
    red = matplotlib.colors.to_rgba("tab:red")
    return sorted(
        (i, round(p.get_x() + p.get_width() / 2, 3))
        for i, ax in enumerate(fig.axes)
        for p in ax.patches
        if p.get_hatch() == "xx" and p.get_edgecolor() == red
    )


def legends(fig) -> list[list[str]]:
    return [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]


@pytest.mark.parametrize(
    ("after", "before", "bars"),
    [
        # modes off, dynamic, static, reduce-overhead at 0..3; before's bar 0.2 left, after's right
        ("static", "", [2.2]),
        ("", "dynamic", [0.8]),
        ("reduce-overhead", "reduce-overhead", [2.8, 3.2]),
        ("", "", []),
    ],
)
def test_compare_marks_only_a_side_that_fell_back_to_eager(drawn, tmp_path, after, before, bars):
    from reports.change import draw_compare

    draw_compare(sided_compile(after, before), tmp_path / "compare.png", "compile: a vs b")
    fig = drawn[0]
    # Both panels (step ms, speedup) mark the same bars, and only those.
    assert marked(fig) == [(panel, x) for panel in (0, 1) for x in bars]
    for names in legends(fig):
        assert ("fell back to eager" in names) is bool(bars)
        assert names.count("fell back to eager") <= 1


def test_the_compare_figures_keep_their_text_whole_and_apart(drawn, tmp_path):
    from reports.change import DECODE_PANELS, draw_compare

    head = compile_title(f"compiled decode of target {TARGET} (after) vs {TARGET}.orig (before)")
    draw_compare(sided_compile("static"), tmp_path / "compare.png", head)
    sides = [asdict(r) for s in ("before", "after") for r in decode_rows(s)]
    old, new = "runs/2024-06-01T12-30-05-llama-bf16", "runs/2024-06-02T08-11-47-llama-fp16"
    draw_compare(sides, tmp_path / "c.png", f"decode: {old} (old) vs {new} (new)", DECODE_PANELS)
    assert_whole(drawn[0], says=[head])
    assert_whole(drawn[1], says=[f"decode: {old} (old) vs {new} (new)"])
    # decode rows carry no fall-back: nothing is marked as one.
    assert marked(drawn[1]) == []
