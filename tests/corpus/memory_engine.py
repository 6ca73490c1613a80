"""nanobench's own engine as a target: the decode step a capture records, through a factory.

What it is: `engine`, a factory of the target protocol that builds the engine for `rows`
sequences of `prompt_len + steps` tokens (reference read, one KV block, as
`nanobench.memory.decode_workspace` builds it) on the device it is given, and steps the all-padding
batch a capture records (`engine.captured.padding_plan`) at the full width.
What it is not: a generation: the batch is padding, writing only the sink slot.
Invariant: priced through `--target`, its figures equal the engine's own traced ones.
"""

from __future__ import annotations

from engine.captured import padding_plan
from engine.config import ModelConfig
from nanobench.memory.decode_workspace import build_engine, engine_config

# Two layers: what nanobench.memory.decode_workspace traces at, so the two figures are the same forward.
CONFIG = ModelConfig(
    vocab_size=160,
    hidden_size=64,
    intermediate_size=96,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    rope_theta=10000.0,
    rope_scaling=None,
    tie_word_embeddings=True,
)


class EngineStep:
    def __init__(self, *, rows, prompt_len, steps, device, dtype):
        self.width = prompt_len + steps
        self.rows = rows
        config = engine_config("reference", dtype, rows, self.width, device=device)
        self.engine = build_engine(CONFIG, config)
        self.forward = self.engine.decode_forward

    def step_inputs(self, step):
        input_ids, plan = padding_plan(self.engine.cache, self.engine.inputs, self.rows, self.width)
        return (input_ids, plan), {}  # (B, 1) ids and the plan's (B, W) slot window


def engine(*, rows, prompt_len, steps, device, dtype):
    return EngineStep(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)
