"""Shared pytest hooks: the one place that decides the Triton interpreter, a fresh Inductor
cache per run, and the device skips.

Triton reads TRITON_INTERPRET when a kernel is defined, and dynamo may import Triton in any test,
so the choice is made here, before any test module is imported: on a machine without CUDA the
kernels run on the CPU under the interpreter (set only when the user has not set it); with CUDA
it is never forced, so a test that reaches Triton through the engine compiles for real. Tests
marked `interpreter` run Triton on CPU tensors and skip when the interpreter is off; tests
marked `gpu` skip without CUDA.
"""

import os
import shutil
import tempfile

import pytest
import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def interpreting() -> bool:
    # Triton's own reading of the variable (kernels.triton_decode._interpreting).
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on")


def pytest_configure(config):
    # Inductor's default cache (/tmp/torchinductor_$USER) outlives a run and its key ignores
    # ATEN_CPU_CAPABILITY: a run under another CPU setting would be handed C++ generated for
    # this one. Every run compiles into its own empty directory, removed at the end.
    fresh = tempfile.mkdtemp(prefix="nanobench-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = fresh
    config.stash[INDUCTOR_DIR] = fresh


def pytest_unconfigure(config):
    shutil.rmtree(config.stash.get(INDUCTOR_DIR, ""), ignore_errors=True)


INDUCTOR_DIR = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs CUDA; torch.cuda.is_available() is False")
    skip_cpu_triton = pytest.mark.skip(
        reason="runs Triton on CPU tensors under TRITON_INTERPRET=1, which is off here; "
        "the gpu tests run the kernel on the device"
    )
    for item in items:
        if "gpu" in item.keywords and not CUDA:
            item.add_marker(skip_gpu)
        if "interpreter" in item.keywords and not interpreting():
            item.add_marker(skip_cpu_triton)


WORKING_FOLDER = os.getcwd()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # After every fixture is finalised (monkeypatch's chdir undone): a test that leaves another
    # working folder breaks every later test of its worker that starts `python -m tests.<worker>`
    # (the fleet's, the faults'), which then no longer find `tests`. It fails here, by name.
    yield
    if os.getcwd() != WORKING_FOLDER:
        left = os.getcwd()
        os.chdir(WORKING_FOLDER)
        raise AssertionError(
            f"{item.nodeid} left the working folder at {left}: use monkeypatch.chdir"
        )


@pytest.fixture(autouse=True)
def own_history(tmp_path_factory, monkeypatch):
    # A run records its ratios in the machine's history and the next run with its settings
    # reads them (nanobench.harness.statistics.history): every test starts with none, whatever ran before.
    monkeypatch.setenv("NANOBENCH_HISTORY", str(tmp_path_factory.mktemp("history")))
