"""benchmarks/coverage.py's arithmetic: leave-one-out coverage counted by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from nanobench.decode.rows import DecodeRow

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "coverage.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("coverage_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def test_an_interval_covers_when_it_holds_the_median_of_the_other_runs(script):
    runs = [
        (1.0, 0.9, 1.1),  # others 1.2, 1.0, 0.8, 1.1, 1.0: median 1.0, inside
        (1.2, 1.15, 1.25),  # others 1.0, 1.0, 0.8, 1.1, 1.0: median 1.0, outside
        (1.0, 0.95, 1.05),  # others 1.0, 1.2, 0.8, 1.1, 1.0: median 1.0, inside
        (0.8, 0.7, 0.9),  # others 1.0, 1.2, 1.0, 1.1, 1.0: median 1.0, outside
        (1.1, 1.0, 1.2),  # others 1.0, 1.2, 1.0, 0.8, 1.0: median 1.0, inside (on the edge)
        (1.0, None, None),  # no interval: counted apart
    ]
    assert script.leave_one_out(runs) == (3, 5)


def test_coverage_reads_every_system_and_ratio_that_a_run_measured(script):
    def run(est, low, high):
        return [DecodeRow("engine-eager", "ok", ratio_vs_hf_eager=est,
                          ratio_vs_hf_eager_low=low, ratio_vs_hf_eager_high=high)]  # fmt: skip

    runs = [run(1.0, 0.9, 1.1)] * 5 + [run(2.0, 1.9, 2.1)]
    (found,) = script.coverage(runs)
    # the five alike hold the others' median (1.0); the outlier's [1.9, 2.1] does not
    assert (found.system, found.ratio, found.runs) == ("engine-eager", "ratio_vs_hf_eager", 6)
    assert (found.covered, found.with_interval) == (5, 6) and found.share == pytest.approx(5 / 6)
    with pytest.raises(SystemExit):
        script.main(["--runs", "5"])


def test_a_gate_that_passed_in_one_run_and_failed_in_another_is_a_flip(script):
    runs = [{"a": "pass", "b": "pass"}, {"a": "inconclusive", "b": "fail"}, {"a": "pass"}]
    assert script.flips(runs) == ["b"]
