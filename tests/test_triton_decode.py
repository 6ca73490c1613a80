"""The Triton paged decode kernel against the plain-torch oracle, its input guards, and its op.

The CPU tests are marked `interpreter`: they run under TRITON_INTERPRET=1, which conftest sets
on a machine without CUDA and never on one with it; the `gpu` test compiles for real.
"""

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernels.ops import paged_decode_op
from kernels.reference import KernelInputError, paged_attention_batched_reference
from kernels.triton_decode import paged_attention_triton

REPO = Path(__file__).resolve().parents[1]
# Tolerances against an fp32 oracle on the same (rounded) inputs; bf16/fp16 pay for the output
# rounding and for rounding the softmax weights to the K/V dtype before the P @ V product.
ATOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 5e-3}
MAX_MODEL_LEN = 80


@dataclass
class Case:
    q: torch.Tensor  # (B, H, D)
    k_pool: torch.Tensor  # (S, Hkv, D)
    v_pool: torch.Tensor  # (S, Hkv, D)
    slot_table: torch.Tensor  # (R, L)
    context_lens: torch.Tensor  # (B,)


def lengths_for(rows: int, block_size: int) -> list[int]:
    """Ragged lengths: a padded row, one token, whole blocks, ends mid-block, several tiles."""
    base = [45, 0, 70, 1, 2 * block_size, block_size + 3, 64, 17, 31]
    return base[:rows]


def make_case(
    rows: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    block_size: int,
    dtype: torch.dtype,
    *,
    index_dtype: torch.dtype = torch.int64,
    pool_view: bool = False,
    seed: int = 0,
    device: str = "cpu",
) -> Case:
    """Pools of random values with slots handed out block-wise from a shuffled block list,
    the way the engine's block allocator does; unwritten table entries hold the sink slot."""
    gen = torch.Generator().manual_seed(seed)
    lens = lengths_for(rows, block_size)
    needed = sum(math.ceil(n / block_size) for n in lens)
    num_blocks = needed + 3
    S = num_blocks * block_size + 1
    sink = S - 1

    if pool_view:
        # A per-layer slice of a stacked cache: the pools are strided views, not dense tensors.
        kv = torch.randn(S, 2, kv_heads, head_dim, generator=gen)  # (S, 2, Hkv, D)
        kv = kv.to(device=device, dtype=dtype)
        k_pool, v_pool = kv[:, 0], kv[:, 1]  # (S, Hkv, D)
    else:
        k_pool = torch.randn(S, kv_heads, head_dim, generator=gen).to(device, dtype)  # (S, Hkv, D)
        v_pool = torch.randn(S, kv_heads, head_dim, generator=gen).to(device, dtype)  # (S, Hkv, D)
    q = torch.randn(rows, heads, head_dim, generator=gen).to(device, dtype)  # (B, H, D)

    # Two spare table rows past the batch: the kernel must use only the first B.
    table = torch.full((rows + 2, MAX_MODEL_LEN), sink, dtype=torch.int64)  # (R, L)
    free = torch.randperm(num_blocks, generator=gen).tolist()
    for row, n in enumerate(lens):
        for p in range(0, n, block_size):
            block = free.pop()
            span = min(block_size, n - p)
            table[row, p : p + span] = block * block_size + torch.arange(span)
    lens_t = torch.tensor(lens, dtype=index_dtype)  # (B,)
    return Case(q, k_pool, v_pool, table.to(device, index_dtype), lens_t.to(device))


def oracle(case: Case, scale: float | None, dtype: torch.dtype) -> torch.Tensor:
    """The reference on the case's values in `dtype`, over the table's first W columns."""
    B = case.q.shape[0]
    W = max(1, int(case.context_lens.max()))
    return paged_attention_batched_reference(
        case.q.to(dtype),
        case.k_pool.to(dtype),
        case.v_pool.to(dtype),
        case.slot_table[:B, :W].long(),  # (B, W)
        case.context_lens.clamp(min=1),  # padded rows give garbage here; they are not compared
        scale=scale,
        validated=True,
    )  # (B, H, D)


F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
I32, I64 = torch.int32, torch.int64
# Each axis value at least once, not the cartesian product: the interpreter is slow.
GRID = [
    # rows, H, Hkv, D, block, dtype, table/lens dtype, pool view, scale
    (1, 4, 4, 64, 16, F32, I64, False, None),
    (3, 8, 4, 128, 8, BF16, I64, False, None),
    (5, 8, 2, 64, 32, F32, I32, False, 0.3),
    (9, 8, 1, 128, 16, BF16, I64, True, None),
    (7, 16, 2, 128, 32, F32, I64, True, None),
    (4, 4, 1, 64, 8, BF16, I32, False, 0.2),
    (6, 2, 2, 128, 16, F32, I64, False, None),
    (2, 4, 2, 64, 32, F16, I64, False, None),
]


