"""The target protocol: loading, the signature check, one-line refusals, failed rows, shapes."""

from __future__ import annotations

import textwrap

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.errors import BadInput
from nanobench.harness.step.signatures import (
    changing_scalars,
    growing_dims,
    scalar_signature,
    shape_signature,
)
from nanobench.harness.step.targets import (
    TargetError,
    inputs_at,
    load_factory,
    make_target,
    target_option,
)

runner = CliRunner()
PROTOCOL = dict(rows=2, prompt_len=3, steps=4, device="cpu", dtype="float32")

GOOD = """
import torch

class Step:
    forward = staticmethod(lambda x, scale=1.0: x * scale)
    def step_inputs(self, step):
        if step == {raise_at}:
            raise ValueError("no step {raise_at} here")
        return (torch.ones(2, 3 + step),), {{"scale": 2.0}}

def factory(*, rows, prompt_len, steps, device, dtype):
    return Step()

def positional(rows, prompt_len, steps, device, dtype):
    return Step()

def missing(*, rows, prompt_len, device, dtype):
    return Step()

def needs_more(*, rows, prompt_len, steps, device, dtype, vocab):
    return Step()

def returns_none(*, rows, prompt_len, steps, device, dtype):
    return None

def raises(*, rows, prompt_len, steps, device, dtype):
    raise RuntimeError("no weights")

not_callable = 3
"""


@pytest.fixture
def step_file(tmp_path):
    path = tmp_path / "my_step.py"
    path.write_text(textwrap.dedent(GOOD.format(raise_at=2)))
    return path


def assert_one_line_exit_2(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_file_factory_loads_and_steps(step_file):
    target = make_target(f"{step_file}:factory", **PROTOCOL)
    args, kwargs = inputs_at(target, 1)
    assert target.forward(*args, **kwargs).tolist() == [[2.0] * 4] * 2


def test_a_module_factory_loads(step_file, monkeypatch):
    monkeypatch.syspath_prepend(str(step_file.parent))
    assert callable(load_factory("my_step:factory"))


@pytest.mark.parametrize(
    "name,needle",
    [
        ("positional", "not keyword-only: rows, prompt_len, steps, device, dtype"),
        ("missing", "missing: steps"),
        ("needs_more", "required but not in the protocol: vocab"),
        ("not_callable", "no callable 'not_callable'"),
        ("nope", "no callable 'nope'"),
    ],
)
def test_a_wrong_factory_is_one_line(step_file, name, needle):
    with pytest.raises(BadInput, match=needle):
        target_option(f"{step_file}:{name}")


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("no_colon_here", "expected package.module:factory"),
        ("no_such_package_xyz:factory", "ModuleNotFoundError"),
        ("/no/such/file.py:factory", "no such file"),
    ],
)
def test_a_spec_that_does_not_load_is_one_line(spec, needle):
    with pytest.raises(BadInput, match=needle):
        target_option(spec)


def test_a_file_that_raises_on_import_is_one_line(tmp_path):
    broken = tmp_path / "broken.py"
    # It defines its factory (below the raise): read unrun, it may bind it, so it is imported.
    broken.write_text("raise ImportError('needs vllm')\n\n\ndef factory(**kw):\n    pass\n")
    with pytest.raises(BadInput, match="importing .* raised ImportError: needs vllm"):
        target_option(f"{broken}:factory")


def test_what_a_factory_returns_and_a_raising_step_are_checked(step_file):
    with pytest.raises(TargetError, match="returned NoneType, expected an object"):
        make_target(f"{step_file}:returns_none", **PROTOCOL)
    with pytest.raises(TargetError, match="the factory raised RuntimeError: no weights"):
        make_target(f"{step_file}:raises", **PROTOCOL)
    target = make_target(f"{step_file}:factory", **PROTOCOL)
    with pytest.raises(TargetError, match=r"step_inputs\(2\) raised ValueError: no step 2 here"):
        inputs_at(target, 2)


