"""Where a `nanobench startup` run keeps its starts' caches, and each start's environment.

What it is: `CacheRoot` (the run's directory, its own under `--cache-dir` or a temporary one,
locked so two runs never fill one cache at once), `start_env(...)` (the variables that point
every cache a start reads at its directory: Inductor's FX graph and AOTAutograd caches, the
C++ and Triton builds, dynamo's PGO state, pinned off unless asked) and `check_artifacts(path)`
(a saved artifact file torch can read, or one line naming what is wrong with it; torch's own
warning in a log, off the terminal), whose first half, `artifact_bytes`, needs no torch.
What it is not: a cache: torch owns the files; this only names their directories.
Invariant: a cold start's directory is empty when it starts; a warm start reads its run's cold
directory and nothing else (in a `--vs` run, its own side's: each side has its own tree); a hot start's directory is empty and gets only the artifacts.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from nanobench.harness.errors import BadInput

LOCK = ".nanobench-startup.lock"


class CacheRoot:
    """The run's cache directory: made, locked, and removed at the end unless the user named it."""

    def __init__(self, parent: str) -> None:
        self.keep = bool(parent)
        if parent:
            self.path = Path(tempfile.mkdtemp(prefix="run-", dir=writable(parent)))
            self._lock = lock(Path(parent))
        else:
            self.path = Path(tempfile.mkdtemp(prefix="nanobench-startup-"))
            self._lock = None

    def cache(self, mode: str, run: int, kind: str, side: str = "") -> Path:
        """cold and warm share the run's directory; hot gets its own, empty one. A side of a
        --vs run has its own tree ("" is the plain run's, the root itself)."""
        name = "hot" if kind == "hot" else "cache"
        return self.path / side / mode / f"run-{run}" / name

    def artifacts(self, mode: str, run: int, side: str = "") -> Path:
        return self.path / side / mode / f"run-{run}" / "artifacts.bin"

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()


def writable(parent: str) -> str:
    try:
        Path(parent).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".probe-"):
            pass
    except OSError as e:
        raise BadInput(f"--cache-dir {parent}: cannot write there ({e.strerror or e})") from None
    return parent


def lock(parent: Path):
    """An exclusive lock on the directory, or one line saying who holds it."""
    handle = open(parent / LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise BadInput(
            f"--cache-dir {parent}: another nanobench startup (pid {holder}) is filling caches "
            "there now; wait for it or give another directory"
        ) from None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def start_env(cache: Path, pgo: bool) -> dict[str, str]:
    """Every cache a start reads, under `cache`; PGO pinned off unless asked (`--pgo`)."""
    cache.mkdir(parents=True, exist_ok=True)
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "1" if pgo else "0",
        "TORCHINDUCTOR_COMPILE_THREADS": "1",  # as compile's workers: one core per build
    }


def artifact_bytes(path: str) -> bytes:
    """--artifacts read: a file that exists, can be read and is not empty (no torch needed)."""
    try:
        blob = Path(path).read_bytes()
    except OSError as e:
        raise BadInput(f"--artifacts {path}: cannot read it ({e.strerror or e})") from None
    if not blob:
        raise BadInput(f"--artifacts {path}: the file is empty; expected the bytes of "
                       "torch.compiler.save_cache_artifacts()")  # fmt: skip
    return blob


def check_artifacts(path: str) -> Path:
    """A saved artifact file this torch reads (not truncated, not foreign), or exit 2. What torch
    logs while it tries (a warning and its traceback) goes to a log the one line names, never
    onto the terminal: there is no run yet, so the log is a temporary one, not --out's."""
    blob = artifact_bytes(path)
    from torch.compiler._cache import CacheArtifactManager

    from nanobench.harness.step.third_party import to_log

    folder = Path(tempfile.mkdtemp(prefix="nanobench-artifacts-"))
    with to_log(folder / "torch-warnings.log") as logged:
        read = CacheArtifactManager.deserialize(blob)
    if not logged.by_source:
        folder.rmdir()
    if read is None:
        import torch

        where = f"; torch's own warning is in {logged.path}" if logged.by_source else ""
        raise BadInput(
            f"--artifacts {path}: torch {torch.__version__} cannot read it (truncated, or not "
            f"written by torch.compiler.save_cache_artifacts() of this version){where}"
        )
    return Path(path)
