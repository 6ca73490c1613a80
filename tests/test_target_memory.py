"""The capture memory of the user's own step (issue 25 items 1-3), priced on the meta device.

Independent sources: hand counts of a gpt-fast-style model's weights and caches, the same
tracker over real tensors, the profiler's allocation events, and the engine's own traced
figures (`nanobench.memory.decode_workspace`, checked in test_capture_memory.py) for the engine run
through a factory.
"""

from __future__ import annotations

import json
import time

import pytest
import torch
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.gpu.memory_check import profiled_peak_bytes
from nanobench.harness.errors import BadInput
from nanobench.harness.step.targets import make_target
from nanobench.memory.decode_workspace import decode_memory
from nanobench.memory.target_memory import TargetListMemory, largest_fitting, size_memory
from reports.style import binary_bytes
from tests.corpus.memory_gptfast import LLAMA3_70B, TINY

GPTFAST = "tests/corpus/memory_gptfast.py"
ENGINE = "tests/corpus/memory_engine.py"
TOY = "tests/test_target_memory.py"


def gptfast_state_bytes(args, rows: int, cache_len: int, prompt_len: int, steps: int, nbytes):
    """Weights, K/V caches, freqs_cis, the causal mask and the token ids, counted by hand."""
    d, kv = args.head_dim, args.n_local_heads
    layer = args.dim * (args.n_head + 2 * kv) * d + args.dim * args.dim  # wqkv, wo
    layer += 3 * args.dim * args.intermediate_size + 2 * args.dim  # w1, w3, w2, two norms
    weights = 2 * args.vocab_size * args.dim + args.n_layer * layer + args.dim
    caches = args.n_layer * 2 * rows * kv * cache_len * d
    freqs = max(args.block_size, cache_len) * (d // 2) * 2
    mask_bytes = cache_len * cache_len  # bool
    ids_bytes = rows * (prompt_len + steps) * 8  # int64
    return (weights + caches + freqs) * nbytes + mask_bytes + ids_bytes


def test_state_is_the_factorys_bytes_by_hand_and_the_prefill_is_not_workspace():
    found, shared = size_memory(f"{GPTFAST}:tiny", rows=2, prompt_len=16, steps=8, dtype="float32")
    assert found.state_bytes == gptfast_state_bytes(TINY, 2, 24, 16, 8, 4) == 114_240
    assert not shared and found.outputs_bytes == 2 * 1 * TINY.vocab_size * 4  # (B, 1, V) fp32
    # The prefill over 16 tokens ran in the factory; a step over one token needs far less
    # than the state it reads, and nothing of the state is workspace.
    assert 0 < found.workspace_bytes < found.state_bytes / 4


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("rows", [1, 4])
def test_meta_agrees_exactly_with_the_tracker_over_real_tensors(rows, dtype):
    protocol = {"rows": rows, "prompt_len": 16, "steps": 8, "dtype": dtype}
    meta, _ = size_memory(f"{GPTFAST}:small", **protocol)
    real, _ = size_memory(f"{GPTFAST}:small", device="cpu", **protocol)
    for key in ("state_bytes", "workspace_bytes", "outputs_bytes", "peak_bytes", "allocations"):
        assert getattr(meta, key) == getattr(real, key), key


def test_the_profiler_sees_the_same_step_peak_within_ten_percent():
    real, _ = size_memory(
        f"{GPTFAST}:small", rows=4, prompt_len=16, steps=8, dtype="float32", device="cpu"
    )
    made = make_target(
        f"{GPTFAST}:small", rows=4, prompt_len=16, steps=8, device="cpu", dtype="float32"
    )
    args, kwargs = made.step_inputs(0)
    with torch.no_grad():
        profiled = profiled_peak_bytes(lambda: made.forward(*args, **kwargs))
    assert abs(profiled - real.peak_bytes) <= 0.10 * profiled, (profiled, real.peak_bytes)


def test_workspace_grows_with_rows_and_the_list_combines_as_captured():
    protocol = {"prompt_len": 16, "steps": 8, "dtype": "float32"}
    sizes = [size_memory(f"{GPTFAST}:small", rows=r, **protocol)[0] for r in (1, 2, 4)]
    work = [s.workspace_bytes for s in sizes]
    assert work[0] < work[1] < work[2]
    memory = TargetListMemory(tuple(sizes), shared_output=False)
    assert memory.shared_pool_bytes == work[2] and memory.private_pools_bytes == sum(work)
    assert memory.outputs_bytes == sum(s.outputs_bytes for s in sizes)
    assert memory.state_bytes == sizes[2].state_bytes
    assert memory.total_bytes == sizes[2].state_bytes + work[2] + memory.outputs_bytes
    shared = TargetListMemory(tuple(sizes), shared_output=True)
    assert shared.outputs_bytes == sizes[2].outputs_bytes
    # A prefix fits when its own state + pool + outputs does.
    two = TargetListMemory(tuple(sizes[:2]), False).total_bytes
    assert largest_fitting(memory, two) == (1, 2)
    assert largest_fitting(memory, two - 1) == (1,)


# -- toy targets: a step of views and in-place writes, a factory with a transient, refusals --


class InPlace:
    """A step that writes its cache in place and returns a view of it: it allocates nothing."""

    def __init__(self, *, rows, prompt_len, steps, device, dtype):
        self.cache = torch.zeros(rows, 64, device=device)  # (B, 64) fp32: 256 B a row
        scratch = torch.ones(rows, 4096, device=device)  # the factory's transient, freed
        self.cache += scratch[:, :64]
        del scratch
        self.forward = self.step

    def step(self, x):  # x (B, 64)
        self.cache.add_(x)
        return self.cache[:, :8].t()  # (8, B): a view of the state

    def step_inputs(self, step):
        return (torch.ones_like(self.cache),), {}


def in_place(*, rows, prompt_len, steps, device, dtype):
    return InPlace(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)


def test_views_and_in_place_writes_allocate_nothing_and_a_dead_transient_is_not_state():
    found, _ = size_memory(f"{TOY}:in_place", rows=3, prompt_len=1, steps=1, dtype="float32")
    assert found.state_bytes == 3 * 64 * 4  # the cache; the 48 KiB scratch died in the factory
    assert found.workspace_bytes == found.outputs_bytes == found.allocations == 0


class ItemStep:
    def __init__(self, *, rows, prompt_len, steps, device, dtype):
        self.w = torch.ones(4, device=device)
        self.forward = self.step

    def step(self, x):
        if x.sum().item() > 0:  # a host read of a value: meta tensors have none
            return x * 2
        return x

    def step_inputs(self, step):
        return (torch.ones(2, 4),), {}


def item_step(*, rows, prompt_len, steps, device, dtype):
    return ItemStep(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)


def opens_a_file(*, rows, prompt_len, steps, device, dtype):
    with open("/nonexistent/weights.safetensors", "rb") as f:
        return f.read()


def ignores_device(*, rows, prompt_len, steps, device, dtype):
    made = InPlace(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)
    made.forward = torch.nn.Linear(2, 2, device="cpu")
    return made


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("item_step", "the step (forward) cannot run on the meta device: "),
        ("opens_a_file", "the factory cannot run on the meta device: FileNotFoundError"),
        ("ignores_device", "the factory put weight on cpu, not on the device it was given"),
    ],
)
def test_a_step_that_cannot_run_on_meta_is_one_line_naming_the_call(factory, message):
    with pytest.raises(BadInput) as info:
        size_memory(f"{TOY}:{factory}", rows=2, prompt_len=1, steps=1, dtype="float32")
    text = str(info.value)
    assert message in text and "\n" not in text
    if factory == "item_step":
        assert f"{TOY}:" in text and "in step" in text and "reads a tensor's value" in text
    if factory == "opens_a_file":
        assert "in opens_a_file" in text and "it opens a file" in text


