"""Attention kernels over the paged K/V pools: a plain-torch oracle and a Triton decode kernel.

Nothing here probes a backend at import time; Triton is imported only when its kernel runs.
"""

from kernels.reference import paged_attention_batched_reference

__all__ = ["paged_attention_batched_reference"]
