"""Run one small graph (a feed-forward block) on every device pyggml finds and compare with the numpy reference.

    python examples/hello_graph.py              # every device
    python examples/hello_graph.py OpenCL0 cpu  # the named ones

The weight lives in the device's memory (allocated through its buffer type), so the scheduler runs the block
there; an op the device refuses (the blas device takes big matrix products only: RMS_NORM and SOFT_MAX go
elsewhere) runs on the numpy device, the scheduler's CPU fallback, which also holds the graph's input. Exit
status 1 when a device fails or disagrees with the reference.
"""

from __future__ import annotations

import sys

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import devices, get_device, init_backend
from pyggml.backend.protocol import Device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError

TOKENS = 32
"""Columns of the matrix product: the blas device takes products of at least 32 x 32 x 32 only."""
MAX_NMSE = 1e-6
"""Against the numpy run: float32 kernels over 64-element rows agree far closer than this."""


def run_on(device: Device, x_val: np.ndarray, w_val: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """y = soft_max(0.5 * w @ rms_norm(x)) on `device`; returns y and the backend of each split, in order."""
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(gg.F32, 64, 32, name="w")
    alloc_ctx_tensors(weights, device.buffer_type())
    w.set(w_val)
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, 64, TOKENS, name="x").set_input()
        y = ops.soft_max(ops.mul_mat(w, ops.rms_norm(x)), scale=0.5).set_name("y").set_output()
        graph = gg.build_graph(y)
    sched = Scheduler([device.init_backend(), init_backend("numpy")])
    sched.alloc_graph(graph)
    x.set(x_val)
    sched.graph_compute(graph)
    return y.numpy(), [sched.backends[s.backend_id].name for s in sched.splits]


def main(names: list[str]) -> int:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((TOKENS, 64), dtype=np.float32), rng.standard_normal((32, 64), dtype=np.float32)
    ref, _ = run_on(get_device("numpy"), x, w)
    status = 0
    for dev in [get_device(n) for n in names] if names else devices():
        try:
            out, splits = run_on(dev, x, w)
        except PyGGMLError as e:
            print(f"{dev.name:<10} FAILED: {e}")
            status = 1
            continue
        err = float(np.sum((out - ref) ** 2) / np.sum(ref**2))
        print(f"{dev.name:<10} {dev.description[:50]:<50} splits={'>'.join(splits):<18} nmse vs numpy = {err:.2e}")
        status |= err > MAX_NMSE
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
