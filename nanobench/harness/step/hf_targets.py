"""Built-in targets: one decode step of a transformers causal LM, static or dynamic cache.

What it is: `hf_static` and `hf_dynamic`, factories of the target protocol (`nanobench.harness.step.targets`)
plus `model` (a checkpoint directory the engine loads: Llama, Mistral, Qwen2, Qwen3). Each
loads the model with `AutoModelForCausalLM` (safetensors, offline), prefills seeded prompts
into a `StaticCache` or a `DynamicCache` outside any traced region, and steps one token per
call: `forward` is the model itself, `step_inputs(step)` the next token, its cache position
and the cache, passed as `past_key_values`: the name every transformers pyproject allows reads
(`LlamaForCausalLM.forward` names only it in 5.6.0 and 5.17.0; 5.24.0, the lock's, renames it
`cache` and keeps `past_key_values` as an alias until 5.40). A model that does not know a
keyword swallows it in `**kwargs` and runs with no history, so the name matters.
What it is not: generation. The next token is seeded, not sampled from the logits: the
diagnosis needs the shapes and guards of a step, not a sensible text.
Invariant: step k presents `input_ids` (B, 1), `cache_position` (1,) = prompt_len + k and a
cache holding prompt_len + k tokens, in the first pass and in every timed window; a static
cache never changes shape, a dynamic one grows by one token per step.
"""

from __future__ import annotations

import torch
import transformers
from transformers import AutoModelForCausalLM, DynamicCache, StaticCache

from engine.weights import DTYPES


class HFDecode:
    """One decode step of a transformers model; `forward` is the module dynamo sees."""

    def __init__(self, *, model: str, cache: str, rows: int, prompt_len: int, steps: int,
                 device: str, dtype: str) -> None:  # fmt: skip

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.forward = (
            AutoModelForCausalLM.from_pretrained(
                model, dtype=DTYPES[dtype], local_files_only=True, use_safetensors=True
            )
            .to(device)
            .eval()
        )
        config = self.forward.config
        g = torch.Generator().manual_seed(0)
        # (B, prompt_len + steps): the prompt, then one seeded token per decode step.
        self.ids = torch.randint(0, config.vocab_size, (rows, prompt_len + steps), generator=g).to(
            device
        )
        self.prompt_len, self.device = prompt_len, device
        if cache == "static":
            self.cache = StaticCache(config=config, max_cache_len=prompt_len + steps)
        else:
            self.cache = DynamicCache(config=config)
        with torch.no_grad():
            self.forward(
                input_ids=self.ids[:, :prompt_len],
                past_key_values=self.cache,
                cache_position=torch.arange(prompt_len, device=device),
                use_cache=True,
            )

    def step_inputs(self, step: int) -> tuple[tuple, dict]:
        at = self.prompt_len + step
        # The contract: a function of `step` alone. Each timed window starts again at step 0,
        # and both caches count their own length (a StaticCache writes at it, whatever the
        # cache_position), so the cache is cropped back to what it held before this step.
        held = int(self.cache.get_seq_length())
        if held > at:
            rewind(self.cache, held - at)
        return (), {
            "input_ids": self.ids[:, at : at + 1],  # (B, 1)
            "past_key_values": self.cache,
            "cache_position": torch.tensor([at], device=self.device),  # (1,)
            "use_cache": True,
        }


def rewind(cache, tokens: int) -> None:
    """Drop the cache's last `tokens` tokens, in every transformers pyproject allows.

    A dynamic layer's `crop` takes a negative count in all of 5.x; a static layer has `crop` only
    from 5.24, and before it counts its length in `cumulative_length`, a tensor at a static
    address, which 5.24's `crop` moves back in place: so that is what is done without it."""
    for layer in cache.layers:
        if hasattr(layer, "crop"):
            layer.crop(-tokens)
        else:
            layer.cumulative_length.sub_(tokens)


def hf_static(*, model: str, rows: int, prompt_len: int, steps: int, device: str, dtype: str):
    return HFDecode(
        model=model, cache="static", rows=rows, prompt_len=prompt_len, steps=steps,
        device=device, dtype=dtype,
    )  # fmt: skip


def hf_dynamic(*, model: str, rows: int, prompt_len: int, steps: int, device: str, dtype: str):
    return HFDecode(
        model=model, cache="dynamic", rows=rows, prompt_len=prompt_len, steps=steps,
        device=device, dtype=dtype,
    )  # fmt: skip
