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
import subprocess
import sys
from dataclasses import asdict

import pytest

from engine.sources import materialize_preset
from nanobench.compile.spec import WorkerSpec

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


def set_up(cache: str, process: int) -> dict:
    spec = WorkerSpec(model=str(materialize_preset("tiny")), mode="dynamic", steps=2,
                      process=process)  # fmt: skip
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", SET_UP, json.dumps(asdict(spec))],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FOUND:")]
    return json.loads(line.removeprefix("FOUND:"))


@pytest.mark.slow
def test_a_third_worker_skips_the_restart_over_the_first_workers_cache(tmp_path):
    first = set_up(str(tmp_path), 1)
    assert first["restarts"], "the engine's dynamic compile no longer restarts: drop the shortcut"
    third = set_up(str(tmp_path), 3)
    assert third == {"restarts": [], "from_cache": True, "builds": first["builds"]}, third


@pytest.mark.slow
def test_a_third_worker_whose_graph_no_cache_holds_sets_up_the_ordinary_way(tmp_path):
    third = set_up(str(tmp_path), 3)  # an empty cache: the shortcut's graph is compiled anew
    assert third["restarts"], third
