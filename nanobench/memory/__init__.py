"""Memory of a decode step: what it holds, what its capture pool must hold, what it reserves.

What it is: `live_bytes` (the live-bytes tracker), `decode_workspace` (the engine's own decode
workspace, traced under fake tensors), `target_memory` (the user's own step, `--target`, priced
per capture size on the meta device) and `reserved` (the CUDA caching allocator's rounding
and segments replayed on a traced allocation sequence).
What it is not: a device probe; nothing here allocates real memory for the priced step.
Invariant: importing the package imports no torch.
"""
