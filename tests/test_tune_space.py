"""tune's space: modes x knob sets, off first, the refused pruned and two names for one
configuration merged, every decision held against torch's own config (the installed torch's
defaults decide what a setting changes), and what `tune` refuses before any worker."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.errors import BadInput
from nanobench.tune.space import Config, build_space, knob_sets, knob_settings, refused


def space(modes=("dynamic",), knobs=("cpp-wrapper", "freezing"), max_knobs=2, **kw):
    kw = {"device": "cpu", "backend": "inductor", "settings": knob_settings, **kw}
    return build_space(modes, knobs, max_knobs, **kw)


def test_subsets_up_to_max_knobs_smallest_first():
    assert knob_sets(("a", "b", "c"), 2) == ["", "a", "b", "c", "a+b", "a+c", "b+c"]
    assert knob_sets(("a", "b", "c"), 1) == ["", "a", "b", "c"]
    # a listed set makes the list one of sets, exactly as given
    assert knob_sets(("a+b", "c"), 2) == ["", "a+b", "c"]


def test_the_acceptance_space_is_seven_compiled_and_off():
    found = space(knobs=("cpp-wrapper", "guard-filter", "freezing"))
    names = [c.name for c in found.configs]
    assert names[0] == "off" and len(names) == 8
    assert "dynamic + cpp-wrapper + freezing" in names
    assert found.set_aside == ()
    assert found.line() == "8 configurations race (7 compiled + off)"


def test_a_setting_torch_already_has_merges_into_plain():
    import torch._inductor.config as ic

    # torch's own default for the key, typed as a user would: the same as no knob at all
    default = str(ic._config["cpp_wrapper"].default).lower()
    found = space(knobs=(f"inductor.cpp_wrapper={default}", "freezing"), max_knobs=1)
    merged = [s for s in found.set_aside if s.into is not None]
    assert [(s.config.knobs, s.into) for s in merged] == [
        (f"inductor.cpp_wrapper={default}", Config("dynamic"))
    ]
    assert "sets what dynamic sets" in merged[0].reason


def test_a_generic_key_and_its_named_knob_race_once():
    found = space(knobs=("freezing", "inductor.freezing=true"), max_knobs=1)
    assert [c.name for c in found.configs] == ["off", "dynamic", "dynamic + freezing"]
    assert found.set_aside[0].into == Config("dynamic", "freezing")
    # told not to merge (an A/A space), both race
    both = space(knobs=("freezing", "inductor.freezing=true"), max_knobs=1, merge=False)
    assert len(both.configs) == 4


def test_refused_configurations_are_pruned_with_their_reason():
    assert "needs --device cuda" in refused(Config("reduce-overhead"), "cpu", "inductor")
    assert "mode or options" in refused(Config("reduce-overhead", "guard-filter"), "cuda",
                                        "inductor")  # fmt: skip
    assert "--backend eager never runs" in refused(Config("dynamic", "freezing"), "cpu", "eager")
    assert refused(Config("dynamic", "guard-filter"), "cpu", "eager") == ""
    found = space(knobs=("guard-filter", "freezing"), backend="eager")
    pruned = {s.config.name: s.reason for s in found.set_aside}
    assert set(pruned) == {"dynamic + freezing", "dynamic + guard-filter + freezing"}
    assert [c.name for c in found.configs] == ["off", "dynamic", "dynamic + guard-filter"]


def test_nothing_compiled_left_is_bad_input():
    with pytest.raises(BadInput, match="no compiled configuration left"):
        space(modes=("off",))
    with pytest.raises(BadInput, match="reduce-overhead.*needs --device cuda"):
        space(modes=("reduce-overhead",), knobs=("freezing",), max_knobs=1)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--knobs", "turbo"], "--try turbo: not a knob"),
        (["--knobs", "inductor.no_such_key=1"], "has no inductor.no_such_key"),
        (["--modes", "off"], "no compiled configuration left"),
        (["--max-knobs", "0"], "--max-knobs"),
        (["--steps-per-start", "0"], "--steps-per-start"),
        (["--budget-s", "60", "--compile-budget-s", "120"], "--budget-s 60: smaller than one"),
        (["--max-rounds", "3"], "--max-rounds 3"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_worker(args, said, tmp_path, monkeypatch):
    import nanobench.tune.bench as bench

    monkeypatch.setattr(bench.Race, "run", lambda self: pytest.fail("a worker started"))
    result = CliRunner().invoke(app, ["tune", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "o" / "tune.csv").exists()


def test_an_interrupt_keeps_the_space_on_disk(tmp_path, monkeypatch):
    import nanobench.tune.bench as bench

    def stop(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench.Race, "run", stop)
    result = CliRunner().invoke(app, ["tune", "--knobs", "freezing", "--backend", "eager",
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 130, result.output
    assert "dynamic + freezing: pruned: freezing sets Inductor" in result.stderr
    written = (tmp_path / "tune.csv").read_text()
    assert "off,off,,not run" in written and "dynamic + freezing,dynamic,freezing,pruned" in written
