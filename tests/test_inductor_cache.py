"""Compiled code never leaks between CPU settings: the suite's own fresh Inductor cache, and a
warm cache keyed by everything that changes generated code."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

from nanobench.compile.bench import cache_env
from nanobench.harness.workers.inductor_cache import codegen_key, warm_dir


def test_the_suite_compiles_into_its_own_fresh_inductor_cache():
    path = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    assert Path(cache_dir()) == path
    assert path != Path(default_cache_dir()).resolve()
    # Made by this test process, not left over from an earlier run: /proc/<pid> is as old as
    # the process.
    assert path.stat().st_ctime >= os.stat(f"/proc/{os.getpid()}").st_ctime - 1


def test_the_warm_key_changes_with_each_codegen_fact(monkeypatch):
    # Every fact the key reads is patched on every side of each comparison, so no side is the
    # host's own (an AVX2 host once made "AVX2" equal to its base key).
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setattr(torch, "__version__", "2.98.0")
    monkeypatch.setattr("nanobench.harness.workers.inductor_cache.cpu_model", lambda: "A CPU")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    base = codegen_key("cpu")
    assert codegen_key("cpu") == base  # stable: a warm cache is reused
    seen = {base}
    for fact, value in (
        ("aten", "default"),
        ("isa", "AVX512"),
        ("torch", "2.99.0"),
        ("cpu", "Some Other CPU"),
    ):
        if fact == "aten":
            monkeypatch.setenv("ATEN_CPU_CAPABILITY", value)
        elif fact == "isa":
            monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda v=value: v)
        elif fact == "torch":
            monkeypatch.setattr(torch, "__version__", value)
        else:
            monkeypatch.setattr(
                "nanobench.harness.workers.inductor_cache.cpu_model", lambda v=value: v
            )
        key = codegen_key("cpu")
        assert key not in seen, f"changing {fact} left the key as it was"
        seen.add(key)


def test_the_cuda_key_names_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    h200 = codegen_key("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    assert codegen_key("cuda") != h200 != codegen_key("cpu")


def test_a_warm_compile_run_uses_the_keyed_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("NANOBENCH_CACHE", str(tmp_path))
    # Start from torch's own kernels whatever this run was started with, so the switch to
    # ATEN_CPU_CAPABILITY=default below is a change of kernels (CI reruns under default).
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    env, cleanup = cache_env("warm", "dynamic", "cpu")
    assert cleanup is None
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(warm_dir("cpu"))
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent == tmp_path / "inductor"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert cache_env("warm", "dynamic", "cpu")[0]["TORCHINDUCTOR_CACHE_DIR"] != str(
        env["TORCHINDUCTOR_CACHE_DIR"]
    )
    cold, fresh = cache_env("cold", "static", "cpu")
    assert cold["TORCHINDUCTOR_CACHE_DIR"] == fresh and not os.listdir(fresh)
    os.rmdir(fresh)
