"""How a run's rounds ended: the stop rule's reason, and the lines a limit's end prints.

Checked against peers: the reason against the clock and the plan that set it (a fake clock that
passes --budget-s after the fourth round; a plan whose --max-rounds comes first); the rounds a
line asks for against `stats.rounds_to_decide`, the figure a gate's hint gives; a run a user
types with a budget too short for any interval prints what ended it, in the table and --json.
"""

from __future__ import annotations

import itertools
import re

from nanobench.harness.runs.rounds_ended import Ended, ended_lines
from nanobench.harness.statistics.stats import Interval, processes_bind, rounds_to_decide
from nanobench.harness.workers.rounds import (
    BY_BUDGET,
    BY_MAX_ROUNDS,
    DECIDED,
    Comparison,
    RoundPlan,
    run_rounds,
)
from tests.helpers import noisy_fleet

AA = Comparison("b / a", "b", "a")


def stopped(plan: RoundPlan, clock) -> list:
    said = []
    run_rounds(noisy_fleet(1, 3, {"a": 0.0, "b": 0.0}), plan, [AA], clock=clock,
               on_stop=lambda why, r: said.append((why, r)))  # fmt: skip
    return said


def test_the_stop_rule_says_which_limit_ended_the_rounds():
    ticks = itertools.count()  # one second a look at the clock: the start, then once a round
    assert stopped(RoundPlan(3, 30, 0.0001, 4.0), lambda: float(next(ticks))) == [(BY_BUDGET, 4)]
    assert stopped(RoundPlan(3, 5, 0.0001, 1e9), lambda: 0.0) == [(BY_MAX_ROUNDS, 5)]
    assert stopped(RoundPlan(3, 30, 0.99, 1e9), lambda: 0.0)[0][0] == DECIDED


def test_a_budget_stopped_run_says_so_and_how_many_more_rounds_would_decide():
    plan = RoundPlan(3, 30, 0.03, 120.0)
    near = Interval(estimate=0.61, low=0.20, high=1.90, rounds=5)
    lines = ended_lines(Ended(BY_BUDGET, 5, 120.0, (("freezing dynamic / plain", near),)), plan)
    assert lines[0] == ("rounds: the round budget (--budget-s 120) ended them after 5, not the "
                        "evidence: 1 still can't tell")  # fmt: skip
    more = rounds_to_decide(near, 1.0)  # what a gate's hint says of the same interval
    assert more and f"about {more} more rounds would likely decide" in lines[1]
    assert f"--max-rounds {5 + more} --budget-s {(5 + more) * 24}" in lines[1]
    # nothing is said where the evidence ended the rounds, or nothing was open
    assert ended_lines(Ended(DECIDED, 5, 1.0, (("x", near),)), plan) == []
    assert ended_lines(Ended(BY_BUDGET, 5, 1.0, ()), plan) == []
    spread = Interval(estimate=1.05, low=0.8, high=1.4, rounds=5, processes=3, within_share=0.1)
    assert processes_bind(spread, 1.0)  # the processes, not the rounds, set its width
    said = ended_lines(Ended(BY_BUDGET, 5, 1.0, (("x", spread),)), plan)[1]
    assert "more --processes would narrow it, more rounds would not" in said
    assert "--max-rounds" not in said
    on_one = Interval(estimate=1.0, low=0.9, high=1.1, rounds=5)
    assert "its estimate sits on 1" in ended_lines(Ended(BY_BUDGET, 5, 1.0, (("x", on_one),)),
                                                     plan)[1]  # fmt: skip


STEP = """
import torch


class Step:
    def __init__(self, rows):
        self.w = torch.randn(16, 16)  # (W, W)
        self.x = torch.randn(rows, 16)  # (B, W)

    def forward(self, x):  # x (B, W)
        return (x @ self.w).relu()

    def step_inputs(self, step):
        return (self.x,), {}


def factory(*, rows, prompt_len, steps, device, dtype):
    return Step(rows)
"""


def test_a_run_the_budget_ended_says_so_in_its_table_and_its_json(tmp_path):
    import json

    from typer.testing import CliRunner

    from nanobench.cli import app

    (tmp_path / "step.py").write_text(STEP)
    args = ["compile", "--target", f"{tmp_path / 'step.py'}:factory", "--modes", "off,dynamic",
            "--backend", "eager", "--steps", "3", "--processes", "1", "--budget-s", "0.001",
            "--out", str(tmp_path / "out")]  # fmt: skip
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    text = " ".join(table.output.split())
    assert (
        "rounds: the round budget (--budget-s 0.001) ended them after 1, not the evidence" in text
    )
    # the words, whatever one round of a noisy box measured (dynamo's overhead is not always slower)
    assert re.search(r"dynamic \d+\.\d+x: no interval yet after 1 of the 5 rounds one needs", text)
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["rounds_ended"][0].startswith("rounds: the round budget (--budget-s 0.001)")
