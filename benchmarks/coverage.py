"""Coverage measured, not assumed: how often one `decode` run's interval holds the others' median.

What it is: a script, not in CI (it times real runs for minutes), that runs `nanobench decode`
K >= 6 times with the same arguments, each a separate command, and for every ratio column
(`ratio_vs_hf_eager`, `ratio_vs_hf_compiled`, `ratio_vs_floor` of every system) reports the
share of runs whose interval contains the median of the other K - 1 runs' estimates
(leave-one-out). An interval that holds only what its own process saw covers far less than
its stated level; one that holds between-process variance comes close to it. Per run it
also prints the wall seconds, every gate's verdict and each interval's high / low, and at the
end the gates that passed in one run and failed in another (`flips`).
What it is not: a unit test or a gate; it prints a figure for a person to quote.
Invariant: every run is its own `python -m nanobench.cli decode` process with identical
arguments; a run with no interval for a ratio claimed nothing and is counted apart, never as
covering.

With `--prime N`, N runs go first that only fill the machine's run history
(`nanobench.harness.statistics.history`, which a decode run reads and adds to): the coverage of runs that
each had at least N earlier runs to learn the run-to-run spread from.

Usage: python benchmarks/coverage.py --runs 6 -- --threads 1 --steps 32 --processes 2
       python benchmarks/coverage.py --prime 3 --runs 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RATIOS = ("ratio_vs_hf_eager", "ratio_vs_hf_compiled", "ratio_vs_floor")


@dataclass(frozen=True)
class Coverage:
    """One ratio of one system over K runs: how many intervals held the others' median."""

    system: str
    ratio: str
    runs: int
    with_interval: int
    covered: int

    @property
    def share(self) -> float | None:
        return self.covered / self.with_interval if self.with_interval else None


def leave_one_out(runs: list[tuple[float | None, float | None, float | None]]) -> tuple[int, int]:
    """(covered, with an interval): run i covers when low_i <= median(others' estimates) <= high_i.

    `runs` holds (estimate, low, high) per run; None where a run has no value.
    """
    covered = with_interval = 0
    for i, (_, low, high) in enumerate(runs):
        others = [e for j, (e, _, _) in enumerate(runs) if j != i and e is not None]
        if low is None or high is None or not others:
            continue
        with_interval += 1
        covered += low <= statistics.median(others) <= high
    return covered, with_interval


def run_decode(args: list[str], out: Path, verdicts: list | None = None) -> list:
    """One `nanobench decode --json` in its own process: its rows, rebuilt as DecodeRows;
    its wall seconds and {gate: verdict} appended to `verdicts` when given."""
    from nanobench.decode.rows import DecodeRow
    from nanobench.harness.runs.rows import rebuild

    command = [sys.executable, "-m", "nanobench.cli", "decode", "--json", "--quiet"]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--out", str(out), *args], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"decode exited {done.returncode}: {done.stderr.strip()[-500:]}")
    doc = json.loads(done.stdout)
    if verdicts is not None:
        gates = {
            g["name"]: g.get("verdict", "pass" if g["passed"] else "fail") for g in doc["gates"]
        }
        verdicts.append((round(time.monotonic() - started, 1), gates))
    return [rebuild(DecodeRow, row) for row in doc["rows"]]


def flips(verdicts: list[dict[str, str]]) -> list[str]:
    """The gates that passed in one run and failed in another."""
    names = sorted({n for v in verdicts for n in v})
    return [n for n in names if {"pass", "fail"} <= {v.get(n) for v in verdicts}]


def coverage(all_rows: list[list]) -> list[Coverage]:
    """Every (system, ratio) that any run measured, with its leave-one-out coverage; a run
    that has no row for the system counts as one without a value."""
    systems = sorted({r.system for rows in all_rows for r in rows})
    found = []
    for system in systems:
        for ratio in RATIOS:
            runs = []
            for rows in all_rows:
                row = next((r for r in rows if r.system == system), None)
                ends = (ratio, f"{ratio}_low", f"{ratio}_high")
                runs.append(tuple(getattr(row, k) if row else None for k in ends))
            if all(e is None for e, _, _ in runs):
                continue
            covered, with_interval = leave_one_out(runs)
            found.append(Coverage(system, ratio, len(runs), with_interval, covered))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="decode runs, at least 6")
    parser.add_argument("--prime", type=int, default=0, help="uncounted runs that fill history")
    parser.add_argument("--json", dest="json_path", help="also write the figures here")
    parser.add_argument("decode_args", nargs="*", help="arguments for every decode, after --")
    opts = parser.parse_args(argv)
    if opts.runs < 6:
        parser.error(f"--runs {opts.runs}: expected at least 6 (5 others make a median)")
    all_rows, verdicts = [], []
    with tempfile.TemporaryDirectory(prefix="nanobench-coverage-") as tmp:
        for k in range(opts.prime):
            print(f"priming {k + 1}/{opts.prime}: nanobench decode {' '.join(opts.decode_args)}")
            primed: list = []
            run_decode(opts.decode_args, Path(tmp) / f"prime-{k}", primed)
            print(f"  {primed[-1][0]} s")
        for k in range(opts.runs):
            print(f"run {k + 1}/{opts.runs}: nanobench decode {' '.join(opts.decode_args)}")
            all_rows.append(run_decode(opts.decode_args, Path(tmp) / str(k), verdicts))
            wall, gates = verdicts[-1]
            print(f"  {wall} s; " + ", ".join(f"{n} {v}" for n, v in sorted(gates.items())))
            for r in all_rows[-1]:
                spans = [
                    f"{c} {r_hi / r_lo:.2f}"
                    for c in RATIOS
                    if (r_lo := getattr(r, f"{c}_low")) and (r_hi := getattr(r, f"{c}_high"))
                ]
                print(f"  {r.system}: high/low " + ", ".join(spans))  # fmt: skip
    found = coverage(all_rows)
    flipped = flips([g for _, g in verdicts])
    print("gates that passed in one run and failed in another: " + (", ".join(flipped) or "none"))
    for c in found:
        share = "-" if c.share is None else f"{c.share:.0%}"
        print(
            f"{c.system} {c.ratio}: {c.covered}/{c.with_interval} intervals hold the others' "
            f"median ({share}); {c.runs - c.with_interval} runs had no interval"
        )
    if opts.json_path:
        doc = [{**asdict(c), "share": c.share} for c in found]
        Path(opts.json_path).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
