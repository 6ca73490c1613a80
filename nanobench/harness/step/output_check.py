"""Did a knob change the step's output? Each step's top logits, held against the plain side's.

What it is: `fingerprint(out)` (a step's output as what can be compared across processes: per
row, its argmax token and its TOP_K largest values, in float; None for an output that is not a
tensor), `tolerance(dtype)` (the relative error two compiled versions of one step may differ by
in that dtype) and `output_change(plain, tried, dtype)` (the first step where they differ by
more, in one line; "" when they agree).
What it is not: a numerical test of a kernel (the kernels' own tests) or of the engine against
transformers (`tests/test_parity.py`): it compares two sides of one run.
Invariant: steps are compared up to and including the first whose tokens differ (after it the
inputs differ, so nothing more can be said); a token that flipped on a near tie, its values
within tolerance, is not a change.
"""

from __future__ import annotations

TOP_K = 8
# Relative to the step's largest |logit|: a float32 step reassociated by another fusion differs
# by ~1e-6 of it; bf16 keeps 8 bits of mantissa (eps 7.8e-3), and errors add over the layers.
TOLERANCE = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 5e-2}


def tolerance(dtype: str) -> float:
    """The relative difference two compiled versions of one step may show: by the dtype's eps."""
    return TOLERANCE.get(dtype, TOLERANCE["bfloat16"])


def fingerprint(out) -> list[list[float]] | None:
    """One step's output, comparable across processes: per row (the last dim is the values),
    its argmax token then its TOP_K largest values."""
    if not hasattr(out, "topk") or out.dim() == 0 or not out.is_floating_point():
        return None
    import torch

    rows = out.detach().float().reshape(-1, out.shape[-1])  # (B, V)
    top = rows.topk(min(TOP_K, rows.shape[-1]), dim=-1).values  # (B, k)
    token = rows.argmax(-1, keepdim=True).float()  # (B, 1)
    return [[round(v, 6) for v in r] for r in torch.cat([token, top], -1).tolist()]


def output_change(plain: list | None, tried: list | None, dtype: str, base: str = "plain") -> str:
    """The first step where the tried side's output left the `base` side's (plain's, or the
    before environment's) by more than the dtype's tolerance, in one line; "" when they agree
    (or either side has no output)."""
    if not plain or not tried:
        return ""
    tol = tolerance(dtype)
    for step, (a, b) in enumerate(zip(plain, tried), start=1):
        if a is None or b is None:
            return ""
        if [len(r) for r in a] != [len(r) for r in b]:
            return f"output changed: step {step}'s output is another shape than {base}'s"
        scale = max(max(abs(v) for r in a for v in r[1:]), 1e-12)
        flipped = False
        for row, (ra, rb) in enumerate(zip(a, b)):
            worst = max(abs(x - y) for x, y in zip(ra[1:], rb[1:]))
            if worst > tol * scale:
                return (f"output changed: step {step} row {row}'s top logits differ by "
                        f"{worst:.3g} (tolerance {tol * scale:.3g}, {tol:g} of the largest, "
                        f"{dtype})")  # fmt: skip
            flipped = flipped or ra[0] != rb[0]
        if flipped:
            return ""  # a near tie flipped a token: after it the steps' inputs differ
    return ""
