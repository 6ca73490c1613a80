"""Memory of a decode step: what it holds, what its capture pool must hold, what it reserves.

What it is: `target_memory` (the user's own step, `--target`, priced per capture size on the
meta device) and `reserved` (the CUDA caching allocator's rounding and segments replayed on a
traced allocation sequence). The engine's own tracer stays in `nanobench.memory_trace` and
`nanobench.capture_memory`.
What it is not: a device probe; nothing here allocates real memory for the priced step.
Invariant: importing the package imports no torch.
"""
