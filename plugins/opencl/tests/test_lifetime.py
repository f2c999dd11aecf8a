"""Buffers used after free (issue 19, defect 6): compute, set and read raise AllocationError instead of aborting the
process; a free from another thread during a compute waits for the kernels; a second free does nothing."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.graph import build_graph
from pyggml_testing.buffers import check_free_during_compute
from pyggml_testing.on_device import place


def _graph(dev):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 512, 64, name="a")
    y = ops.mul_mat(a, a)
    g = build_graph(y)
    buf = place(ctx, dev.buffer_type())
    a.set(np.ones((64, 512), np.float32))
    return a, y, g, buf


def test_use_after_free_raises(dev, backend) -> None:  # type: ignore[no-untyped-def]
    a, y, g, buf = _graph(dev)
    backend.graph_compute(g)
    used = dev.allocations.bytes
    buf.free()
    assert dev.allocations.bytes == used - buf.size  # counted out at free, not at garbage collection
    for use in (lambda: backend.graph_compute(g), lambda: a.set(np.zeros((64, 512), np.float32)),
                lambda: y.numpy(), lambda: buf.clear(0)):
        with pytest.raises(AllocationError, match="used after free"):
            use()
    buf.free()  # a second free does nothing
    assert dev.allocations.bytes == used - buf.size


def test_free_from_another_thread_during_compute(dev, backend) -> None:  # type: ignore[no-untyped-def]
    check_free_during_compute(backend, lambda: _graph(dev)[2:])  # (graph, buffer)


def test_host_buffer_use_after_free(dev) -> None:  # type: ignore[no-untyped-def]
    buft = dev.host_buffer_type()
    if buft is None:
        pytest.skip("no host buffer type")
    buf = buft.alloc_buffer(64)
    buf.free()
    with pytest.raises(AllocationError, match="used after free"):
        buf.read(0, 4)
    buf.free()


def test_bad_sizes_are_refused(dev) -> None:  # type: ignore[no-untyped-def]
    """alloc_buffer(-1) returned a buffer of size -1."""
    for size in (-1, dev.memory()[1] + 1):
        with pytest.raises(AllocationError):
            dev.buffer_type().alloc_buffer(size)
