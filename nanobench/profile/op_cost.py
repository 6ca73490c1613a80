"""What one op costs by its shapes: bytes and flops a call, and its floor at probed peaks.

What it is: pure functions of an op's input shapes and dtypes as torch.profiler records them
(`record_shapes=True`): GEMMs (mm, addmm, bmm, baddbmm) and scaled-dot-product attention, each
formula in one line; `op_cost` picks one by the op's name; `floor_ms` is a step's least time for
a kernel at a bandwidth and a GEMM rate.
What it is not: the profiler, the attribution or the peaks' probe (`decode.roofline`).
Invariant: a figure is said only where the shapes say it exactly; otherwise None, never a guess.
"""

from __future__ import annotations

from math import prod

ITEMSIZE = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "half": 2}
ITEMSIZE |= {"float16": 2, "c10::BFloat16": 2, "bfloat16": 2, "int": 4, "int32": 4, "short": 2}
ITEMSIZE |= {"long": 8, "long int": 8, "int64": 8, "signed char": 1, "unsigned char": 1, "bool": 1}


def mm_flops(m: int, k: int, n: int) -> int:
    """2·M·K·N."""
    return 2 * m * k * n


def mm_bytes(m: int, k: int, n: int, itemsize: int) -> int:
    """(M·K + K·N + M·N)·itemsize: both operands read, the product written once."""
    return (m * k + k * n + m * n) * itemsize


def addmm_flops(m: int, k: int, n: int) -> int:
    """2·M·K·N + M·N: the product, then the bias added once to each output element."""
    return mm_flops(m, k, n) + m * n


def addmm_bytes(bias: int, m: int, k: int, n: int, itemsize: int) -> int:
    """(bias + M·K + K·N + M·N)·itemsize, `bias` its element count."""
    return mm_bytes(m, k, n, itemsize) + bias * itemsize


def bmm_flops(b: int, m: int, k: int, n: int) -> int:
    """2·B·M·K·N."""
    return b * mm_flops(m, k, n)


def bmm_bytes(b: int, m: int, k: int, n: int, itemsize: int) -> int:
    """B·(M·K + K·N + M·N)·itemsize."""
    return b * mm_bytes(m, k, n, itemsize)


def baddbmm_flops(b: int, m: int, k: int, n: int) -> int:
    """2·B·M·K·N + B·M·N: the batched product, then the input added once to each output element."""
    return bmm_flops(b, m, k, n) + b * m * n


def baddbmm_bytes(added: int, b: int, m: int, k: int, n: int, itemsize: int) -> int:
    """(added + B·(M·K + K·N + M·N))·itemsize, `added` the first input's element count."""
    return bmm_bytes(b, m, k, n, itemsize) + added * itemsize


def sdpa_flops(b: int, h: int, length: int, s: int, d: int) -> int:
    """4·B·H·L·S·D: Q·Kᵀ and P·V, 2·B·H·L·S·D each (no causal discount, no softmax)."""
    return 4 * b * h * length * s * d


def sdpa_bytes(q: int, k: int, v: int, out: int, itemsize: int) -> int:
    """(q + k + v + out)·itemsize, each an element count; the output is B·H·L·Dv."""
    return (q + k + v + out) * itemsize


def floor_ms(calls: float, nbytes: int | None, flops: int | None, gbs: float, gflops: float):
    """calls·max(bytes/bw, flops/rate)·1e3: a step's least ms at the peaks; None knowing neither."""
    bounds = [nbytes / (gbs * 1e9)] if nbytes is not None else []
    bounds += [flops / (gflops * 1e9)] if flops is not None else []
    return calls * max(bounds) * 1e3 if bounds else None


def op_cost(name: str, shapes: tuple, dtypes: tuple) -> tuple[int | None, int | None]:
    """(bytes, flops) a call from an op's shapes, None unsaid; bytes need the first dtype's size."""
    dims = [tuple(s) if isinstance(s, (tuple, list)) else () for s in shapes]
    size = ITEMSIZE.get(dtypes[0]) if dtypes else None
    if name == "aten::mm" and len(dims) >= 2 and _matmul(dims[0], dims[1], 2):
        (m, k), n = dims[0], dims[1][1]
        return (mm_bytes(m, k, n, size) if size else None), mm_flops(m, k, n)
    if name == "aten::addmm" and len(dims) >= 3 and _matmul(dims[1], dims[2], 2):
        (m, k), n = dims[1], dims[2][1]
        return (addmm_bytes(prod(dims[0]), m, k, n, size) if size else None), addmm_flops(m, k, n)
    if name == "aten::bmm" and len(dims) >= 2 and _matmul(dims[0], dims[1], 3):
        (b, m, k), n = dims[0], dims[1][2]
        return (bmm_bytes(b, m, k, n, size) if size else None), bmm_flops(b, m, k, n)
    if name == "aten::baddbmm" and len(dims) >= 3 and _matmul(dims[1], dims[2], 3):
        (b, m, k), n = dims[1], dims[2][2]
        nbytes = baddbmm_bytes(prod(dims[0]), b, m, k, n, size) if size else None
        return nbytes, baddbmm_flops(b, m, k, n)
    if name.startswith("aten::_scaled_dot_product_") and len(dims) >= 3:
        q, k, v = dims[:3]
        if len(q) == len(k) == len(v) == 4 and q[0] == k[0] and q[3] == k[3] and k[2] == v[2]:
            out = q[0] * q[1] * q[2] * v[3]
            nbytes = sdpa_bytes(prod(q), prod(k), prod(v), out, size) if size else None
            return nbytes, sdpa_flops(q[0], q[1], q[2], k[2], q[3])
    return None, None


def _matmul(a: tuple, b: tuple, rank: int) -> bool:
    """Whether a @ b is a plain (batched) matmul of this rank: inner sizes and batches agree."""
    return len(a) == len(b) == rank and a[-1] == b[-2] and a[:-2] == b[:-2]
