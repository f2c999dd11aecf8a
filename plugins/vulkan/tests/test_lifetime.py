"""A graph whose buffer was freed is refused (it used to replay a command buffer binding a destroyed VkBuffer); a
free from another thread during a compute waits for the GPU; a second free does nothing (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.graph import build_graph
from pyggml_testing.buffers import check_free_during_compute, check_use_after_free
from pyggml_testing.vulkan import place


def _graph(backend):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 512, 64, name="a")
    y = ops.mul_mat(a, a)
    g = build_graph(y)
    buf = place(g, backend.device.buffer_type())
    a.set(np.ones((64, 512), np.float32))
    return a, y, g, buf


def test_compute_after_free_raises(backend) -> None:  # type: ignore[no-untyped-def]
    _a, y, g, buf = _graph(backend)
    backend.graph_compute(g)
    check_use_after_free(backend, g, y, buf)


def test_free_from_another_thread_during_compute(backend) -> None:  # type: ignore[no-untyped-def]
    check_free_during_compute(backend, lambda: _graph(backend)[2:])  # (graph, buffer)


def test_memory_accounting_and_bad_sizes(device) -> None:  # type: ignore[no-untyped-def]
    """Vulkan reported all memory free whatever was allocated; alloc_buffer(-1) must be refused."""
    free0, total = device.memory()
    buf = device.buffer_type().alloc_buffer(32 << 20)
    assert device.memory()[0] <= free0 - (32 << 20)
    buf.free()
    assert device.memory()[0] >= free0 - (1 << 20)
    for size in (-1, total + 1):
        with pytest.raises(AllocationError):
            device.buffer_type().alloc_buffer(size)
