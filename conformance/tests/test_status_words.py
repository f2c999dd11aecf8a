"""Two backends (streams) of one device keep their out-of-range status apart (issue 34, item 4): each owns a core
`StatusWord`, so one backend's `synchronize` raises, and clears, only the errors of the work it queued. OpenCL0
(PoCL, where every backend of the device shares the device's one queue) and Vulkan0 (lavapipe); CUDA's check, on
its fake driver, is in plugins/cuda/tests/test_cuda_backend.py."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.backend.registry import get_device
from pyggml.context import Context
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph, build_graph
from pyggml_testing.on_device import place_graph


def _get_rows(dev: Device, ids: list[int]) -> tuple[Graph, object]:
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 8, 3, name="a")
    i = ctx.new_tensor("i32", len(ids), name="ids")
    out = ops.get_rows(a, i)
    out.set_name("rows")
    g = build_graph(out)
    buf = place_graph(g, dev.buffer_type())
    a.set(np.arange(24, dtype=np.float32).reshape(3, 8))
    i.set(np.array(ids, np.int32))
    return g, buf


@pytest.mark.parametrize("name", ["OpenCL0", "Vulkan0"])
def test_two_backends_of_one_device_keep_their_status_apart(name: str) -> None:
    try:
        dev = get_device(name)
    except PyGGMLError as e:
        pytest.skip(f"{name}: {e}")
    be1, be2 = dev.init_backend(), dev.init_backend()
    bad, _b1 = _get_rows(dev, [0, 7])
    good, _b2 = _get_rows(dev, [2, 1])
    try:
        be1.graph_compute_async(bad)
        be2.graph_compute(good)  # be1's error is not be2's: nothing raised, nothing cleared
        be2.synchronize()
        with pytest.raises(ComputeError, match=r"node 'rows' \(GET_ROWS.*outside 0\.\.2"):
            be1.synchronize()
        be1.synchronize()  # cleared: be1 goes on
        be1.graph_compute(good)
        with pytest.raises(ComputeError, match=r"GET_ROWS"):
            be2.graph_compute(bad)  # and the other way round
        be1.synchronize()
    finally:
        be1.free()
        be2.free()