def _grid_id(c) -> str:
    rows, H, Hkv, D, block, dtype, index_dtype, pool_view, scale = c
    name = f"b{rows}-g{H // Hkv}-bs{block}-d{D}-{str(dtype).removeprefix('torch.')}"
    name += "-i32" if index_dtype == I32 else ""
    name += "-view" if pool_view else ""
    return name + (f"-scale{scale}" if scale is not None else "")


@pytest.mark.interpreter
@pytest.mark.parametrize(
    "rows,H,Hkv,D,block,dtype,index_dtype,pool_view,scale", GRID, ids=[_grid_id(c) for c in GRID]
)
def test_matches_reference(rows, H, Hkv, D, block, dtype, index_dtype, pool_view, scale, request):
    case = make_case(rows, H, Hkv, D, block, dtype, index_dtype=index_dtype, pool_view=pool_view)
    # Poisoned: any element the kernel skips stays NaN and fails below.
    out = torch.full(case.q.shape, float("nan"), dtype=dtype)  # (B, H, D)
    got = paged_attention_triton(
        case.q, case.k_pool, case.v_pool, case.slot_table, case.context_lens, scale=scale, out=out
    )  # (B, H, D)
    assert got is out
    assert not torch.isnan(out).any(), "the kernel left elements of the output unwritten"

    live = case.context_lens > 0  # (B,)
    assert (out[~live] == 0).all(), "a padded row (context_lens == 0) must be exactly zero"

    want = oracle(case, scale, torch.float32)[live]  # (live rows, H, D)
    err = (out[live].float() - want).abs()
    line = f"[{request.node.callspec.id}] max_abs_err={err.max():.3e} mean_abs_err={err.mean():.3e}"
    if dtype != torch.float32:
        # For comparison: how far the oracle itself drifts when run natively in this dtype.
        native_err = (oracle(case, scale, dtype)[live].float() - want).abs()
        line += f" (reference in {dtype}: max {native_err.max():.3e})"
    print(line)
    torch.testing.assert_close(out[live].float(), want, atol=ATOL[dtype], rtol=0)


@pytest.mark.interpreter
def test_default_out_is_allocated_and_matches():
    case = make_case(2, 4, 2, 64, 16, torch.float32, seed=1)
    got = paged_attention_triton(
        case.q, case.k_pool, case.v_pool, case.slot_table, case.context_lens
    )  # (B, H, D)
    live = case.context_lens > 0
    torch.testing.assert_close(
        got[live], oracle(case, None, torch.float32)[live], atol=1e-4, rtol=0
    )
    assert (got[~live] == 0).all()


def _valid_args() -> dict:
    case = make_case(2, 4, 2, 64, 16, torch.float32, seed=2)
    return dict(
        q=case.q,
        k_pool=case.k_pool,
        v_pool=case.v_pool,
        slot_table=case.slot_table,
        context_lens=case.context_lens,
    )


def _head_dim_48(a):
    S, Hkv, _ = a["k_pool"].shape
    a["q"] = torch.randn(a["q"].shape[0], a["q"].shape[1], 48)  # (B, H, D)
    a["k_pool"] = torch.randn(S, Hkv, 48)  # (S, Hkv, D)
    a["v_pool"] = torch.randn(S, Hkv, 48)  # (S, Hkv, D)


def _non_contiguous_q(a):
    a["q"] = a["q"].transpose(0, 1).contiguous().transpose(0, 1)  # (B, H, D), stride (D, B*D, 1)


def _strided_head_dim(a):
    S, Hkv, D = a["k_pool"].shape
    a["k_pool"] = torch.randn(S, Hkv, 2 * D)[..., ::2]  # (S, Hkv, D), stride 2 on D


