"""Shared pytest hooks: tests marked `gpu` are skipped on a machine without CUDA."""

import os

import pytest

# Triton reads this when a kernel is defined, and dynamo may import Triton in any test, so the
# interpreter is chosen once here, before anything imports it: kernels run on the CPU in tests.
os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA; torch.cuda.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