def test_the_cli_refuses_it_with_exit_2(tmp_path):
    args = ["pool-budget", "--target", f"{TOY}:item_step", "--capture-sizes", "1,2"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "reads a tensor's value" in lines[0]


class ShortCache:
    """A static cache of 256 positions, built whatever the prompt length (as a step sized by its
    own constant is): its step_inputs refuses a position past the cache, as a real one does."""

    POSITIONS = 256

    def __init__(self, *, rows, prompt_len, steps, device, dtype):
        self.cache = torch.zeros(rows, self.POSITIONS, device=device)  # (B, 256)
        self.prompt_len, self.device = prompt_len, device
        self.forward = self.step

    def step(self, input_pos):  # input_pos (1,)
        return self.cache[:, input_pos] * 2  # (B, 1)

    def step_inputs(self, step):
        at = self.prompt_len + step
        if at >= self.POSITIONS:
            raise IndexError(f"position {at} past the static cache ({self.POSITIONS})")
        return (torch.tensor([at], device=self.device),), {}


def short_cache(*, rows, prompt_len, steps, device, dtype):
    return ShortCache(rows=rows, prompt_len=prompt_len, steps=steps, device=device, dtype=dtype)


def test_a_cache_shorter_than_the_context_names_the_length_and_its_option(tmp_path):
    """pool-budget prices a full context (prompt_len = --max-model-len - 1, 8192 by default):
    past a 256-position cache, the line names that length and the option that sets it."""
    args = ["pool-budget", "--target", f"{TOY}:short_cache", "--capture-sizes", "1,2"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "IndexError: position 8191 past the static cache (256)" in lines[0]
    assert "built with prompt_len 8191" in lines[0] and "from --max-model-len 8192" in lines[0]
    assert "give a smaller --max-model-len" in lines[0]
    # The advice works: a context the cache holds prices.
    fits = CliRunner().invoke(app, [*args, "--max-model-len", "256", "--out", str(tmp_path)])
    assert fits.exit_code == 0, fits.output


# -- the engine through a factory, and the 70B acceptance case ----------------------------------


def test_the_engine_through_a_factory_equals_its_own_traced_figures():
    from tests.corpus.memory_engine import CONFIG

    for rows in (2, 8):
        found, _ = size_memory(f"{ENGINE}:engine", rows=rows, prompt_len=63, steps=1,
                               dtype="float32")  # fmt: skip
        own = decode_memory(CONFIG, "reference", "float32", rows, 64).at(rows, 64)
        assert found.workspace_bytes == own.workspace_bytes
        assert found.outputs_bytes == own.outputs_bytes == rows * CONFIG.vocab_size * 4
        assert found.peak_bytes == own.peak_bytes


def test_a_70b_gptfast_step_prices_under_a_minute_writing_nothing(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    out = tmp_path / "o"
    args = ["pool-budget", "--target", f"{GPTFAST}:llama3_70b", "--capture-sizes", "1,8,64,256"]
    args += ["--dtype", "bfloat16", "--device-memory", "141GiB", "--json", "--out", str(out)]
    # CPU seconds, not wall: pricing runs in this process (13 s of CPU in 14 s on a quiet 2-core
    # box), and beside a second suite the same call took 148 s of wall clock.
    started = time.process_time()
    result = CliRunner().invoke(app, args, env={"NANOBENCH_CACHE": str(cache)})
    cpu_s = time.process_time() - started
    assert result.exit_code == 0, result.output
    assert cpu_s < 60, f"pricing took {cpu_s:.1f} s of CPU"
    # Nothing written but the command's own CSV and figure (a real 70B would be 134 GiB).
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["o/pool-budget.csv", "o/pool-budget.png"]
    rows = json.loads(result.stdout)["rows"]
    sizes = [r for r in rows if r["table"] == "size"]
    assert [r["rows"] for r in sizes] == [1, 8, 64, 256]
    # Weights and caches by hand (prompt 8191 + one step, caches for 8192 tokens, bf16).
    hand = gptfast_state_bytes(LLAMA3_70B, 1, 8192, 8191, 1, 2)
    assert abs(sizes[0]["state_bytes"] - hand) <= 0.01 * hand
    work = [r["workspace_bytes"] for r in sizes]
    assert work[0] < work[1] < work[2] < work[3]
    # Reserved beside live: whole 2 MiB-multiple segments, at least the live peak.
    for r in sizes:
        assert r["reserved_bytes"] % (2 << 20) == 0 and r["reserved_bytes"] >= r["peak_bytes"]
    (fit,) = [r for r in rows if r["table"] == "fit"]
    assert fit["fits"] is False and fit["largest_fitting_sizes"] == []
    assert fit["shortfall_bytes"] == fit["need_bytes"] - fit["usable_bytes"] > 0
    assert fit["need_bytes"] == sizes[-1]["state_bytes"] + work[-1] + fit["outputs_bytes"]
    assert sizes[-1]["reserved_bytes"] <= fit["shared_pool_reserved_bytes"]
    assert fit["shared_pool_reserved_bytes"] <= fit["private_pools_reserved_bytes"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="records a CUDA graph")
def test_a_recorded_graphs_reserved_growth_sits_beside_the_priced_figures():
    from nanobench.gpu.capture import check_target_reserved

    found = [check_target_reserved(f"{GPTFAST}:small", rows) for rows in (8, 64)]
    for row in found:
        assert row["measured_reserved_bytes"] >= row["traced_peak_bytes"] > 0, row
        assert row["measured_reserved_bytes"] % (2 << 20) == 0, row
        assert row["model_reserved_bytes"] % (2 << 20) == 0, row
    assert found[0]["traced_workspace_bytes"] < found[1]["traced_workspace_bytes"]


def test_the_gpu_checks_target_rows_fail_in_one_line_without_a_device(monkeypatch):
    import nanobench.gpu.capture as gpu_capture
    import nanobench.gpu.check as gpu_check

    def refuse(spec, rows):
        raise RuntimeError(f"no CUDA for {rows} rows\nsecond line")

    monkeypatch.setattr(gpu_capture, "check_target_reserved", refuse)
    rows = list(gpu_check.check_target_memory())
    assert [r["ok"] for r in rows] == [False, False]
    assert [r["detail"] for r in rows] == [
        "RuntimeError: no CUDA for 8 rows",
        "RuntimeError: no CUDA for 64 rows",
    ]
    assert all(r["check"] == "target-memory" for r in rows)


def test_capture_target_prices_each_size_and_combines_them(tmp_path):
    args = ["capture", "--target", f"{GPTFAST}:small", "--capture-sizes", "1,4,16"]
    args += ["--capture-tokens", "128", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    sizes = [r for r in rows if r["table"] == "size"]
    (pool,) = [r for r in rows if r["table"] == "pool"]
    for r in sizes:
        own, _ = size_memory(f"{GPTFAST}:small", rows=r["rows"], prompt_len=127, steps=1,
                             dtype="float32")  # fmt: skip
        assert (r["state_bytes"], r["workspace_bytes"], r["outputs_bytes"]) == (
            own.state_bytes, own.workspace_bytes, own.outputs_bytes
        )  # fmt: skip
    work = [r["workspace_bytes"] for r in sizes]
    assert pool["shared_pool_bytes"] == max(work) and pool["private_pools_bytes"] == sum(work)
    assert pool["outputs_bytes"] == sum(r["outputs_bytes"] for r in sizes) == 21 * 1024
    assert pool["capture_bytes"] == max(work) + pool["outputs_bytes"]
    assert (tmp_path / "capture-target.csv").exists()
    table = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "Traceback" not in table.output
    assert "outputs 21.0 KiB (summed per graph)" in table.stdout


def test_pool_budget_target_table_shows_the_json_figures(tmp_path):
    args = ["pool-budget", "--target", f"{GPTFAST}:small", "--capture-sizes", "1,2,8"]
    args += ["--max-model-len", "128", "--device-memory", "1MiB", "--out", str(tmp_path)]
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    (fit,) = [r for r in doc["rows"] if r["table"] == "fit"]
    # 1 MiB x 0.9 holds the list up to 2 rows (669 KiB) but not to 8 (1.2 MiB).
    assert fit["fits"] is False and fit["largest_fitting_sizes"] == [1, 2]
    table = CliRunner().invoke(app, [*args, "--check"], env={"COLUMNS": "200"})
    assert table.exit_code == 1 and "Traceback" not in table.output
    assert f"need state + shared pool + outputs = {binary_bytes(fit['need_bytes'])}" in table.stdout
    assert "largest capture list that fits: 1,2" in table.stdout
    assert f"short by {binary_bytes(fit['shortfall_bytes'])}" in table.stdout


@pytest.mark.parametrize("rows", [1, 4])
def test_transformers_static_cache_prices_on_meta_as_on_real_tensors(rows):
    protocol = {"rows": rows, "prompt_len": 15, "steps": 1, "dtype": "float32"}
    meta, _ = size_memory("tests/corpus/memory_hf.py:static", **protocol)
    real, _ = size_memory("tests/corpus/memory_hf.py:static", device="cpu", **protocol)
    for key in ("state_bytes", "workspace_bytes", "outputs_bytes", "peak_bytes", "allocations"):
        assert getattr(meta, key) == getattr(real, key), key
    # By hand: embed and head 128 x 64, per layer q, o 64^2, k, v 64 x 32, MLP 3 x 64 x 96,
    # two norms, the final norm; the static cache 2 layers x K, V x rows x 2 heads x 16 x 16;
    # the token ids (rows, 16) int64; the rotary inv_freq and original_inv_freq (8 fp32 each).
    weights = 2 * 128 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 96 + 2 * 64) + 64
    cache = 2 * 2 * rows * 2 * 16 * 16
    assert meta.state_bytes == (weights + cache + 2 * 8) * 4 + rows * 16 * 8
    assert meta.outputs_bytes == rows * 128 * 4  # (B, 1, vocab) fp32 logits


def test_the_builtin_hf_static_target_is_refused_on_meta_with_the_remedy():
    from nanobench.harness.cli.validate import model_option

    directory, _ = model_option("tiny")
    with pytest.raises(BadInput) as info:
        size_memory("hf-static", rows=1, prompt_len=7, steps=1, dtype="float32",
                    model=str(directory))  # fmt: skip
    text = str(info.value)
    assert "the factory cannot run on the meta device" in text and "from_pretrained" in text
    assert "build the model from its config" in text and "\n" not in text