def test_shape_history_finds_the_growing_dimension_inside_a_cache_object():
    class Cache:
        def __init__(self, width):
            self.keys = [torch.zeros(2, 4, width, 8)]  # (B, Hkv, W, D)

    history = [
        shape_signature((torch.zeros(2, 1),), {"cache": Cache(w), "pos": torch.tensor([w])})
        for w in (5, 6, 7)
    ]
    assert history[0] == (
        ("args[0]", (2, 1)),
        ("kwargs['cache'].keys[0]", (2, 4, 5, 8)),
        ("kwargs['pos']", (1,)),
    )
    assert growing_dims(history) == [("kwargs['cache'].keys[0]", 2, 5, 7)]
    assert growing_dims(history[:1]) == []


def test_explain_refuses_a_bad_target_with_one_line(step_file):
    assert_one_line_exit_2(
        runner.invoke(app, ["explain", "--target", f"{step_file}:positional"]), "--target"
    )
    # The factory runs in-process for explain: a raising step is still one line, exit 2.
    assert_one_line_exit_2(
        runner.invoke(app, ["explain", "--target", f"{step_file}:factory", "--step", "1"]),
        "step_inputs(2) raised ValueError",
    )
    assert_one_line_exit_2(
        runner.invoke(app, ["explain", "--target", f"{step_file}:factory", "--prefill"]),
        "--prefill",
    )


def test_compile_refuses_a_bad_target_before_any_worker(step_file, tmp_path, monkeypatch):
    def measuring(*args, **kwargs):
        raise AssertionError("a worker started before validation")

    monkeypatch.setattr("nanobench.harness.workers.fresh.run_fresh", measuring)
    out = ["--out", str(tmp_path / "o")]
    for args, needle in (
        (["--target", f"{step_file}:missing"], "missing: steps"),
        (["--target", f"{step_file}:factory", "--bucketed"], "--bucketed"),
        (["--modes", "reduce-overhead"], "--modes reduce-overhead: needs --device cuda"),
        # the engine's own modes are off, dynamic and static: a GPU run once made it a failed row
        (["--modes", "reduce-overhead", "--device", "cuda"], "--modes reduce-overhead: a --target"),
    ):
        assert_one_line_exit_2(runner.invoke(app, ["compile", *args, *out]), needle)


def test_a_step_that_raises_while_measuring_is_one_line_and_its_row_kept(step_file, tmp_path):
    """The user's step_inputs raised in the worker: their input, one line, exit 2 (not a table of
    failed rows); the row that says so is on disk."""
    result = runner.invoke(
        app,
        ["compile", "--target", f"{step_file}:factory", "--modes", "off", "--steps", "4",
         "--out", str(tmp_path), "--quiet"],
    )  # fmt: skip
    # a busy machine's warning may stand beside it: the error itself is one line
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("nanobench: error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert "step_inputs(2) raised ValueError: no step 2 here" in errors[0]
    assert "Traceback" not in result.output and not result.stdout.strip()
    saved = (tmp_path / "compile.csv").read_text()
    assert "step_inputs(2) raised ValueError: no step 2 here" in saved


@pytest.mark.parametrize("command", ["compile", "profile", "startup", "tune"])
def test_a_factory_that_raises_is_one_line_exit_2_in_every_command(command, tmp_path):
    step = tmp_path / "boom.py"
    step.write_text("def factory(*, rows, prompt_len, steps, device, dtype):\n"
                    "    raise ValueError('no weights here')\n")  # fmt: skip
    result = runner.invoke(app, [command, "--target", f"{step}:factory", "--quiet", "--out",
                                 str(tmp_path / "o")])  # fmt: skip
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("nanobench: error:")]
    assert result.exit_code == 2, result.output
    assert errors == [f"nanobench: error: --target '{step}:factory': the factory raised "
                      "ValueError: no weights here"], result.stderr  # fmt: skip
    assert "Traceback" not in result.output and not result.stdout.strip()


