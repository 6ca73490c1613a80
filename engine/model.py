"""The Llama model: embeddings, decoder layers, final norm and a tied or untied head.

What it is: one `nn.Module` whose forward takes token ids, their positions and an attention
context, and returns the logits of each row's last token.
What it is not: a cache or a scheduler. It never reads a block table; everything it needs to
address K/V arrives in the attention context.
Invariant: with a planned decode context the forward reads only tensors, so dynamo traces it
as one graph whose only guards are on tensor sizes.
"""

from __future__ import annotations

import torch
from torch import nn

from engine.config import ModelConfig
from engine.layers import DecoderLayer, RMSNorm, rope_tables
from engine.packed import linear


class LlamaBody(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class Llama(nn.Module):
    def __init__(self, config: ModelConfig, max_len: int, device=None) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaBody(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.packed: dict[str, tuple[int, int]] = {}  # engine.packed.pack_model fills it
        cos, sin = rope_tables(config, max_len, device)
        self.register_buffer("rope_cos", cos, persistent=False)  # (L, D)
        self.register_buffer("rope_sin", sin, persistent=False)  # (L, D) signed, see rope_tables

    def forward(self, input_ids, positions, attn, last_index=None) -> torch.Tensor:
        """input_ids, positions: (B, W). Returns logits (B, V) at `last_index` (default W-1)."""
        x = self.model.embed_tokens(input_ids)  # (B, W, hidden)
        # Broadcast over heads once here, not in every layer.
        cos = self.rope_cos[positions].unsqueeze(2)  # (B, W, 1, D)
        sin = self.rope_sin[positions].unsqueeze(2)  # (B, W, 1, D)
        for layer in self.model.layers:
            x = layer(x, cos, sin, attn)
        if last_index is None:
            x = x[:, -1]  # (B, hidden)
        else:
            x = x[torch.arange(x.shape[0], device=x.device), last_index]  # (B, hidden)
        head = self.packed.get("head")
        return linear(self.model.norm(x), self.lm_head.weight, head).float()  # (B, V)
