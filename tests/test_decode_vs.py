"""`decode --vs-model / --vs-dtype`: both sides' systems in one fleet, and what changed.

The step change is checked against the geometric mean of the paired rounds computed here by
hand; the fleet's comparisons by name; the command's wiring through the sweep's seam (both
sides' rows, the change table, `decode-changes.csv`, the samples by side, the gates); one real
run end to end, each side's tokens against transformers' on the same side.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.decode.bench import PROBE, comparisons_of
from nanobench.decode.rows import DecodeRow, ProbeRow, SystemRow
from nanobench.decode.spec import DecodeSpec
from nanobench.decode.vs import changes
from nanobench.harness.runs.change import CANT_TELL, FASTER
from nanobench.harness.runs.sides import Sides
from nanobench.harness.workers.member import Member
from nanobench.harness.workers.rounds import Window

runner = CliRunner()
SYSTEMS = ("engine-eager", "hf-eager")
BEFORE_AFTER = Sides.of(DecodeSpec(systems=SYSTEMS, vs_dtype="bfloat16"))


def test_each_side_keeps_its_own_ratios_and_each_system_gets_an_after_over_before():
    members = [Member(side, s) for side in ("before", "after") for s in (PROBE, *SYSTEMS)]
    found = [
        (c.name, str(c.numerator), str(c.denominator))
        for c in comparisons_of(members, BEFORE_AFTER)
    ]
    assert len({n for n, _, _ in found}) == len(found), "names are the stop rule's keys"
    assert ("before engine-eager/hf-eager", "before engine-eager", "before hf-eager") in found
    assert ("after hf-eager/floor", "after hf-eager", f"after {PROBE}") in found
    assert ("hf-eager after/before", "after hf-eager", "before hf-eager") in found
    alone = [Member("", s) for s in (PROBE, *SYSTEMS)]
    assert ("engine-eager/hf-eager", "engine-eager", "hf-eager") in [
        (c.name, str(c.numerator), str(c.denominator)) for c in comparisons_of(alone, Sides.of(DecodeSpec(systems=SYSTEMS)))]  # fmt: skip


def windows_for(ms: dict[tuple[str, str], float], rounds: int, seed: int = 0) -> list[Window]:
    rng = np.random.default_rng(seed)
    return [
        Window(system, r, "ok", (m * math.exp(0.05 * rng.standard_normal()),) * 3,
               (0,) * 3, (True,) * 3, (r - 1) % 3 + 1, side)
        for r in range(1, rounds + 1)
        for (side, system), m in ms.items()
    ]  # fmt: skip


def rows_of(sides=("before", "after")) -> list[DecodeRow]:
    return [DecodeRow(system=s, status="ok", side=side, ms_per_step=1.0, frames_compiled=None)
            for side in sides for s in SYSTEMS]  # fmt: skip


def test_the_step_change_is_the_geometric_mean_of_the_paired_rounds():
    ms = {("before", "engine-eager"): 4.0, ("after", "engine-eager"): 3.0,
          ("before", "hf-eager"): 5.0, ("after", "hf-eager"): 5.0}  # fmt: skip
    windows = windows_for(ms, 12)
    found = {
        c.member: c
        for c in changes(rows_of(), windows, 0.95, BEFORE_AFTER)
        if c.column == "step_ms"
    }
    med = {(str(w.member), w.round): w.ms[0] for w in windows}
    by_hand = math.exp(np.mean([math.log(med[("after engine-eager", r)]
                                         / med[("before engine-eager", r)]) for r in range(1, 13)]))  # fmt: skip
    assert found["engine-eager"].change == pytest.approx(by_hand, abs=1e-4)
    assert found["engine-eager"].verdict == FASTER  # 0.75 by construction, 5% noise
    assert (
        found["hf-eager"].verdict == CANT_TELL
        and found["hf-eager"].low < 1 < found["hf-eager"].high
    )
    # Two systems' changes hold together at 95%: each is read at 97.5%.
    assert found["engine-eager"].level == pytest.approx(0.975)


def fake_sides(after_ms: float):
    """A stand-in for `bench.sweep_sides`: both sides' rows and probes, five rounds each."""

    def sweep_sides(runs, members, plan, **kw):
        listener = kw["listener"]
        assert kw["sides"].pairs == (("before", "after"),)
        for m in members:
            if m.name == PROBE:
                listener.on_row(ProbeRow("ok", PROBE, side=m.side, bandwidth_gbs=10.0,
                                         gemm_gflops=1e3))  # fmt: skip
            else:
                listener.on_row(SystemRow(m.name, "ok", side=m.side, deterministic=True,
                                          builds_measured=0, tokens=[[1, 2], [3, 4]]))  # fmt: skip
        systems = [m.name for m in members if m.name != PROBE and m.side == "after"]
        ms = {("before", s): 4.0 for s in systems} | {("after", s): after_ms for s in systems}
        for w in windows_for(ms, 5):
            listener.on_window(w)

    return sweep_sides


