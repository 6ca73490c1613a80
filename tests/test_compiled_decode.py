"""CompiledDecode policy with a fake compiler and counter: the seam that makes it testable fast."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.compiled import CompiledDecode
from engine.engine import Engine
from tests.helpers import prompts


class FakeCompiler:
    """Builds once per distinct shape (a static compiler), counted like dynamo's frames."""

    def __init__(self):
        self.frames = 0
        self.seen = set()
        self.compiled_modes = []

    def __call__(self, fn, mode):
        self.compiled_modes.append(mode)

        def run(input_ids, view):
            shape = view.graph_shape
            if shape not in self.seen:
                self.seen.add(shape)
                self.frames += 1
            return fn(input_ids, view)

        return run


def plan(rows, width):
    return SimpleNamespace(graph_shape=(rows, width))


def test_off_goes_through_the_wrapper_and_counts_no_builds():
    calls = []
    decode = CompiledDecode(
        lambda ids, view: calls.append(view) or 1, "off", build_counter=lambda: 0
    )
    for w in (17, 18, 19):
        decode(None, plan(4, w))
    assert len(calls) == 3
    assert (decode.calls, decode.builds, decode.distinct, decode.reuse) == (3, 0, 3, 1.0)


def test_static_policy_counts_one_build_per_new_shape():
    fake = FakeCompiler()
    decode = CompiledDecode(
        lambda ids, view: 0, "static", compiler=fake, build_counter=lambda: fake.frames
    )
    for w in (17, 18, 18, 19, 17):
        decode(None, plan(4, w))
    assert fake.compiled_modes == ["static"]
    assert decode.builds_per_call == [1, 1, 0, 1, 0]
    assert decode.builds == 3 and decode.distinct == 3
    assert decode.reuse == pytest.approx(2 / 5)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="compile mode"):
        CompiledDecode(lambda ids, view: 0, "max-autotune")


def test_engine_decode_goes_through_compiled_decode_in_every_mode():
    fake = FakeCompiler()
    engine = Engine.from_checkpoint(
        "tiny",
        max_model_len=64,
        compile_decode="dynamic",
        compiler=fake,
        build_counter=lambda: fake.frames,
    )
    engine.generate(prompts(2, [5, 7], 4096), 6)
    assert fake.compiled_modes == ["dynamic"]
    assert engine.compiled.calls == 5, "every decode step must go through decode_forward"
    assert engine.compiled.history[0] == (2, 8)


def test_fake_compiled_engine_matches_eager_engine_when_driven_identically():
    batch = prompts(3, [4, 9, 6], 4096)
    eager = Engine.from_checkpoint("tiny", max_model_len=64)
    fake = FakeCompiler()
    wrapped = Engine.from_checkpoint(
        "tiny",
        max_model_len=64,
        compile_decode="static",
        compiler=fake,
        build_counter=lambda: fake.frames,
    )
    assert eager.generate(batch, 8) == wrapped.generate(batch, 8)
    assert torch.equal(eager.cache.k_pools[0], wrapped.cache.k_pools[0])
