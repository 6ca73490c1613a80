"""A target whose forward raises: the user's own error, where their code raised it, one line.

What it is: every command that steps a target, run on `tests/corpus/shape_error.py` (a shape
error at step 0 in the step's own forward), held to one line, exit 2, the user's exception as
eager raises it (not dynamo's fake-tensor wrapper) with the corpus file's line; and
`forward_raised` alone, for a compiler's own failure (the step runs eagerly: a failed row).
What it is not: the factory's and step_inputs' refusals (tests/test_targets.py) or the
step_inputs contract broken in a timed window (a failed row, tests/test_compile_*.py).
Invariant: the lines asserted are the worker's own, through the CLI, nothing stubbed.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.step.forward_raised import forward_raised
from nanobench.harness.step.targets import make_target, raised_by_target

runner = CliRunner()
STEP = "tests/corpus/shape_error.py:factory"
SAID = (
    f"nanobench: error: --target '{STEP}': forward at step 0 raised RuntimeError: The size of "
    "tensor a (4) must match the size of tensor b (5) at non-singleton dimension 1 "
    "(in tests/corpus/shape_error.py:22: return torch.relu(x + self.bias))"
)
# Each command's fastest run of a compiled mode (the eager backend: dynamo traces, nothing is
# built): dynamo meets the error under fake tensors, where it words it otherwise.
FAST = {
    "compile": ["--modes", "dynamic", "--backend", "eager", "--steps", "2"],
    "profile": ["--modes", "dynamic", "--backend", "eager", "--steps", "2", "--passes", "1",
                "--rounds", "2", "--max-rounds", "2", "--threads", "1"],
    "startup": ["--modes", "dynamic", "--backend", "eager", "--runs", "1", "--steps", "1",
                "--threads", "1"],
    "tune": ["--modes", "dynamic", "--backend", "eager", "--steps", "2", "--threads", "1"],
    "explain": [],
}  # fmt: skip


@pytest.mark.parametrize("command", list(FAST))
def test_a_forward_that_raises_is_the_users_error_in_one_line(command, tmp_path):
    out = [] if command == "explain" else ["--out", str(tmp_path / "o"), "--quiet"]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = runner.invoke(app, [command, "--target", STEP, *FAST[command], *out])
    # a busy machine's warning may stand beside it: the error itself is one line
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("nanobench: error:")]
    assert result.exit_code == 2, result.output
    assert errors == [SAID], result.stderr
    assert "Traceback" not in result.output and "fake tensor" not in result.output
    # no table of failed rows, no figure drawn from nothing (matplotlib's empty legend warns)
    assert not result.stdout.strip()
    assert not [w for w in warned if "matplotlib" in w.filename or "reports" in w.filename]


def test_the_eager_mode_says_it_the_same_and_keeps_its_row(tmp_path):
    result = runner.invoke(app, ["compile", "--target", STEP, "--modes", "off", "--steps", "2",
                                 "--out", str(tmp_path), "--quiet"])  # fmt: skip
    assert result.exit_code == 2 and SAID in result.stderr, result.output
    assert SAID.removeprefix("nanobench: ") in (tmp_path / "compile.csv").read_text()


def test_a_compile_that_fails_where_eager_runs_is_a_failed_row_not_bad_input():
    from torch._dynamo.exc import BackendCompilerFailed

    target = make_target(STEP, rows=2, prompt_len=3, steps=2, device="cpu", dtype="float32")
    target = type(target)(target.spec, lambda x: x + 1, target.step_inputs)  # it runs eagerly
    wrapped = BackendCompilerFailed(lambda gm, ex: gm, ValueError("lowering failed"), None)
    (args, kwargs), compiled = target.step_inputs(0), torch.compile(target.forward)
    said = str(forward_raised(target, 0, compiled, wrapped, args, kwargs))
    assert said.startswith(f"--target '{STEP}': compiling forward at step 0 raised ")
    assert "BackendCompilerFailed: ValueError: lowering failed" in said
    assert raised_by_target(f"error: {said}") is None
    # the user's own error, as a worker reports it, is their bad input
    assert raised_by_target(SAID.removeprefix("nanobench: ")) is not None