BAD_INPUTS = [
    pytest.param(lambda a: a.update(q=a["q"].double()), "q: dtype", id="q-fp64"),
    pytest.param(lambda a: a.update(k_pool=a["k_pool"].bfloat16()), "k_pool: dtype", id="k-dtype"),
    pytest.param(
        lambda a: a.update(slot_table=a["slot_table"].float()),
        "slot_table: dtype",
        id="table-float",
    ),
    pytest.param(
        lambda a: a.update(context_lens=a["context_lens"].float()),
        "context_lens: dtype",
        id="lens-float",
    ),
    pytest.param(_head_dim_48, "q: head_dim 48", id="head-dim-48"),
    pytest.param(
        lambda a: a.update(q=torch.randn(2, 5, 64)), "k_pool: 2 kv heads", id="h-not-divisible"
    ),
    pytest.param(_non_contiguous_q, "q: must be contiguous", id="q-non-contiguous"),
    pytest.param(_strided_head_dim, "k_pool: head_dim must be unit-stride", id="k-strided"),
    pytest.param(lambda a: a.update(q=a["q"][0]), r"q: expected \(B, H, D\)", id="q-2d"),
    pytest.param(lambda a: a.update(v_pool=a["v_pool"][:-1]), "v_pool: shape", id="v-shape"),
    pytest.param(
        lambda a: a.update(slot_table=a["slot_table"][:1]), "slot_table: 1 rows", id="table-short"
    ),
    pytest.param(
        lambda a: a.update(context_lens=a["context_lens"][:1]),
        "context_lens: expected shape",
        id="lens-shape",
    ),
    pytest.param(
        lambda a: a.update(out=torch.empty(2, 4, 64, dtype=torch.float16)),
        "out: expected",
        id="out-dtype",
    ),
]


@pytest.mark.interpreter
@pytest.mark.parametrize("mutate,match", BAD_INPUTS)
def test_rejects_bad_inputs(mutate, match):
    args = _valid_args()
    mutate(args)
    with pytest.raises(KernelInputError, match=f"^{match}"):
        paged_attention_triton(**args)


def test_rejects_cpu_without_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(KernelInputError, match="^q: on cpu"):
        paged_attention_triton(**_valid_args())


def test_import_is_lazy():
    """Importing the kernel and op modules neither imports Triton nor registers the op."""
    code = (
        "import sys, torch, kernels.triton_decode, kernels.ops\n"
        "assert 'triton' not in sys.modules, 'triton imported'\n"
        "assert not hasattr(torch.ops.nanobench, 'paged_decode'), 'op registered'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


@pytest.mark.interpreter
def test_custom_op_traces_as_one_graph():
    op = paged_decode_op()
    assert paged_decode_op() is op
    case = make_case(3, 8, 2, 64, 16, torch.float32, seed=3)

    def step(q, k_pool, v_pool, slot_table, context_lens):
        attn = op(q * 2.0, k_pool, v_pool, slot_table, context_lens, 0.125)  # (B, H, D)
        return attn.sum(-1) + 1.0  # (B, H)

    args = (case.q, case.k_pool, case.v_pool, case.slot_table, case.context_lens)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(step)(*args)
    assert explanation.graph_count == 1, explanation
    assert explanation.graph_break_count == 0, explanation.break_reasons

    direct = paged_attention_triton(
        case.q * 2.0, case.k_pool, case.v_pool, case.slot_table, case.context_lens, scale=0.125
    )  # (B, H, D)
    torch.testing.assert_close(step(*args), direct.sum(-1) + 1.0)
    torch.testing.assert_close(op(*args), paged_attention_triton(*args))


@pytest.mark.interpreter
def test_custom_op_passes_opcheck():
    """Schema, fake-tensor and AOT-dispatch consistency of the op against its real kernel."""
    case = make_case(3, 8, 2, 64, 16, torch.float32, seed=4)
    args = (case.q, case.k_pool, case.v_pool, case.slot_table, case.context_lens, None)
    torch.library.opcheck(paged_decode_op(), args)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_reference_on_cuda(dtype):
    for rows, H, Hkv, D, block in [(9, 32, 8, 128, 16), (5, 8, 1, 64, 32), (3, 16, 16, 256, 8)]:
        case = make_case(rows, H, Hkv, D, block, dtype, pool_view=rows == 5, device="cuda")
        out = torch.full(case.q.shape, float("nan"), dtype=dtype, device="cuda")  # (B, H, D)
        args = (case.q, case.k_pool, case.v_pool, case.slot_table, case.context_lens)
        paged_attention_triton(*args, out=out)  # warm-up: compiles
        torch.cuda.synchronize()
        out.fill_(float("nan"))
        # The launcher must not read a device value on the host.
        torch.cuda.set_sync_debug_mode("error")
        try:
            paged_attention_triton(*args, out=out)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        live = case.context_lens > 0
        assert not torch.isnan(out).any()
        assert (out[~live] == 0).all()
        want = oracle(case, None, torch.float32)[live]
        torch.testing.assert_close(out[live].float(), want, atol=ATOL[dtype], rtol=0)
