"""The CUDA recorder's streams: one side stream and one capture stream per device, reused.

CPU tests drive `RecorderStreams` with a fake stream factory (the seam the recorder's streams
come from); tests marked `gpu` record real graphs and read the allocator's ordinary pool, where
a stream new to cuBLAS would leave a workspace per recording.
"""

from __future__ import annotations

import pytest
import torch

from engine.recorders import (
    STREAMS,
    RecorderStreams,
    cuda_graph_recorder,
    eager_recorder,
    ordinary_pool_bytes,
    warm_library_state,
)


class FakeStream:
    def __init__(self, device: torch.device) -> None:
        self.device = device


def test_two_recordings_on_one_device_make_one_side_and_one_capture_stream():
    made = []
    streams = RecorderStreams(lambda device: made.append(device) or FakeStream(device))
    cuda0 = torch.device("cuda:0")
    # What two recordings ask for: the side stream, then the capture stream, twice.
    first = (streams.get(cuda0, "side"), streams.get(cuda0, "capture"))
    second = (streams.get("cuda:0", "side"), streams.get(cuda0, "capture"))
    assert first[0] is second[0] and first[1] is second[1]
    assert first[0] is not first[1]
    assert made == [cuda0, cuda0]


def test_each_device_has_its_own_streams():
    streams = RecorderStreams(FakeStream)
    one, two = streams.get("cuda:0", "side"), streams.get("cuda:1", "side")
    assert (one.device, two.device) == (torch.device("cuda:0"), torch.device("cuda:1"))
    assert len(streams.made) == 2


def test_a_recording_names_its_recorder():
    x = torch.ones(2, 3)
    recording = eager_recorder(lambda t: t * 2, (x,))
    assert recording.recorder == "eager_recorder"


# -- real CUDA graphs -------------------------------------------------------------------------


def _matmul_step(weight: torch.Tensor):
    def step(x: torch.Tensor) -> torch.Tensor:
        return x @ weight  # a cuBLAS product: its workspace is per (handle, stream)

    return step


@pytest.mark.gpu
def test_recordings_reuse_the_devices_streams_and_leave_no_workspace_each():
    device = torch.device("cuda", torch.cuda.current_device())
    weight = torch.randn(256, 256, device=device)
    step = _matmul_step(weight)
    x = torch.randn(8, 256, device=device)
    warm_library_state(device)
    torch.cuda.synchronize(device)
    before = ordinary_pool_bytes(device)
    pool = torch.cuda.graph_pool_handle()
    output = torch.empty(8, 256, device=device)
    recordings = [cuda_graph_recorder(step, (x,), pool, output) for _ in range(4)]
    torch.cuda.synchronize(device)
    # A fresh stream per recording would leave a cuBLAS workspace (32 MiB on Hopper, MiBs
    # elsewhere) in the ordinary pool per graph; reused, warmed streams leave nothing there.
    assert ordinary_pool_bytes(device) - before < 2**20
    assert {k for k in STREAMS.made if k[0] == device.index} == {
        (device.index, "side"),
        (device.index, "capture"),
    }
    recordings[-1].replay()
    torch.testing.assert_close(output, x @ weight)


@pytest.mark.gpu
def test_a_captured_list_records_nothing_outside_its_pool():
    from engine.engine import Engine

    engine = Engine.from_checkpoint(
        "tiny",
        max_batch_size=4,
        max_model_len=64,
        dtype="float32",
        device="cuda",
        bucket_decode=True,
        width_multiple=32,
        persist_inputs=True,
        capture_decode=True,
    )
    stats = engine.capture()
    assert stats.library_bytes == 0
    assert [s.library_bytes for s in stats.shapes] == [0] * stats.count
    assert {s.recorder for s in stats.shapes} == {"cuda_graph_recorder"}
