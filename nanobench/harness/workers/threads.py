"""torch's intra-op threads for a run in this process: set to the option, read back after.

What it is: `apply_threads(threads)` (for a worker process, which keeps its setting until it
exits) and `threads_applied(threads)` (for an in-process run, undone after).
What it is not: a fresh worker's environment (`OMP_NUM_THREADS`, set by whoever starts it) or
the env record a row carries (`env_record`).
Invariant: the thread count a row carries is `torch.get_num_threads()` read where it was
timed, never the option echoed back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def apply_threads(threads: int) -> int:
    """torch's intra-op threads in this process set to `threads` (0 leaves torch's default).

    Returns `torch.get_num_threads()` read afterwards: what a row timed in this process carries,
    never the option echoed back.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@contextmanager
def threads_applied(threads: int) -> Iterator[int]:
    """`apply_threads` for one in-process run (capture, explain, the kernel bench), undone after:
    a command called inside another program (a test, a notebook) leaves its setting alone."""
    import torch

    before = torch.get_num_threads()
    try:
        yield apply_threads(threads)
    finally:
        torch.set_num_threads(before)
