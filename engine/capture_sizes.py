"""Capture-size ladders: the batch sizes a server records graphs for, and what they pad.

What it is: the row ladders real servers capture by default, reproduced from their source,
an explicit list parser, and the padding arithmetic over a ladder: a batch runs the graph of
the next listed size at or above it, so it computes `size - batch` rows of padding.
What it is not: a capture. Nothing here touches torch or a device; `DecodeBuckets(row_sizes=)`
turns a ladder into the row axis of a bucket set.
Invariant: a ladder is a non-empty, strictly ascending tuple of positive ints.

Sources (read in the projects' repositories, not paraphrased from docs):
- vLLM: `vllm/config/vllm.py`, `VllmConfig._set_cudagraph_sizes` (v1 engine; snapshot read at
  commit 09f030e). With no user list and no speculative decoding, the largest size is
  m = min(2 * max_num_seqs, 512), capped by max_num_batched_tokens; the sizes are 1, 2, 4
  (those <= m), then range(8, min(m + 1, 256), 8), then range(256, m + 1, 16) when m >= 256.
- SGLang: `python/sglang/srt/server_args.py`, `ServerArgs._generate_cuda_graph_batch_sizes`
  (snapshot read at commit 469c63e). Without speculative decoding and with padding on:
  [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max_bs + 1, 32),
  kept <= cuda_graph_max_bs (whose own default depends on the GPU; here it is --max-batch).
"""

from __future__ import annotations

from bisect import bisect_left

NAMED = ("vllm", "sglang")
# vLLM's scheduler default for max_num_batched_tokens on most GPUs; it caps the ladder.
VLLM_MAX_NUM_BATCHED_TOKENS = 8192


class CaptureSizesError(ValueError):
    """A capture-size list that is not a ladder."""


def vllm_sizes(
    max_num_seqs: int, max_num_batched_tokens: int = VLLM_MAX_NUM_BATCHED_TOKENS
) -> tuple[int, ...]:
    """vLLM v1's default cudagraph_capture_sizes for max_num_seqs (no spec decode)."""
    top = min(max_num_seqs * 2, 512, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    if top >= 8:
        sizes += range(8, min(top + 1, 256), 8)
    if top >= 256:
        sizes += range(256, top + 1, 16)
    return tuple(sizes)


def sglang_sizes(cuda_graph_max_bs: int) -> tuple[int, ...]:
    """SGLang's default capture batch sizes for cuda_graph_max_bs (padding on, no spec)."""
    sizes = (
        [1, 2, 4, 8, 12]
        + list(range(16, 257, 8))
        + list(range(272, 512, 16))
        + list(range(512, cuda_graph_max_bs + 1, 32))
    )
    return tuple(s for s in sizes if s <= cuda_graph_max_bs)


def ladder(sizes) -> tuple[int, ...]:
    """Validate: positive ints, strictly ascending, at least one."""
    sizes = tuple(sizes)
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise CaptureSizesError(f"capture sizes {sizes}: expected positive integers")
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise CaptureSizesError(f"capture sizes {sizes}: expected strictly ascending sizes")
    return sizes


def resolve(text: str, max_batch: int) -> tuple[int, ...]:
    """`vllm`, `sglang` (ladders for max_batch sequences) or a comma-separated list."""
    name = text.strip().lower()
    if name == "vllm":
        return vllm_sizes(max_batch)
    if name == "sglang":
        return sglang_sizes(max_batch)
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise CaptureSizesError(
            f"capture sizes {text!r}: expected vllm, sglang or comma-separated positive integers"
        ) from None
    return ladder(values)


def padded_size(batch: int, sizes: tuple[int, ...]) -> int | None:
    """The listed size a batch runs at (smallest >= batch); None above the list (eager)."""
    i = bisect_left(sizes, batch)
    return sizes[i] if i < len(sizes) else None


def size_padding(sizes: tuple[int, ...]) -> list[dict]:
    """Per listed size: the batches it serves and their padding rows, worst and mean."""
    out, low = [], 1
    for size in sizes:
        batches = range(low, size + 1)
        pads = [size - b for b in batches]
        out.append(
            {
                "size": size,
                "batches": [low, size],
                "max_pad_rows": max(pads),
                "mean_pad_share": sum(pads) / (size * len(pads)),
            }
        )
        low = size + 1
    return out


def mix_pad_share(sizes: tuple[int, ...], batches) -> float:
    """Padding rows / computed rows over a mix of batch sizes (those above the list excluded)."""
    served = [(b, padded_size(b, sizes)) for b in batches]
    computed = sum(s for _, s in served if s is not None)
    real = sum(b for b, s in served if s is not None)
    return (computed - real) / computed if computed else 0.0