def test_the_python_values_in_a_step_are_named_as_dynamo_names_their_guards():
    class Cache:
        def __init__(self, n):
            self.n, self.keys = n, [torch.zeros(1), torch.zeros(1)]

    def forward(x, pos, cache, scale=1.0):
        return x

    module = torch.nn.Linear(1, 1)
    module.pos = 3
    got = scalar_signature(forward, (torch.zeros(2), 5, Cache(7)), {"scale": module})
    # By hand: an int argument, a plain object's int and its list's length, then an
    # nn.Module whose int attribute dynamo keeps static (not symbolic).
    assert (
        got[:4]
        == (
            ("L['pos']", 5, True),
            ("L['cache'].n", 7, True),
            ("len(L['cache'].keys)", 2, False),
        )
        + got[3:4]
    )
    assert ("L['scale'].pos", 3, False) in got and ("L['scale'].training", True, False) in got


def test_a_scalar_counts_only_when_it_changed_and_dynamo_guards_on_it():
    history = [(("L['pos']", p, True), ("len(L['keys'])", p, False), ("L['k']", 1, True))
               for p in (4, 5, 6)]  # fmt: skip
    assert changing_scalars(history, {"L['pos']", "L['keys']", "L['k']"}) == {
        "L['pos']": True,
        "len(L['keys'])": False,
    }
    # An attribute the step never reads is guarded by nothing: it predicts nothing.
    assert changing_scalars(history, {"L['keys']"}) == {"len(L['keys'])": False}


def steps_seen(positions, lengths=None, widths=None) -> list[tuple]:
    """(shape signature, scalar signature) per step, made up: an int pos, a list, a width."""
    seen = []
    for i, pos in enumerate(positions):
        shapes = (("L['x']", (2, widths[i] if widths else 1)),)
        scalars = (("L['pos']", pos, True),)
        if lengths:
            scalars += (("len(L['keys'])", lengths[i], False),)
        seen.append((shapes, scalars))
    return seen


GUARDED = {"L['pos']", "L['keys']"}


@pytest.mark.parametrize(
    "seen,mode,expected",
    [
        # Nothing changes: no guard will fail, in any mode.
        (steps_seen([7] * 10), "static", ("none", False)),
        (steps_seen([7] * 10), "dynamic", ("none", False)),
        # A changing int argument: 10 values > 8 in static; a SymInt under dynamic=True.
        (steps_seen(range(10)), "static", ("value", True)),
        (steps_seen(range(10)), "dynamic", ("none", False)),
        (steps_seen(range(8)), "static", ("value", False)),
        # A list one longer a step: specialised in every mode.
        (steps_seen([7] * 10, lengths=range(10)), "dynamic", ("value", True)),
        # A growing width alone: a shape guard in static, symbolic under dynamic.
        (steps_seen([7] * 10, widths=range(1, 11)), "static", ("shape", True)),
        (steps_seen([7] * 10, widths=range(1, 11)), "dynamic", ("none", False)),
        (steps_seen(range(10)), "off", ("none", False)),
    ],
)
def test_the_prediction_reads_the_python_values_of_the_inputs(seen, mode, expected):
    from nanobench.compile.target_session import predict_target

    assert predict_target(mode, seen, [], GUARDED, 8) == expected


def test_a_guard_that_changes_with_no_input_behind_it_is_one_build_a_step():
    from nanobench.compile.target_session import predict_target
    from nanobench.harness.step.remedies import ValueGuard

    # A resume function's local (after a .item()): each of 10 steps presents a new value.
    local = ValueGuard("L['___stack0'] == 7", "step.py:3", True)
    assert predict_target("static", steps_seen([7] * 10), [local], GUARDED, 8) == ("value", True)
    assert predict_target("dynamic", steps_seen([7] * 10), [local], GUARDED, 8) == ("none", False)
