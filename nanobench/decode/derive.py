"""`decode`'s derived columns: what the rows say once every round is in.

What it is: `derive(rows, spec, probe, windows)`: per system the greedy tokens against the
reference's (`reference_row`: engine-eager, else hf-eager; `first_difference`, `digest`), the
step-time median and IQR over every steady step of every round (`timing_fields`), each ratio to
transformers and to the roofline floor (the probe's rounds, `floor_fields`) with its interval
paired by round and lent the run's process pool, or the machine's history of the same comparison
where it has one (`ratio_fields`, `put_interval`), and `mark_floor` (the floor probe failed once
any step ran below the floor).
What it is not: the measurement (`decode.bench.sweep`) or the gates (`decode.gates`).
Invariant: a ratio pairs the two systems' windows of the same round, never across rounds; a
failed row derives no figure; an interval's ends are None where there is none, never 0.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, replace

from nanobench.decode.roofline import PROBE, floor_beaten, roofline_ms
from nanobench.decode.rows import DecodeRow, ProbeRow, RunSpec, SystemRow
from nanobench.harness.statistics.history import Calibration
from nanobench.harness.statistics.stats import CONFIDENCE, ratio_interval, spread
from nanobench.harness.workers.rounds import Comparison, Window, paired_rounds, window_pool

# The reference whose tokens every row is compared with, in order of preference.
REFERENCES = ("engine-eager", "hf-eager")
INTERVAL_COLUMNS = ("ratio_vs_hf_eager", "ratio_vs_hf_compiled", "ratio_vs_floor")
# Each ratio column and the member it divides by: the floor is the probe's rounds.
COMPARED = {"ratio_vs_hf_eager": "hf-eager", "ratio_vs_hf_compiled": "hf-static-compiled",
            "ratio_vs_floor": PROBE}  # fmt: skip


def first_difference(tokens: list[list[int]], ref: list[list[int]]) -> str | None:
    if len(tokens) != len(ref):
        return f"{len(tokens)} rows against {len(ref)}"
    for r, (a, b) in enumerate(zip(tokens, ref)):
        for s, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"row {r} step {s}: {x} vs {y}"
        if len(a) != len(b):
            return f"row {r}: {len(a)} tokens against {len(b)}"
    return None


def reference_row(rows: list[SystemRow]) -> SystemRow | None:
    for name in REFERENCES:
        for r in rows:
            if r.system == name and r.status == "ok" and r.tokens:
                return r
    return None


def derive(
    rows: list[SystemRow],
    spec: RunSpec,
    probe: ProbeRow | None,
    windows: list[Window] | tuple = (),
    confidence: float = CONFIDENCE,
    history: Mapping[tuple[str, str], Calibration] | None = None,
) -> list[DecodeRow]:
    """tokens_match against the reference; each row's step-time spread over the rounds; its
    ratio to each transformers row and to the roofline floor, with intervals paired by round
    at `confidence` (95% less what the stop rule's earlier looks spent, `rounds.look_confidence`);
    `history[(system, column)]`, where given, lends each ratio its earlier runs' spread.
    """
    ref = reference_row(rows)
    timed = [w for w in windows if w.status == "ok"]
    # A failed probe measured nothing: no floor, never a floor from a made-up rate.
    measured = probe if probe is not None and probe.status == "ok" else ProbeRow("not run")
    floor = floor_fields(spec, measured, timed)
    out = []
    for r in rows:
        d = {**token_fields(r, ref), **timing_fields(r, spec, timed)}
        ok = r.status == "ok" and bool(d.get("ms_per_step"))
        d.update(ratio_fields(r.system, timed, ok, confidence, history or {}))
        d["processes"] = max(1, len({w.process for w in timed if w.system == r.system}))
        d["history"] = history_note(r.system, history or {})
        if any(d.get(f"{c}_low") is not None for c in INTERVAL_COLUMNS):
            d["ci_level"] = round(confidence, 4)
        d.update(
            **floor,
            rows=spec.rows,
            prompt_len=spec.prompt_len,
            steps=spec.steps,
            dtype=spec.dtype,
            device=spec.device,
            model=spec.model,
        )
        out.append(DecodeRow(**{**asdict(r), **d}))
    return mark_floor(out)


def timing_fields(r: SystemRow, spec: RunSpec, timed: list[Window]) -> dict:
    """The row's step-time median, quartiles, IQR and cv over every steady step of its rounds."""
    found = spread([m for w in timed if w.system == r.system for m in w.steady_ms()])
    d: dict = {"rounds": len({w.round for w in timed if w.system == r.system})}
    if found is not None and r.status == "ok":
        d["ms_per_step"] = round(found.median_ms, 4)
        d["ms_q1"], d["ms_q3"] = round(found.q1_ms, 4), round(found.q3_ms, 4)
        d["ms_iqr"], d["ms_cv"] = round(found.iqr_ms, 4), round(found.cv, 4)
        d["tokens_per_s"] = round(spec.rows * 1e3 / found.median_ms, 2)
    return d


def ratio_fields(
    system: str, timed: list[Window], ok: bool, confidence: float,
    history: Mapping[tuple[str, str], Calibration],
) -> dict:  # fmt: skip
    """The row's ratio to each transformers system and to the floor (the probe's windows, one a
    round), each paired by round and lent the machine's history of it (`harness.statistics.history`),
    else the run's process pool (`rounds.window_pool`)."""
    d: dict = {}
    for column, theirs in COMPARED.items():
        ours_ms, theirs_ms, processes = paired_rounds(timed, system, theirs)
        found = None
        calibration = history.get((system, column))
        if ok and ours_ms and calibration is not None:
            found = calibration.interval(ours_ms, theirs_ms, processes, confidence)
        if ok and ours_ms and found is None:
            pool = window_pool(timed, Comparison(column, system, theirs))
            found = ratio_interval(ours_ms, theirs_ms, processes, confidence, pool)
        put_interval(d, column, found)
    return d


def history_note(system: str, history: Mapping[tuple[str, str], Calibration]) -> str | None:
    """The row's history note: of its key with the most earlier runs (a run records all of a
    row's ratios together, so they differ only where a ratio had no interval)."""
    mine = [c for (s, _), c in history.items() if s == system]
    return max(mine, key=lambda c: c.runs + len(c.out)).describe() if mine else None


def floor_fields(spec: RunSpec, measured: ProbeRow, timed: list[Window]) -> dict:
    """The floor every row shares: its bound from the probe's rates, its milliseconds the
    geometric mean of the probe's rounds (what the ratio divides by) or, before any round,
    the set-up probe's."""
    step_bytes = spec.weight_bytes + spec.kv_bytes
    floor, bound = roofline_ms(
        step_bytes, measured.bandwidth_gbs, spec.step_flops, measured.gemm_gflops
    )
    rounds = [m for w in timed if w.system == PROBE for m in w.steady_ms()]
    if rounds and floor:
        floor = math.exp(statistics.fmean(math.log(m) for m in rounds))
    return dict(
        bandwidth_gbs=measured.bandwidth_gbs,
        bandwidth_median_gbs=measured.bandwidth_median_gbs,
        gemm_gflops=measured.gemm_gflops,
        weight_bytes=spec.weight_bytes,
        kv_bytes=spec.kv_bytes,
        step_bytes=step_bytes,
        step_flops=spec.step_flops,
        floor_ms=round(floor, 4) if floor else None,
        floor_bound=bound,
    )


def token_fields(r: SystemRow, ref: SystemRow | None) -> dict:
    """A row's tokens against the reference's: match, first mismatch, digest."""
    d: dict = {"tokens_ref": ref.system if ref else None}
    if r.tokens and ref is not None:
        diff = first_difference(r.tokens, ref.tokens)
        if diff is None and r.deterministic is False:
            diff = "repeats of this system disagree with each other"
        d["tokens_match"], d["first_mismatch"] = diff is None, diff
    if r.tokens:
        d["tokens_digest"] = digest(r.tokens)
    return d


def mark_floor(rows: list[DecodeRow]) -> list[DecodeRow]:
    """Every row's floor_probe: ok, or failed once any row's step ran below the shared floor."""
    failed = next(
        (f for r in rows if (f := floor_beaten(r.system, r.ms_per_step, r.floor_ms))), None
    )
    return [replace(r, floor_probe=failed or ("ok" if r.floor_ms else None)) for r in rows]


def put_interval(row: dict, column: str, interval) -> None:
    """column, column_low, column_high, column_within_share and column_df from an Interval (NaN
    or no interval: None), and column_variance: where its process variance came from."""
    ends = (
        (float("nan"),) * 5
        if interval is None
        else (
            interval.estimate, interval.low, interval.high, interval.within_share, interval.df
        )
    )  # fmt: skip
    keys = (column, f"{column}_low", f"{column}_high", f"{column}_within_share", f"{column}_df")
    for key, value in zip(keys, ends):
        row[key] = None if value != value or value == math.inf else round(value, 4)
    row[f"{column}_variance"] = interval.variance_from or None if interval is not None else None


def digest(tokens: list[list[int]]) -> str:
    return hashlib.sha256(repr(tokens).encode()).hexdigest()[:12]
