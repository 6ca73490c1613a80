"""Does the capture list fit beside the weights and the KV pool: the device memory budget.

What it is: bytes per KV token and block, weight bytes, what a device leaves for the KV pool
after weights, a capture pool and activations, how many blocks that is, and the gates
(`PoolUnsound`): the budget leaves enough blocks, and the captures share one pool.
Also `parse_bytes` for `--device-memory 80GiB` style inputs and `kv_shortfall_bytes`, how far
a budget that does not fit is from fitting.
What it is not: a memory probe. Device totals come from the caller (or the CLI).
Invariant: every byte count is an int; decimal units are powers of 1000 and binary units
(KiB, MiB, GiB) powers of 1024, never mixed; a message prints bytes with the one formatter,
`reports.style.binary_bytes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable
from decimal import Decimal, InvalidOperation

from reports.style import binary_bytes

_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_BYTES = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


class PoolUnsound(RuntimeError):
    """The KV pool, the weights and the capture pool do not fit, or captures hold private pools."""


def parse_bytes(text: str | int) -> int:
    """int(number * unit) for "80GiB", "1.5 GB", "4096B" or "4096"; units B/KB/MB/GB/KiB/MiB/GiB."""
    if isinstance(text, bool):
        raise ValueError(f"byte size: expected a size like 80GiB, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"byte size: expected a non-negative size, got {text}")
        return text
    match = _BYTES.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or (unit and unit not in _UNITS):
        raise ValueError(
            f"byte size: expected a number with an optional unit B, KB, MB, GB, KiB, MiB or GiB "
            f"(e.g. 80GiB), got {text!r}"
        )
    try:
        value = Decimal(match.group(1)) * _UNITS[unit or "b"]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"byte size: cannot read {text!r}") from exc
    if value != value.to_integral_value():
        raise ValueError(f"byte size: {text!r} is not a whole number of bytes ({value})")
    return int(value)


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """2 * layers * kv_heads * head_dim * dtype_bytes: K and V for one token in every layer."""
    for name, value in (
        ("layers", layers),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("dtype_bytes", dtype_bytes),
    ):
        if value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value}")
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def kv_bytes_per_block(
    layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, block_size: int
) -> int:
    """kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes) * block_size."""
    if block_size < 1:
        raise ValueError(f"block_size: expected a positive integer, got {block_size}")
    return kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes) * block_size


def weights_bytes(n_params: int, dtype_bytes: int) -> int:
    """n_params * dtype_bytes."""
    if n_params < 0 or dtype_bytes < 1:
        raise ValueError(
            f"weights: expected n_params >= 0 and dtype_bytes >= 1, got {n_params}, {dtype_bytes}"
        )
    return n_params * dtype_bytes


def free_for_kv_bytes(
    device_bytes: int,
    utilization: float,
    weights_bytes: int,
    capture_pool_bytes: int,
    activation_bytes: int = 0,
) -> int:
    """floor(device_bytes * utilization) - weights - capture_pool - activation; may be negative."""
    if not 0.0 < utilization <= 1.0:
        raise ValueError(f"utilization: expected a share in (0, 1], got {utilization}")
    if device_bytes < 0:
        raise ValueError(f"device_bytes: expected a non-negative byte count, got {device_bytes}")
    usable = math.floor(device_bytes * utilization)
    return usable - weights_bytes - capture_pool_bytes - activation_bytes


def kv_blocks(free_bytes: int, bytes_per_block: int) -> int:
    """max(0, free_bytes // bytes_per_block): whole KV blocks that fit."""
    if bytes_per_block < 1:
        raise ValueError(f"bytes_per_block: expected a positive byte count, got {bytes_per_block}")
    return max(0, free_bytes // bytes_per_block)


def kv_blocks_needed(max_batch: int, max_model_len: int, block_size: int) -> int:
    """max_batch * ceil(max_model_len / block_size): a full batch at full length."""
    if min(max_batch, max_model_len, block_size) < 1:
        raise ValueError(
            "max_batch, max_model_len, block_size: expected positive integers, got "
            f"{max_batch}, {max_model_len}, {block_size}"
        )
    return max_batch * -(-max_model_len // block_size)


def kv_shortfall_bytes(free_bytes: int, bytes_per_block: int, min_blocks: int) -> int:
    """max(0, min_blocks * bytes_per_block - free_bytes): the bytes a budget lacks to fit.

    kv_blocks(free, per_block) >= min_blocks exactly when free >= min_blocks * per_block, so
    the shortfall is 0 exactly when the budget fits, and freeing that many bytes makes it fit.
    """
    if bytes_per_block < 1 or min_blocks < 0:
        raise ValueError(
            "bytes_per_block, min_blocks: expected a positive byte count and a non-negative "
            f"block count, got {bytes_per_block}, {min_blocks}"
        )
    return max(0, min_blocks * bytes_per_block - free_bytes)


def check_pool_budget(
    device_bytes: int,
    utilization: float,
    weights_bytes: int,
    capture_pool_bytes: int,
    activation_bytes: int,
    bytes_per_block: int,
    min_blocks: int = 1,
) -> int:
    """kv_blocks(free_for_kv_bytes(...), bytes_per_block) >= min_blocks; returns the blocks."""
    free = free_for_kv_bytes(
        device_bytes, utilization, weights_bytes, capture_pool_bytes, activation_bytes
    )
    blocks = kv_blocks(free, bytes_per_block)
    if blocks < min_blocks:
        short = kv_shortfall_bytes(free, bytes_per_block, min_blocks)
        # Shrinking the capture list cannot help when the weights alone overrun the cap.
        if weights_bytes > math.floor(device_bytes * utilization):
            remedy = "the weights alone exceed the cap: more device memory or fewer weight bytes"
        else:
            remedy = "shrink the capture list or its workspace"
        raise PoolUnsound(
            f"{binary_bytes(device_bytes)} x {utilization:g} leaves {binary_bytes(free)} for the "
            f"KV pool after weights {binary_bytes(weights_bytes)}, capture pool "
            f"{binary_bytes(capture_pool_bytes)} and activations {binary_bytes(activation_bytes)}: "
            f"{blocks} blocks of {binary_bytes(bytes_per_block)}, need {min_blocks} "
            f"(short by {binary_bytes(short)}); {remedy}"
        )
    return blocks


def check_pool_shared(pool_ids: Iterable[Hashable]) -> None:
    """Every captured graph recorded into one memory pool (one distinct pool handle)."""
    ids = list(pool_ids)
    distinct = len(set(ids))
    if distinct > 1:
        raise PoolUnsound(
            f"{len(ids)} captured graphs hold {distinct} distinct pools, expected 1: private "
            "pools are a sum over the capture list where a shared one is its max; pass one "
            "pool handle to every recording"
        )
