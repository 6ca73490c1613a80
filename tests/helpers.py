"""Shared builders for tests: small checkpoints written as real HF directories, GGUF files
(with the `gguf` package's own writer) and every model form docs/models.md names; and readers of
a report's table as printed, whole or as a block per row (`shown_rows`)."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import torch

from engine.config import ModelConfig, RopeScaling
from engine.weights import synthesize_weights, write_checkpoint
from nanobench.harness.workers.member import as_member
from nanobench.harness.workers.rounds import Window, spread_over, time_steps

TINY_MHA = ModelConfig(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=4,
    head_dim=32,
    rope_theta=10000.0,
    rope_scaling=None,
    tie_word_embeddings=False,
)
TINY_GQA = ModelConfig(
    vocab_size=640,
    hidden_size=192,
    intermediate_size=320,
    num_layers=3,
    num_heads=6,
    num_kv_heads=2,
    head_dim=32,
    rope_theta=500000.0,
    rope_scaling=RopeScaling(factor=8.0, original_max_position_embeddings=64),
    tie_word_embeddings=True,
)
# 32 query heads in one small layer: the head count the capture and pool tables are quoted at.
HEADS32 = ModelConfig(
    vocab_size=256,
    hidden_size=256,
    intermediate_size=128,
    num_layers=1,
    num_heads=32,
    num_kv_heads=8,
    head_dim=8,
    rope_theta=10000.0,
    rope_scaling=None,
    tie_word_embeddings=True,
)


def write_llama70b_config(directory: Path) -> Path:
    """A Llama-3-70B-shaped checkpoint directory holding only config.json (no weights)."""
    directory.mkdir(parents=True)
    hf = {
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 128256,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    }
    (directory / "config.json").write_text(json.dumps(hf))
    return directory


def write_model(directory: Path, config: ModelConfig, seed: int = 1) -> Path:
    write_checkpoint(directory, config, synthesize_weights(config, seed, torch.float32))
    return directory


def prompts(n: int, lengths: list[int], vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (lengths[i],), generator=g).tolist() for i in range(n)]


def rounding_rtol(dtype: torch.dtype, terms: int) -> float:
    """Relative tolerance (to the result's scale) for one quantity computed two ways: another
    kernel, row count, thread count or CPU ISA, i.e. the same sums added in another order.

    Each addition rounds by at most eps/2; over `terms` additions the errors of two orders add
    like a random walk, about sqrt(terms) * eps of the scale (the worst case, terms * eps, is
    never approached by sums of mixed signs). A margin of 8 covers the bias of same-sign terms
    without letting a real bug through: a wrong mask, position or row moves logits by tenths.
    """
    return 8 * math.sqrt(terms) * torch.finfo(dtype).eps


def forward_terms(config: ModelConfig, width: int) -> int:
    """Additions a logit depends on, for rounding_rtol: per layer the longest reductions (the
    hidden and intermediate GEMMs and the attention over `width` tokens), over every layer."""
    return config.num_layers * (config.hidden_size + config.intermediate_size + width)


def assert_close_rounding(
    got: torch.Tensor, want: torch.Tensor, terms: int, what: str = ""
) -> None:
    """got == want up to the rounding of `terms` additions in another order (rounding_rtol)."""
    scale = float(want.abs().max())
    tol = rounding_rtol(want.dtype, terms) * scale
    err = (got.float() - want.float()).abs()
    assert float(err.max()) <= tol, (
        f"{what}: max |diff| {float(err.max()):.3e} (mean {float(err.mean()):.3e}) over the "
        f"rounding tolerance {tol:.3e} ({terms} terms, {want.dtype}, scale {scale:.3g})"
    )


GGUF_NAMES = {
    "embed_tokens": "token_embd",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_config(config: ModelConfig) -> ModelConfig:
    """The config a GGUF can round-trip: eps stored as float32, no llama3 rope scaling."""
    return ModelConfig(
        **{
            **config.__dict__,
            "rope_scaling": None,
            "rms_norm_eps": float(np.float32(config.rms_norm_eps)),
        }
    )


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute, as written there."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def gguf_name(hf: str) -> str:
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    module, leaf = rest.rsplit(".", 1)
    return f"blk.{layer}.{GGUF_NAMES[module]}.{leaf}"


def write_gguf(path, config: ModelConfig, tensors, arch: str = "llama", bad_tensor=None) -> None:
    """A GGUF file built the way llama.cpp's convert_hf_to_gguf.py builds one: dims innermost
    first, Llama q/k rows permuted for its rotary layout, no output.weight when tied."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(config.num_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_heads)
    w.add_head_count_kv(config.num_kv_heads)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_vocab_size(config.vocab_size)
    for name, t in tensors.items():
        a = t.numpy()
        if name.endswith("q_proj.weight"):
            a = llama_cpp_permute(a, config.num_heads)
        elif name.endswith("k_proj.weight"):
            a = llama_cpp_permute(a, config.num_kv_heads)
        if name == bad_tensor:
            a = a.astype(np.int32)  # an integer tensor: no dequantization exists for it
        w.add_tensor(gguf_name(name), a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_model_forms(root: Path, config: ModelConfig, seed: int = 1) -> dict[str, Path]:
    """The same weights in every local form docs/models.md names, by form name:
    a HF directory, a sharded one (index + two shards, as transformers writes them), a .gguf
    file, a directory holding that one .gguf and no config.json, and a config.json alone."""
    tensors = synthesize_weights(config, seed, torch.float32)
    forms = {name: root / name for name in ("hf", "sharded", "gguf-dir", "config-only")}
    write_checkpoint(forms["hf"], config, tensors)
    write_sharded(forms["sharded"], config, tensors)
    forms["gguf"] = root / "model.gguf"
    write_gguf(forms["gguf"], config, tensors)
    forms["gguf-dir"].mkdir()
    shutil.copy(forms["gguf"], forms["gguf-dir"] / "model.gguf")
    forms["config-only"].mkdir()
    (forms["config-only"] / "config.json").write_text(json.dumps(config.to_hf()))
    return forms


def write_sharded(directory: Path, config: ModelConfig, tensors: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config.to_hf()))
    names = sorted(tensors)
    shards = {f"model-0000{i + 1}-of-00002.safetensors": names[i::2] for i in range(2)}
    for shard, keys in shards.items():
        save_file({k: tensors[k].contiguous() for k in keys}, str(directory / shard))
    index = {
        # transformers reads metadata.total_size; an index without it fails in from_pretrained.
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
        "weight_map": {k: shard for shard, keys in shards.items() for k in keys},
    }
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


# -- reading a report's table as printed ---------------------------------------------------------


@dataclass(frozen=True)
class TextTable:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def column(self, name: str) -> list[str]:
        return [row[self.header.index(name)] for row in self.rows]


def text_tables(text: str) -> list[TextTable]:
    """The rich tables in rendered text: a header cell over several lines is joined by spaces
    (a body cell wrapped onto a second line would read as a row of its own: the runs here are
    sized so that none wraps at the console's 160 columns)."""
    found, header, rows, part = [], [], [], None
    for line in text.splitlines():
        mark = line.strip()[:1]
        if mark == "┏":
            header, rows, part = [], [], "header"
        elif mark == "┃" and part == "header":
            header.append([c.strip() for c in line.strip().split("┃")[1:-1]])
        elif mark == "│" and part == "body":
            rows.append(tuple(c.strip() for c in line.strip().split("│")[1:-1]))
        elif mark == "┡":
            part = "body"
        elif mark == "└" and part == "body":
            names = tuple(" ".join(w for w in words if w) for words in zip(*header))
            found.append(TextTable(names, tuple(rows)))
            part = None
    return found


def text_blocks(text: str) -> dict[str, dict[str, str]]:
    """The blocks a table too wide for the terminal prints as (`reports.style.fit_table`):
    title `header: value` -> {header: value}; a value folded onto further lines is joined."""
    found, current, titled = {}, None, ""
    for line in text.splitlines():
        title = re.fullmatch(r"(\S[^:]*): (.+)", line.rstrip())
        if title and not line.startswith(" "):
            titled = line.rstrip()
            current = found.setdefault(titled, {})
        elif current is not None and line.strip():
            header, _, value = line.strip().partition("  ")
            if line[:3].strip() == "" and not value and not current:
                # an indented line under a "title: value" line with no cells yet: a note's
                # continuation (`reports.style.note_lines`), not a block
                found.pop(titled, None)
                current = None
            elif line[:3].strip() == "" and not value:  # a folded value's next line
                last = list(current)[-1]
                current[last] += header
            else:
                current[header] = value.strip()
        elif current is not None and not line.strip() and current:
            current = None
    return found


def shown_rows(text: str, key: str) -> dict[str, dict[str, str]]:
    """The rows of the table whose first column is `key`, as printed whole (rich's box) or, when
    too wide for the console, as a block per row (`reports.style.fit_table`): first cell ->
    {header: cell}."""
    for table in text_tables(text):
        if table.header and table.header[0] == key:
            return {row[0]: dict(zip(table.header, row)) for row in table.rows}
    prefix = f"{key}: "
    return {
        t[len(prefix) :]: cells for t, cells in text_blocks(text).items() if t.startswith(prefix)
    }


def noisy_fleet(
    processes: int, seed: int, effects: dict[str, float], hits: float = 0.1, steps: int = 8
):
    """Identical systems over `processes` workers each (`rounds.spread_over`), system s's
    processes carrying lognormal effects of sigma effects[s];
    a neighbour slows a window (`hits` of them) 1.5 to 4 times, steps carry Student-t (2 dof) noise
    and a drift per round hits every system alike: the null checks' systems."""
    rng = np.random.default_rng(seed)
    now = [0.0]
    drifts: dict[int, float] = {}
    effect = {n: np.exp(sigma * rng.standard_normal(processes)) for n, sigma in effects.items()}

    def worker(name: str, slot: int):
        def window(r: int) -> Window:
            factor = drifts.setdefault(r, 1.0 + 0.10 * rng.uniform(-1, 1))
            hit = rng.uniform(1.5, 4.0) if rng.uniform() < hits else 1.0
            mean_ms = 10.0 * effect[name][slot] * factor * hit

            def step() -> int:
                now[0] += mean_ms * math.exp(0.03 * rng.standard_t(2)) / 1e3
                return 0

            ms, built = time_steps(step, steps, clock=lambda: now[0])
            m = as_member(name)
            return Window(m.name, r, "ok", tuple(ms), tuple(built), (True,) * steps, side=m.side)

        return window

    return {n: spread_over([worker(n, p) for p in range(processes)]) for n in effects}
