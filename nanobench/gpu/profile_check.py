"""The GPU check's `profile` stage: where a CUDA step's time goes, on the host and the device.

What it is: `check_profile(seconds_left)`: `nanobench profile` of the corpus's gpt-fast-style
step on CUDA in bf16 (off, dynamic and reduce-overhead, a few steps; a target, since the engine
records its own graphs and `reduce-overhead` is a target's mode), one row per mode: the device's kernel time and busy
share of the host's step, launches and graph replays a step, the share of device time inside
replayed graphs, Inductor's cudagraph skips with their reasons, and the categories' gate.
What it is not: the profile itself (`nanobench.profile`) or the other stages (`gpu.check`).
Invariant: a mode is ok only when it ran, the device said its side (a kernel time) and its
categories added up; a reduce-overhead mode that replays no graph says so in its detail.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator

from nanobench.gpu.cli_run import CUT, run_json

MODES = "off,dynamic,reduce-overhead"
STEP = "tests/corpus/static_kv.py:factory"


def profile_rows(doc: dict) -> Iterator[dict]:
    """`nanobench profile --json`'s rows as check rows, one a mode."""
    gates = {g["name"]: g["passed"] for g in doc.get("gates", [])}
    for r in doc["rows"]:
        name = f"static_kv {r['mode']}"
        if r["status"] != "ok" or r.get("device_ms_per_step") is None:
            yield {"check": "profile", "name": name, "ok": False,
                   "detail": r["status"] if r["status"] != "ok" else "no device time recorded"}  # fmt: skip
            continue
        added = gates.get(f"categories_add_up[{r['mode']}]", False)
        detail = (
            f"step {r['step_ms']:.3f} ms, device {r['device_ms_per_step']:.3f} ms "
            f"(busy {r['device_busy_share']:.0%} of the host's step), {r['launches_per_step']:.0f} "
            f"launches and {r['graph_replays_per_step']:.0f} graph replays a step, "
            f"{r['graph_device_share']:.0%} of device time in graphs; host share "
            f"{r['host_share']:.0%}, profiler +{r['overhead']:.0%}"
        )
        if r.get("cudagraph_skips"):
            detail += f"; cudagraphs skipped: {r['cudagraph_skips']}"
        yield {"check": "profile", "name": name, "ok": added, "model": "static_kv",
               "mode": r["mode"], "detail": detail}  # fmt: skip


def check_profile(seconds_left: Callable[[], float]) -> Iterator[dict]:
    """`nanobench profile` of the corpus step on CUDA: each mode's host and device side."""
    with tempfile.TemporaryDirectory() as out:
        args = ["profile", "--target", STEP, "--device", "cuda", "--dtype", "bfloat16", "--modes", MODES,
                "--steps", "4", "--rounds", "3", "--passes", "1", "--out", out]  # fmt: skip
        doc = run_json(args, seconds_left)
    if doc == CUT:
        yield {"check": "profile", "name": "static_kv", "ok": None,
               "detail": "skipped: the budget cut it"}  # fmt: skip
    elif isinstance(doc, str):
        yield {"check": "profile", "name": "static_kv", "ok": False, "detail": doc}
    else:
        yield from profile_rows(doc)
