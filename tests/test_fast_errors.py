"""A mistake typed on the command line is said at once: one line, exit 2, and no torch imported.

Importing torch (or what imports it: the engine's weights, the measuring modules, a target file
that imports it) costs seconds; a name or a path that is wrong must be refused before any of it.
The cause is what is asserted, not a wall time (the CI box is noisy): every bad input below runs
through the CLI in one fresh interpreter, which reports after each whether torch (or transformers)
is in `sys.modules`. And a corrupt `startup --artifacts` file, which needs torch to be found
corrupt, leaves torch's own warning in a log: stderr holds nanobench's line alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nanobench.harness.errors import BadInput
from nanobench.harness.step.targets import target_named

ROOT = Path(__file__).resolve().parent.parent
# A target file that imports torch at its top: importing it to look for the factory loads torch.
IMPORTS_TORCH = (
    "import torch\n\n\ndef factory(*, rows, prompt_len, steps, device, dtype):\n    pass\n"
)
NO_FACTORY = "import torch\n\nSIZE = 4\n"

# (command line, what the one line must name). {d} is the case folder, the child's working one.
CASES = [
    (["compare", "{d}/nonexistent", "{d}"], "{d}/nonexistent"),
    (["compare", "{d}", "{d}/nonexistent"], "no explain.csv, compile.csv"),
    (["explain", "--target", "nope.py:factory"], "--target 'nope.py:factory': no such file"),
    (["explain", "--target", "no_factory.py:factory"], "no callable 'factory'"),
    (["explain", "--target", "torchy.py:factory", "--vs", "no_factory.py:factory"], "--vs"),
    (["explain", "--model", "nope"], "--model 'nope'"),
    (["explain", "--target", "hf-static", "--model", "nope"], "--model 'nope'"),
    (["explain", "--out", "{d}/a-file/sub"], "--out"),
    (["compile", "--target", "no_factory.py:factory"], "--target"),
    (["compile", "--target", "no_factory.py:factory", "--vs", "torchy.py:factory"], "--target"),
    (["compile", "--target", "torchy.py:factory", "--vs", "nope.py:factory"], "--vs"),
    (["compile", "--model", "nope"], "--model 'nope'"),
    (["compile", "--out", "{d}/a-file/sub"], "--out"),
    (["compile", "--export-json", "{d}/a-file/x.json"], "--export-json"),
    (["compile", "--modes", "nope"], "--modes"),  # Typer's own: the floor the others match
    (["decode", "--model", "nope"], "--model 'nope'"),
    (["decode", "--vs-model", "nope"], "--vs-model 'nope'"),
    (["decode", "--out", "{d}/a-file/sub"], "--out"),
    (["decode", "--export-json", "{d}/a-file/x.json"], "--export-json"),
    (["startup", "--artifacts", "{d}/nonexistent.bin"], "--artifacts"),
    (["startup", "--artifacts", "{d}/empty.bin"], "--artifacts"),
    (["startup", "--target", "no_factory.py:factory"], "--target"),
    (["startup", "--target", "no_factory.py:factory", "--vs", "torchy.py:factory"], "--target"),
    (["startup", "--model", "nope"], "--model 'nope'"),
    (["startup", "--out", "{d}/a-file/sub"], "--out"),
    (["startup", "--cache-dir", "{d}/a-file/sub"], "--cache-dir"),
    (["startup", "--export-json", "{d}/a-file/x.json"], "--export-json"),
    (["capture", "--model", "nope"], "--model 'nope'"),
    (["capture", "--target", "no_factory.py:factory"], "--target"),
    (["capture", "--target", "hf-static", "--model", "nope"], "--model 'nope'"),
    (["capture", "--out", "{d}/a-file/sub"], "--out"),
    (["pool-budget", "--model", "nope"], "--model 'nope'"),
    (["pool-budget", "--target", "no_factory.py:factory"], "--target"),
    (["pool-budget", "--out", "{d}/a-file/sub"], "--out"),
    (["buckets", "--out", "{d}/a-file/sub"], "--out"),
    (["buckets", "--batch-trace", "{d}/nonexistent.csv", "--max-graphs", "2"], "--batch-trace"),
    (["history", "zzz"], "history key 'zzz'"),
    (["history", "--of", "{d}/nonexistent"], "--of"),
    (["sweep", "{d}/nonexistent.toml"], "GRID"),
]

# The child: each case through Typer's CliRunner, in order, then what it had imported by then.
CHILD = """
import json, sys
from typer.testing import CliRunner
from nanobench.cli import app

