"""Run one small graph (a feed-forward block) on every device pyggml finds and compare with the numpy reference.

    python examples/hello_graph.py
"""

from __future__ import annotations

import sys

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
from pyggml.backend import devices
from pyggml.backend.protocol import Device
from pyggml.errors import PyGGMLError


def run_on(device: Device, x_val: np.ndarray, w_val: np.ndarray) -> np.ndarray:
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(gg.F32, 64, 32, name="w")
    alloc_ctx_tensors(weights, device.buffer_type())
    w.set(w_val)
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, 64, 8, name="x").set_input()
        y = ops.soft_max(ops.mul_mat(w, ops.rms_norm(x)), scale=0.5).set_name("y")
        graph = gg.build_graph(y)
    galloc = GraphAllocator(device.buffer_type())
    galloc.reserve(graph)
    galloc.alloc_graph(graph)
    x.set(x_val)
    device.init_backend().graph_compute(graph)
    return y.numpy()


def main() -> int:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 64), dtype=np.float32), rng.standard_normal((32, 64), dtype=np.float32)
    ref = None
    status = 0
    for dev in sorted(devices(), key=lambda d: d.name != "numpy"):
        try:
            out = run_on(dev, x, w)
        except PyGGMLError as e:
            print(f"{dev.name:<10} FAILED: {e}")
            status = 1
            continue
        if ref is None:
            ref = out
        err = float(np.sum((out - ref) ** 2) / np.sum(ref**2))
        print(f"{dev.name:<10} {dev.description[:50]:<50} nmse vs numpy = {err:.2e}")
        status |= err > 1e-6
    return status


if __name__ == "__main__":
    sys.exit(main())
