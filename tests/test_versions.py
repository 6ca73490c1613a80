"""Declared versions are tested versions: pyproject's lower bounds, the checks that run them, and
the one warning a command starts with under a torch no check runs.

The bounds are read from pyproject.toml, the Makefile's TORCH_SPEC, requirements-oldest.txt and
requirements.lock as written, never from the module under test alone; the warning through the
CLI with the version lookup faked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from typer.testing import CliRunner

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as tomli
    import tomli as tomllib

from nanobench.cli import app
from nanobench.harness.cli import versions
from nanobench.harness.cli.versions import (
    OLDEST_TRANSFORMERS,
    OLDEST_TRITON,
    SAID,
    TESTED_TORCH,
    minor,
    untested_torch,
)

ROOT = Path(__file__).resolve().parents[1]


def declared() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {r.name: r for r in map(Requirement, project["dependencies"])}


def pinned(path: Path) -> dict[str, str]:
    """name -> version of each `name==version` line."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", path.read_text(), re.M)
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in found}


@pytest.mark.parametrize(
    "package,oldest",
    [("torch", TESTED_TORCH[0]), ("transformers", OLDEST_TRANSFORMERS), ("triton", OLDEST_TRITON)],
)
def test_each_lower_bound_is_the_oldest_tested_version_and_nothing_caps_it(package, oldest):
    specs = [(s.operator, s.version) for s in declared()[package].specifier]
    assert specs == [(">=", oldest)], f"pyproject: {package} {specs}, tested from {oldest}"


def test_the_tested_ends_are_what_ci_and_make_test_oldest_install():
    spec = re.search(r"^TORCH_SPEC \?= torch==(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert spec and minor(spec[1]) == minor(TESTED_TORCH[1]), "CI's torch is the range's top"
    assert minor(TESTED_TORCH[0]) < minor(TESTED_TORCH[1])
    oldest = pinned(ROOT / "requirements-oldest.txt")
    assert oldest["transformers"] == OLDEST_TRANSFORMERS
    lock = pinned(ROOT / "requirements.lock")
    assert Version(lock["transformers"]) >= Version(OLDEST_TRANSFORMERS)
    assert Version(lock["triton"]) >= Version(OLDEST_TRITON)


@pytest.mark.parametrize(
    "version,warned",
    [("2.10.2", True), ("2.11.0", False), ("2.12.1+cu128", False), ("2.13.0+cpu", False),
     ("2.14.0a0+git1234", True), ("3.0.0", True), ("unknown", True), (None, False)],
)  # fmt: skip
def test_a_torch_minor_outside_the_tested_range_is_untested(version, warned):
    assert (untested_torch(version) is not None) == warned


def invoke(tmp_path, *args):
    return CliRunner().invoke(
        app, ["buckets", "--json", "--out", str(tmp_path), *args], env={"COLUMNS": "200"}
    )


def test_an_untested_torch_starts_a_command_with_one_warning_and_its_children_stay_quiet(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(versions, "installed", lambda package: "2.10.0")
    monkeypatch.setenv(SAID, "")  # unset for this test, restored after
    first = invoke(tmp_path)
    assert first.exit_code == 0, first.output
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nanobench: warning: torch 2.10.0 "), lines
    assert f"torch {TESTED_TORCH[0]} to {TESTED_TORCH[1]}" in lines[0]
    # A worker or sweep point inherits this environment: it says nothing again.
    assert os.environ[SAID] == "1"
    again = invoke(tmp_path)
    assert again.exit_code == 0 and again.stderr == "", again.stderr


def test_the_installed_torch_is_tested_and_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(SAID, "")
    assert untested_torch(versions.installed("torch")) is None
    result = invoke(tmp_path)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
