"""The versions of torch, transformers and Triton some check runs, and the warning outside them.

What it is: `TESTED_TORCH`, the oldest and newest torch minor versions a check runs (the GPU
check's and CI's, the Makefile's TORCH_SPEC); `OLDEST_TRANSFORMERS`, the oldest transformers,
which `make test-oldest` runs the tests that touch transformers under (requirements-oldest.txt
pins it), the lock's being the newest; `OLDEST_TRITON`, the GPU check's. And
`warn_untested_torch(say)`, called where every command enters (`console.run_command`): one line
when the installed torch's minor version lies outside TESTED_TORCH, read from the package's
metadata, so the CLI imports no torch to say it.
What it is not: a refusal (an untested torch runs, warned about), nor a resolver: pip reads
pyproject's ranges; nor the record of what a run ran under (`env_record.py`).
Invariant: pyproject's lower bounds are these (torch >= TESTED_TORCH's first, transformers >=
OLDEST_TRANSFORMERS, triton >= OLDEST_TRITON; tests/test_versions.py reads both), so a range
pip allows starts at a version a test has run. The warning is said at most once per command:
the environment it leaves behind tells its workers and sweep points it was said.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from importlib import metadata

TESTED_TORCH = ("2.11", "2.13")  # the GPU check's, CI's (TORCH_SPEC)
# 5.5 and older build a GGUF's BPE tokenizer (smollm2-135m's) as CodeLlama's: wrong ids.
OLDEST_TRANSFORMERS = "5.6.0"
# The GPU check's, compiled (torch 2.11 pins it); 3.6's interpreter fails our kernel under
# numpy 2, so the CPU suite needs 3.7 or newer (CI runs the lock's).
OLDEST_TRITON = "3.6"

# Set once the warning is said; a child process inherits it and stays quiet.
SAID = "NANOBENCH_UNTESTED_TORCH_SAID"


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of "2.13.0+cpu", "2.14.0a0+git1234" or "2.11"; None when unreadable."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def untested_torch(version: str | None) -> str | None:
    """The warning for this torch, or None when a check runs its minor version (or when no torch
    is installed: the command's own import says that)."""
    if version is None:
        return None
    low, high = (minor(v) for v in TESTED_TORCH)
    if (found := minor(version)) is not None and low <= found <= high:
        return None
    return (
        f"torch {version} is not a version nanobench is tested under (torch {TESTED_TORCH[0]} "
        f"to {TESTED_TORCH[1]}): it reads dynamo's and Inductor's internals, which move every "
        "release, so a count or a diagnosis may be wrong"
    )


def warn_untested_torch(say: Callable[[str], None]) -> None:
    """Say `untested_torch` once per command: not again in a process it starts."""
    if os.environ.get(SAID):
        return
    message = untested_torch(installed("torch"))
    if message is not None:
        os.environ[SAID] = "1"
        say(message)
