"""The custom-op placement scenario every device plugin runs: a graph MUL -> MAP_CUSTOM1 -> ADD over [device,
host] under the scheduler; the device refuses the custom node (its callable needs host memory), so the
scheduler places it on the host backend, the MUL before it stays on the device, and the result is right."""

from __future__ import annotations

from typing import Any

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.backend.protocol import Backend, Device
from pyggml.backend.sched import Scheduler
from pyggml_testing.sched import inp, weight


def times_three(dst: Any, a: Any, ith: int, nth: int, userdata: Any) -> None:
    """Rows split between the tasks, as ggml's custom ops split work."""
    rows, src = dst.reshape(-1, dst.shape[-1]), a.reshape(-1, a.shape[-1])
    for r in range(ith, rows.shape[0], nth):
        rows[r] = src[r] * 3.0


def run_custom_placement(device: Device, host: Backend) -> None:
    """Assert the scenario on `device` with `host` (a cpu or numpy backend) as the scheduler's last backend: a
    weight in the device's memory pulls the MUL (and the ADD) there; the custom node between them goes to host."""
    w = weight(device.buffer_type(), 16, 4)  # ones
    a = inp(16, 4, name="a")
    x = ops.mul(a, w)
    y = ops.map_custom1(x, times_three)
    y.name = "custom"
    z = ops.add(y, w)
    graph = gg.build_graph(z)
    dev_backend = device.init_backend()
    assert not device.supports_op(y), f"{device.name} claims a custom op"
    s = Scheduler([dev_backend, host])
    s.alloc_graph(graph)
    va = np.arange(64, dtype=np.float32).reshape(4, 16) / 8
    a.set(va)
    s.graph_compute(graph)
    assert s.get_tensor_backend(y) is host
    assert s.get_tensor_backend(x) is dev_backend
    np.testing.assert_allclose(z.numpy(), va * 3 + 1, rtol=1e-6)