runner, found = CliRunner(), []
for args in json.loads(sys.stdin.read()):
    result = runner.invoke(app, args)
    found.append({"code": result.exit_code, "stderr": result.stderr,
                  "loaded": [m for m in ("torch", "transformers") if m in sys.modules]})
print(json.dumps(found))
"""


def child_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NANOBENCH_")}
    # The history and the presets under this case's folder: the cache root is still resolved.
    env["NANOBENCH_CACHE"] = str(tmp / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Every case, in one fresh interpreter: (the case folder, each case's result)."""
    tmp = tmp_path_factory.mktemp("fast-errors")
    (tmp / "torchy.py").write_text(IMPORTS_TORCH)
    (tmp / "no_factory.py").write_text(NO_FACTORY)
    (tmp / "a-file").write_text("")
    (tmp / "empty.bin").write_bytes(b"")
    cases = [[a.format(d=tmp) for a in args] for args, _ in CASES]
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(cases), capture_output=True, text=True,
        cwd=tmp, env=child_env(tmp), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tmp, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("index", range(len(CASES)), ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_input_is_one_line_and_exit_2_before_torch_is_imported(ran, index):
    tmp, results = ran
    args, needle = CASES[index]
    first = next((i for i, r in enumerate(results) if r["loaded"]), None)
    assert first is None or first > index, (
        f"{' '.join(CASES[first][0])} imported {results[first]['loaded']} before saying its error"
    )
    result = results[index]
    lines = result["stderr"].strip().splitlines()
    assert result["code"] == 2, result
    assert len(lines) == 1 and needle.format(d=tmp) in lines[0], lines
    assert lines[0].startswith("nanobench: error: ") and "Traceback" not in result["stderr"]


def test_bad_input_leaves_no_out_directory_behind(ran):
    tmp, _ = ran
    # Each command tried its default --out (nanobench-out, in the child's working folder).
    assert not (tmp / "nanobench-out").exists()


def test_a_corrupt_artifact_file_is_nanobenchs_one_line_and_torchs_warning_is_logged(tmp_path):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 3)  # no torch.compiler.save_cache_artifacts() bytes
    out = tmp_path / "o"
    done = subprocess.run(
        [sys.executable, "-m", "nanobench.cli", "startup", "--artifacts", str(garbage),
         "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path, env=child_env(tmp_path), timeout=300,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr  # torch logs a warning and a traceback here otherwise
    said = f"nanobench: error: --artifacts {garbage}: torch "
    assert lines[0].startswith(said) and "cannot read it" in lines[0], lines
    log = Path(lines[0].rsplit("torch's own warning is in ", 1)[1])
    assert "Failed to un-pickle cache artifacts" in log.read_text()  # kept whole, not dropped
    assert "Traceback" in log.read_text()
    shutil.rmtree(log.parent)  # the temporary folder the line named
    assert not out.exists(), "bad input writes nothing under --out"


@pytest.mark.parametrize(
    "source",
    [
        "def factory(*, rows, prompt_len, steps, device, dtype):\n    pass\n",
        "factory = lambda **kw: None\n",
        "from os.path import join as factory\n",
        "try:\n    from fast import factory\nexcept ImportError:\n    factory = None\n",
        "if True:\n    factory = print\n",
        "from os.path import *\n",  # could bind anything: the import decides
        "def __getattr__(name):\n    return print\n",
        "def setup():\n    global factory\n    factory = print\n\n\nsetup()\n",
        "def factory(:\n",  # does not parse: importing it says the SyntaxError
    ],
)
def test_a_file_that_may_bind_its_factory_is_not_refused_unread(tmp_path, source):
    path = tmp_path / "step.py"
    path.write_text(source)
    assert target_named(f"{path}:factory") == f"{path}:factory"


@pytest.mark.parametrize(
    "source",
    [
        "import torch\n",
        "def build():\n    factory = print\n",  # a local of a function, not the module's
        "class Holder:\n    def factory(self):\n        pass\n",
        "import factory_tools\n",
    ],
)
def test_a_file_that_cannot_bind_its_factory_is_refused_unread(tmp_path, source):
    path = tmp_path / "step.py"
    path.write_text(textwrap.dedent(source))
    with pytest.raises(BadInput, match=f"{path} has no callable 'factory'"):
        target_named(f"{path}:factory")
