"""A compile mode's third and later workers go straight to the graph the first compiled.

Under dynamic=True the engine's compile traces its float constants symbolically, then restarts
its trace to specialize them (dynamo's TensorifyScalarRestartAnalysis, recorded in each
compile's `restart_reasons`). A worker past the second traces them as constants from the start
(`session.first_pass(specialize_float=True)`) and keeps that only when every graph came from
the cache the first filled (`all_from_cache`); otherwise it sets up again the ordinary way.
Dynamo's own records are the peer: the restart it logs, and AOTAutograd's cache counters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from engine.config import PRESETS
from nanobench.compile.spec import WorkerSpec
from tests.helpers import write_model

pytestmark = pytest.mark.slow

# One worker's set-up in a fresh process: what dynamo recorded of it.
SET_UP = """
import json, sys
from nanobench.compile.session import all_from_cache, open_session
from torch._dynamo.utils import get_compilation_metrics
session = open_session(json.loads(sys.argv[1]))
print("FOUND:" + json.dumps({
    "restarts": [r for m in get_compilation_metrics() for r in (m.restart_reasons or [])],
    "from_cache": all_from_cache(), "builds": session.ready["builds"],
}))
"""


# Inductor's caches of whole graphs, under TORCHINDUCTOR_CACHE_DIR: AOTAutograd's and the FX
# graph cache. What else is there is generated code and the C++ kernels built from it.
GRAPH_CACHES = ("aotautograd", "fxgraph")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """The tiny preset's model in one layer: the same floats traced, a quarter of the graph."""
    one_layer = replace(PRESETS["tiny"].config, num_layers=1)
    return str(write_model(tmp_path_factory.mktemp("tiny-1-layer"), one_layer))


def set_up(model: str, cache: Path, process: int) -> dict:
    spec = WorkerSpec(model=model, mode="dynamic", steps=2, process=process)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache),
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", SET_UP, json.dumps(asdict(spec))],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FOUND:")]
    return json.loads(line.removeprefix("FOUND:"))


@pytest.fixture(scope="module")
def first(model, tmp_path_factory) -> tuple[dict, Path]:
    """The first worker's set-up over an empty cache, and the cache it filled."""
    cache = tmp_path_factory.mktemp("first-workers-cache")
    return set_up(model, cache, 1), cache


def test_a_third_worker_skips_the_restart_over_the_first_workers_cache(model, first, tmp_path):
    found, filled = first
    assert found["restarts"], "the engine's dynamic compile no longer restarts: drop the shortcut"
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)  # the first's cache as it left it; the third writes a copy
    third = set_up(model, cache, 3)
    assert third == {"restarts": [], "from_cache": True, "builds": found["builds"]}, third


def test_a_third_worker_whose_graph_no_cache_holds_sets_up_the_ordinary_way(model, first, tmp_path):
    # The first's cache without its graphs: no graph is held, so the shortcut's graph is
    # compiled anew (its C++ kernels, built from code the first generated, are not rebuilt).
    _, filled = first
    held = {p.name for p in filled.iterdir()}
    assert set(GRAPH_CACHES) <= held, f"inductor keeps its graphs elsewhere now: {sorted(held)}"
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache, ignore=lambda d, names: GRAPH_CACHES if d == str(filled) else ())
    third = set_up(model, cache, 3)
    assert third["restarts"], third
