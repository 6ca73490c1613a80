"""Live tensor bytes of one call, counted at the dispatcher: the memory a recorded graph holds.

What it is: `LiveBytes`, a `TorchDispatchMode` that sees every operator a call runs, counts the
storage of each output that is new (not the storage of one of the op's inputs, so views and
in-place results count nothing), once per storage, and watches it die through a weak reference
to the storage; and `trace_call`, which runs a function under it and returns its `Footprint`:
the peak of live bytes, the peak without the returned tensors (the workspace a pool reuses),
and the bytes of the returned tensors (what a recorded graph keeps). It works the same on real
tensors and under `FakeTensorMode`, where nothing is allocated, so any model size is priced.
What it is not: an allocator probe. It counts tensor storages, not the caching allocator's
rounding or segments, nor memory a kernel takes behind torch's back (a library's scratch).
Invariant: whatever existed before the call (parameters, buffers, inputs, the KV pools) is
never counted: only storages an operator created inside the call, each once.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary


@dataclass(frozen=True)
class Footprint:
    """What one call allocated, in bytes of tensor storage."""

    peak_bytes: int  # live bytes at their peak, the returned tensors included
    workspace_bytes: int  # live bytes at their peak, the returned tensors left out
    output_bytes: int  # storages the call created and returned (a graph keeps them)
    allocated_bytes: int  # every new storage summed, frees ignored
    allocations: int


def _storages(values) -> list[torch.UntypedStorage]:
    return [t.untyped_storage() for t in tree_leaves(values) if isinstance(t, torch.Tensor)]


class LiveBytes(TorchDispatchMode):
    """Events (storage serial, +bytes at creation / -bytes at death) of one traced call."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[int, int]] = []
        self._serial: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._refs: dict[int, weakref.ref] = {}
        self._count = itertools.count()
        self.active = False

    def __enter__(self):
        self.active = True
        return super().__enter__()

    def __exit__(self, *exc):
        self.active = False
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {id(s) for s in _storages((args, kwargs))}
        for st in _storages(out):
            if id(st) in inputs or st in self._serial:
                continue  # a view or an in-place result, or a storage already counted
            self._track(st)
        return out

    def _track(self, st: torch.UntypedStorage) -> None:
        serial = next(self._count)
        size = st.nbytes()
        self._serial[st] = serial
        self.events.append((serial, size))
        self._refs[serial] = weakref.ref(st, lambda _r, s=serial, n=size: self._died(s, n))

    def _died(self, serial: int, size: int) -> None:
        self._refs.pop(serial, None)
        if self.active:
            self.events.append((serial, -size))

    def serials(self, values) -> set[int]:
        """Serials of the counted storages behind `values` (a tensor or a pytree of them)."""
        return {self._serial[st] for st in _storages(values) if st in self._serial}

    def footprint(self, outputs) -> Footprint:
        kept = self.serials(outputs)
        live = live_other = peak = peak_other = allocated = count = 0
        sizes: dict[int, int] = {}
        for serial, delta in self.events:
            live += delta
            if serial not in kept:
                live_other += delta
            if delta > 0:
                allocated += delta
                count += 1
                sizes[serial] = delta
            peak = max(peak, live)
            peak_other = max(peak_other, live_other)
        return Footprint(
            peak_bytes=peak,
            workspace_bytes=peak_other,
            output_bytes=sum(sizes[s] for s in kept),
            allocated_bytes=allocated,
            allocations=count,
        )


def trace_call(fn: Callable, *args, **kwargs) -> tuple[object, Footprint]:
    """Run fn(*args, **kwargs) under a fresh LiveBytes; returns (its result, its footprint)."""
    tracker = LiveBytes()
    with tracker:
        out = fn(*args, **kwargs)
    return out, tracker.footprint(out)
