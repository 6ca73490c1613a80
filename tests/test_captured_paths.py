"""The CPU capture path beyond the reference read: the Triton kernel and a compiled forward.

Each captured engine is driven step by step against an eager engine of the same config (the
eager engine's greedy tokens are fed to both), through `eager_recorder`, which is what
`default_recorder` picks for CPU tensors. The Triton kernel runs under `TRITON_INTERPRET=1`
(tests/conftest.py sets it before anything imports Triton).
"""

from __future__ import annotations

import pytest
import torch

from engine.config import EngineConfig
from engine.engine import Engine
from engine.weights import synthesize_weights
from tests.helpers import TINY_MHA, prompts

MAX_LEN = 48
ROWS = 2
STEPS = 4
# A compiled forward is another code path: AOT autograd decomposes composite ops (RMSNorm's
# rsqrt-mean, SiLU) into primitives that may round differently by a few fp32 ulps (eps 1.2e-7)
# per op; over 2 layers into O(1) logits that stays below 1e-5 (~80 ulps), while a stale replay
# or a wrong read moves logits by O(1e-2) or more.
COMPILED_TOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tensors():
    return synthesize_weights(TINY_MHA, 1, torch.float32)


def build(tensors, *, capture: bool, compiler=None, **options) -> Engine:
    config = EngineConfig(
        max_batch_size=ROWS,
        max_model_len=MAX_LEN,
        attention="triton",
        bucket_decode=True,
        width_multiple=16,
        capture_decode=capture,
        **options,
    )
    return Engine.build(TINY_MHA, tensors, config, compiler=compiler)


def drive(engine: Engine, steps: int, forced=None):
    """Prefill a ragged batch and decode; returns (tokens fed per step, logits copied per step)."""
    batch = prompts(ROWS, [7, 12], TINY_MHA.vocab_size, seed=3)
    tokens = engine.prefill(batch).argmax(-1).tolist()
    fed, logits = [], []
    for i in range(steps):
        if forced is not None:
            tokens = forced[i]
        fed.append(tokens)
        out = engine.decode_step(tokens)  # (B, V) a view on the replay's buffer when captured
        logits.append(out.clone())
        tokens = out.argmax(-1).tolist()
    engine.release_all()
    return fed, logits


@pytest.fixture(scope="module")
def eager_run(tensors):
    """The eager Triton engine's tokens and logits: what every captured engine is held to."""
    return drive(build(tensors, capture=False), STEPS)


def test_triton_replays_equal_eager_triton_step_by_step(tensors, eager_run):
    fed, want = eager_run
    captured = build(tensors, capture=True)
    _, got = drive(captured, STEPS, forced=fed)
    for step, (a, b) in enumerate(zip(want, got, strict=True)):
        # The same kernel on the same (rows, max_model_len) shape: bitwise.
        assert torch.equal(a, b), f"step {step}: the Triton replay differs from eager"
    graphs = captured.decode_graphs
    # The Triton read has no width axis: one recording serves every step, whatever the length.
    assert sorted(graphs.graphs) == [(ROWS, MAX_LEN)]
    assert (graphs.recordings, graphs.replays) == (1, STEPS)


@pytest.mark.slow
def test_compiled_triton_replays_match_eager_step_by_step(tensors, eager_run):
    """A recording runs the compiled forward; replays re-enter it with the held arguments.

    Backend aot_eager: dynamo's guards and AOT autograd's graph are what a replay re-enters;
    Inductor's C++ codegen would cost ~40 s here and is covered by test_compile_sweep.
    """
    import torch._dynamo

    from nanobench.compile.dynamo import compiler_for

    fed, want = eager_run
    torch._dynamo.reset()
    try:
        captured = build(
            tensors, capture=True, compile_decode="static", compiler=compiler_for("aot_eager")
        )
        _, got = drive(captured, STEPS, forced=fed)
    finally:
        torch._dynamo.reset()
    assert captured.compiled.builds == 1, "one build serves the whole capture list"
    for step, (a, b) in enumerate(zip(want, got, strict=True)):
        assert not torch.isnan(b).any(), f"step {step}: returned the recording call's buffer"
        torch.testing.assert_close(b, a, rtol=COMPILED_TOL, atol=COMPILED_TOL, msg=f"step {step}")
    assert captured.decode_graphs.replays == STEPS
