"""Shared pytest hooks: a fresh Inductor cache per run; `gpu` tests skip without CUDA."""

import os
import shutil
import tempfile

import pytest

# Triton reads this when a kernel is defined, and dynamo may import Triton in any test, so the
# interpreter is chosen once here, before anything imports it: kernels run on the CPU in tests.
os.environ.setdefault("TRITON_INTERPRET", "1")


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
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA; torch.cuda.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
