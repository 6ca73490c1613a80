"""The CLI as a shell meets it: registering the commands imports no torch, and help reads cleanly
at any terminal width (no paragraph broken where the source file was wrapped)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.commands import COMMANDS
from nanobench.sweep.command import SWEEP

NAMES = [c.name for c in (*COMMANDS, SWEEP)]
HEAVY = ("torch", "transformers", "pandas", "matplotlib", "triton")

# One process: each command's --help, then the heavy modules that got imported on the way.
PROBE = f"""
import sys
from nanobench.cli import app
for name in {NAMES!r}:
    try:
        app([name, "--help"], prog_name="nanobench")
    except SystemExit as e:
        assert e.code == 0, (name, e.code)
print("HEAVY:" + ",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_help_of_every_command_imports_no_heavy_module():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    (heavy,) = [line for line in out.stdout.splitlines() if line.startswith("HEAVY:")]
    assert heavy == "HEAVY:", heavy


# What `nanobench compile`'s parent runs (its workers import torch; the parent only times them):
# torch and dynamo there cost 2.4 s before the first worker starts, each run.
COMPILE_PARENT = """
import sys
import nanobench.compile.run, nanobench.compile.gates, nanobench.compile.bench
from nanobench.compile.spec import CompileSpec
CompileSpec().validate().worker().step_shapes()
print("TORCH:" + str("torch" in sys.modules))
"""


def test_the_compile_commands_parent_imports_no_torch():
    out = subprocess.run(
        [sys.executable, "-c", COMPILE_PARENT], capture_output=True, text=True, check=True,
        timeout=120,
    )  # fmt: skip
    assert "TORCH:False" in out.stdout.splitlines(), out.stdout + out.stderr


def description_lines(text: str) -> list[list[str]]:
    """The paragraphs of the help's description (after Usage, before the option boxes)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    body, paragraphs, current = [], [], []
    for line in lines[start:]:
        if line.lstrip().startswith(("╭", "+-")):
            break
        body.append(line.rstrip())
    for line in body:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


@pytest.mark.parametrize("width", [60, 80, 132])
@pytest.mark.parametrize("name", NAMES)
def test_help_paragraphs_wrap_greedily_at_any_width(name, width):
    """Each line of a paragraph is full: the next line's first word would not have fit on it.

    A docstring's own hard breaks, kept by the help renderer, leave a short line followed by one
    that continues the sentence ("measured and" / "predicted, guard kind ...").
    """
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    paragraphs = description_lines(result.output)
    assert len(paragraphs) >= 2, result.output  # the summary and at least one more
    text_width = width - 2  # rich's one-space margins on both sides
    for lines in paragraphs:
        for line, following in zip(lines, lines[1:]):
            room = text_width - len(line) - 1
            assert len(following.split()[0]) > room, (
                f"{name} --help at {width} columns breaks early:\n{line}\n{following}"
            )
