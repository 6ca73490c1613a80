"""The engine's limits are refused with clear errors, before anything is written."""

from __future__ import annotations

import pytest

from engine.config import ConfigError, EngineConfig
from engine.engine import Engine, EngineLimitError


@pytest.fixture(scope="module")
def engine():
    return Engine.from_checkpoint("tiny", max_batch_size=2, max_model_len=32, num_blocks=3)


def test_prompt_longer_than_max_model_len(engine):
    with pytest.raises(EngineLimitError, match="exceed max_model_len 32"):
        engine.generate([[1] * 30], 4)


def test_more_prompts_than_rows(engine):
    with pytest.raises(EngineLimitError, match="max_batch_size is 2"):
        engine.generate([[1], [2], [3]], 2)


def test_out_of_kv_blocks(engine):
    with pytest.raises(EngineLimitError, match="out of KV blocks"):
        engine.generate([[1] * 20, [2] * 20], 4)
    assert engine.cache.audit() == [] and engine.cache.allocator.num_free == 3


def test_token_outside_vocabulary(engine):
    with pytest.raises(EngineLimitError, match="outside the vocabulary"):
        engine.generate([[5000]], 2)


def test_config_refuses_capture_without_bucketing_or_persistent_inputs():
    with pytest.raises(ConfigError, match="bucket_decode"):
        EngineConfig(capture_decode=True)
    with pytest.raises(ConfigError, match="persist_inputs"):
        EngineConfig(capture_decode=True, bucket_decode=True, persist_inputs=False)


def test_fresh_tensors_path_matches_persistent_inputs():
    batch = [[1, 2, 3], [4, 5]]
    a = Engine.from_checkpoint("tiny", max_model_len=32, persist_inputs=True).generate(batch, 6)
    b = Engine.from_checkpoint("tiny", max_model_len=32, persist_inputs=False).generate(batch, 6)
    assert a == b