def test_a_comparison_writes_both_sides_its_changes_and_holds_its_gates(tmp_path, monkeypatch):
    import nanobench.decode.bench as bench

    monkeypatch.setattr(bench, "sweep_sides", fake_sides(after_ms=6.0))
    args = ["decode", "--systems", ",".join(SYSTEMS), "--vs-dtype", "bfloat16", "--out",
            str(tmp_path), "--check", "--no-slower", "step_ms"]  # fmt: skip
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 1, result.output  # 4 ms -> 6 ms: decided 50% slower
    doc = json.loads(result.stdout)
    assert sorted((r["side"], r["system"]) for r in doc["rows"]) == sorted(
        (side, s) for side in ("before", "after") for s in SYSTEMS)  # fmt: skip
    steps = [c for c in doc["changes"] if c["column"] == "step_ms"]
    assert [c["verdict"] for c in steps] == ["slower", "slower"]
    assert {g["name"]: g["verdict"] for g in doc["gates"]} == {
        "no_slower[step_ms engine-eager]": "fail", "no_slower[step_ms hf-eager]": "fail"}  # fmt: skip
    with open(tmp_path / "decode-changes.csv") as f:
        assert len(list(csv.DictReader(f))) == len(doc["changes"])
    with open(tmp_path / "decode-samples.csv") as f:
        sides = {(r["side"], r["system"]) for r in csv.DictReader(f)}
    assert sides == {(side, s) for side in ("before", "after") for s in SYSTEMS}
    table = runner.invoke(app, args)
    assert table.exit_code == 1 and "FAIL no_slower[step_ms engine-eager]" in table.output
    assert any("│ step ms " in line and "slower" in line for line in table.output.splitlines())
    assert "tiny float32 (after) vs tiny bfloat16 (before)" in table.output.replace("\n", " ")
    monkeypatch.setattr(bench, "sweep_sides", fake_sides(after_ms=3.0))
    assert runner.invoke(app, args).exit_code == 0


@pytest.mark.parametrize(
    "args, says",
    [
        (["--no-more", "builds"], "--no-more and --no-slower compare two sides"),
        (["--vs-dtype", "bfloat16", "--no-more", "breaks"], "--no-more breaks: this command"),
        (["--vs-dtype", "bfloat16", "--no-slower", "speedup"], "--no-slower speedup: this command"),
        (["--vs-dtype", "bfloat16", "--check"], "--check on a comparison gates the columns"),
        (["--vs-model", "no-such-model"], "--vs-model 'no-such-model': not a preset"),
    ],
)
def test_a_decode_comparison_asked_wrongly_is_one_line_and_exit_2(args, says, tmp_path):
    result = runner.invoke(app, ["decode", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_real_comparison_of_two_dtypes_checks_each_sides_tokens_on_its_own_side(tmp_path):
    """End to end in the default table output: the files hold what the table says."""
    # --max-rounds bounds the run; a short --budget-s stopped it at 2 rounds (no interval) on a
    # box a second suite was loading.
    result = runner.invoke(app, [
        "decode", "--systems", "engine-eager,hf-eager", "--vs-dtype", "bfloat16", "--steps", "4",
        "--rounds", "5", "--max-rounds", "5", "--budget-s", "600", "--threads", "1", "--processes", "1",
        "--out", str(tmp_path),
    ])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    frame = pd.read_csv(tmp_path / "decode.csv")
    rows = {(r["side"], r["system"]): r for r in frame.to_dict("records")}
    assert {r["dtype"] for k, r in rows.items() if k[0] == "before"} == {"bfloat16"}
    assert {r["dtype"] for k, r in rows.items() if k[0] == "after"} == {"float32"}
    # float32 agrees with transformers token for token (bfloat16 may not): the after side's
    # hf-eager is checked against the after side's engine-eager, not the before side's.
    assert rows[("after", "hf-eager")]["tokens_match"]
    assert rows[("after", "hf-eager")]["tokens_ref"] == "engine-eager"
    changes = pd.read_csv(tmp_path / "decode-changes.csv").to_dict("records")
    step = next(c for c in changes if (c["member"], c["column"]) == ("engine-eager", "step_ms"))
    assert step["low"] <= step["change"] <= step["high"]
    # the table: each system's step change with its verdict, as the changes file has it
    cells = [ln for ln in result.stdout.splitlines() if "step ms" in ln]
    assert len(cells) == 2 and any(step["verdict"] in ln for ln in cells), result.stdout
    assert "decode of tiny float32 (after) vs tiny bfloat16 (before)" in " ".join(
        result.stdout.split()
    )
    assert (tmp_path / "compare.png").stat().st_size > 10_000
