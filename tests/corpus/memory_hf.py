"""transformers' static cache as a target, built from a config so that it prices on meta.

What it is: `static`, a factory of the target protocol: a `LlamaForCausalLM` built with
`from_config` from a small `LlamaConfig` (no weights read), in the dtype asked, with a
`StaticCache` for `prompt_len + steps` tokens, the prompt prefilled in the factory, one token a
step at a tensor `cache_position`; `CONFIG` for hand counts.
What it is not: the built-in `hf-static` target, which loads a checkpoint with
`from_pretrained` (and so refuses the meta device, by transformers' own check).
Invariant: step k presents input_ids (B, 1) and cache_position (1,) = prompt_len + k.
"""

from __future__ import annotations

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        tie_word_embeddings=False, attn_implementation="sdpa",
    )  # fmt: skip


class Static:
    def __init__(self, *, rows, prompt_len, steps, device, dtype):
        from transformers import AutoModelForCausalLM, StaticCache

        cfg = config()
        self.forward = AutoModelForCausalLM.from_config(cfg, dtype=DTYPES[dtype]).to(device)
        self.forward.eval()
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, cfg.vocab_size, (rows, prompt_len + steps), generator=g)
        self.ids, self.prompt_len, self.device = ids.to(device), prompt_len, device  # (B, P+S)
        self.cache = StaticCache(config=cfg, max_cache_len=prompt_len + steps)
        with torch.no_grad():
            self.forward(
                input_ids=self.ids[:, :prompt_len],
                past_key_values=self.cache,  # the name every supported transformers reads
                cache_position=torch.arange(prompt_len, device=device),
                use_cache=True,
            )

    def step_inputs(self, step):
        at = self.prompt_len + step
        return (), {
            "input_ids": self.ids[:, at : at + 1],  # (B, 1)
            "past_key_values": self.cache,
            "cache_position": torch.tensor([at], device=self.device),  # (1,)
            "use_cache": True,
        }


def static(*, rows, prompt_len, steps, device, dtype):
    return Static(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)
