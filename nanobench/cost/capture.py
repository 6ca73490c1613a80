"""What recording the decode step costs and holds: workspace bytes, pools, seconds.

What it is: the capture arithmetic. The reference read materialises a `[rows, heads, 1, width]`
score rectangle, so a recorded graph's workspace is that rectangle; a capture list either
shares one pool (sized by its largest shape: a max) or holds one per shape (a sum). Next to it,
what a step holds persistently (slot table, input buffers), what recording a list costs
(`capture_cost_s`) and adds to a start (`capture_startup_s`, per graph from a measured figure or
the model `record_s_per_graph` names), and the share of steps that replayed
(`capture_reuse_share`).
What it is not: a recorder (`engine.captured`) or a device memory probe.
Invariant: shared_pool_bytes <= private_pool_bytes for any list, with equality only for a
list of one; a shared pool does not grow with the list.
"""

from __future__ import annotations

from collections.abc import Iterable

INT64_BYTES = 8
# The persistent step inputs: token ids, positions, write slots, context lens.
STEP_INPUT_BUFFERS = 4


def _positive(name: str, value: float) -> None:
    if value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value}")


def score_cells(rows: int, heads: int, width: int) -> int:
    """rows * heads * 1 * width: the [rows, heads, 1, width] score rectangle of one decode read."""
    _positive("rows", rows)
    _positive("heads", heads)
    _positive("width", width)
    return rows * heads * 1 * width


def workspace_bytes(rows: int, heads: int, width: int, dtype_bytes: int) -> int:
    """score_cells(rows, heads, width) * dtype_bytes: the largest intermediate of one graph."""
    _positive("dtype_bytes", dtype_bytes)
    return score_cells(rows, heads, width) * dtype_bytes


def shared_pool_bytes(shapes: Iterable[tuple[int, int]], heads: int, dtype_bytes: int) -> int:
    """max(workspace_bytes(r, heads, w, dtype_bytes)) over the shapes; 0 for none."""
    return max((workspace_bytes(r, heads, w, dtype_bytes) for r, w in shapes), default=0)


def private_pool_bytes(shapes: Iterable[tuple[int, int]], heads: int, dtype_bytes: int) -> int:
    """sum(workspace_bytes(r, heads, w, dtype_bytes)) over the shapes."""
    return sum(workspace_bytes(r, heads, w, dtype_bytes) for r, w in shapes)


def pool_sharing_ratio(private_bytes: int, shared_bytes: int) -> float:
    """private_bytes / shared_bytes: what sharing one pool saves (not the list's length)."""
    if shared_bytes <= 0:
        raise ValueError(f"shared_bytes: expected a positive byte count, got {shared_bytes}")
    return private_bytes / shared_bytes


def slot_table_bytes(max_batch: int, max_model_len: int, dtype_bytes: int = INT64_BYTES) -> int:
    """max_batch * max_model_len * dtype_bytes: the persistent int64 slot table."""
    _positive("max_batch", max_batch)
    _positive("max_model_len", max_model_len)
    return max_batch * max_model_len * dtype_bytes


def input_buffer_bytes(
    max_batch: int, buffers: int = STEP_INPUT_BUFFERS, dtype_bytes: int = INT64_BYTES
) -> int:
    """buffers * max_batch * dtype_bytes: ids, positions, write slots and lens, int64 each."""
    _positive("max_batch", max_batch)
    return buffers * max_batch * dtype_bytes


def capture_cost_s(record_s_per_shape: Iterable[float]) -> float:
    """sum(record_s_per_shape): paid before serving when the list is captured up front."""
    values = list(record_s_per_shape)
    if any(v < 0 for v in values):
        raise ValueError(f"record_s_per_shape: expected non-negative seconds, got {values}")
    return float(sum(values))


# What recording one graph takes when nobody measured it, per recorder, with its source.
# CUDA: vLLM's log in vllm-project/vllm#11349 (2024-12-19, `vllm serve
# meta-llama/Llama-3.2-1B-Instruct`, one GPU): "Capturing CUDA graph shapes: 35/35 [00:13]",
# "Graph capturing finished in 14 secs": 14 s / 35 graphs, its warm-up runs per shape included.
CUDA_RECORD_S_PER_GRAPH = 14.0 / 35
CUDA_RECORD_SOURCE = (
    "model: 0.4 s per graph, vLLM capturing 35 graphs of Llama-3.2-1B in 14 s "
    "(vllm-project/vllm#11349's log)"
)
# CPU: `nanobench capture --up-front --run-lengths 8,128 --width-multiple 16` on the tiny preset,
# a 2-core box, 2 threads: eager_recorder's record_s_per_graph 0.0039-0.0053 s over 18 graphs a
# run. An eager forward of a larger model takes longer: measure it and pass the figure.
CPU_EAGER_RECORD_S_PER_GRAPH = 0.005
CPU_EAGER_RECORD_SOURCE = (
    "model: 0.005 s per graph, eager_recorder on the tiny preset (nanobench capture, 2 CPU cores)"
)
MEASURED_RECORD_SOURCE = "measured: --record-s-per-graph"


def record_s_per_graph(measured_s: float | None, device: str) -> tuple[float, str]:
    """(seconds to record one graph, where that figure comes from).

    The measured figure when one is given (positive), else the model for the device the list is
    recorded on: CUDA_RECORD_S_PER_GRAPH on cuda, CPU_EAGER_RECORD_S_PER_GRAPH on cpu.
    """
    if measured_s is not None:
        if not measured_s > 0:
            raise ValueError(f"measured_s: expected positive seconds, got {measured_s}")
        return measured_s, MEASURED_RECORD_SOURCE
    if device == "cuda":
        return CUDA_RECORD_S_PER_GRAPH, CUDA_RECORD_SOURCE
    if device == "cpu":
        return CPU_EAGER_RECORD_S_PER_GRAPH, CPU_EAGER_RECORD_SOURCE
    raise ValueError(f"device {device!r}: expected cpu or cuda")


def capture_startup_s(shapes: int, record_s_per_graph: float) -> float:
    """shapes * record_s_per_graph: the seconds recording a capture list adds to a start,
    every graph recorded up front, before the first request."""
    if shapes < 0:
        raise ValueError(f"shapes: expected a count of graphs (0 or more), got {shapes}")
    if not record_s_per_graph > 0:
        raise ValueError(f"record_s_per_graph: expected positive seconds, got {record_s_per_graph}")
    return shapes * record_s_per_graph


def capture_reuse_share(captures: int, steps: int) -> float:
    """1 - captures / steps: the share of steps that replayed rather than recorded."""
    if steps < 1:
        raise ValueError(f"steps: expected a positive integer, got {steps}")
    if not 0 <= captures <= steps:
        raise ValueError(f"captures: expected 0..{steps}, got {captures}")
    return 1.0 - captures / steps
