"""A graph whose buffer was freed is refused (it used to replay a command buffer binding a destroyed VkBuffer), also
when it was never recorded before the free (issue 33: it used to write the destroyed handle into descriptor sets);
a free from another thread during a compute waits for the GPU; a second free does nothing (issue 19)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.graph import build_graph
from pyggml_testing.buffers import check_free_during_compute, check_use_after_free
from pyggml_testing.on_device import place_graph


def _graph(backend):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 512, 64, name="a")
    y = ops.mul_mat(a, a)
    g = build_graph(y)
    buf = place_graph(g, backend.device.buffer_type())
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


FREED_BEFORE_FIRST_COMPUTE = textwrap.dedent("""
    import sys
    from pyggml import ops
    from pyggml.alloc import alloc_ctx_tensors
    from pyggml.backend.registry import get_device
    from pyggml.context import Context
    from pyggml.errors import AllocationError
    from pyggml.graph import build_graph

    dev = get_device(sys.argv[1])
    for _ in range(8):
        ctx = Context(no_alloc=True)
        a = ctx.new_tensor("f32", 512, 64, name="a")
        g = build_graph(ops.mul_mat(a, a))
        buf = alloc_ctx_tensors(ctx, dev.buffer_type())
        buf.free()
        be = dev.init_backend()  # its new buffers may get the freed VkBuffer's handle
        try:
            be.graph_compute(g)
            print("computed over a freed buffer")
        except AllocationError as e:
            print("refused:", e)
        be.free()
""")


def test_a_graph_freed_before_its_first_compute_is_refused(device) -> None:  # type: ignore[no-untyped-def]
    """Issue 33: `buf.free()` and then the graph's first compute on a new backend wrote the destroyed VkBuffer's
    handle into descriptor sets while recording (lavapipe segfaulted in `_descriptor_sets`, up to 7 runs of 8), or,
    where the backend's status buffer got the same handle, computed into that buffer with no error. The graph is
    now refused before anything is recorded. In a subprocess: a regression kills it."""
    r = subprocess.run([sys.executable, "-c", FREED_BEFORE_FIRST_COMPUTE, device.name], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    want = (rf"refused: {device.name}: node 'node_0' \(MUL_MAT\): tensor 'node_0' is in <Buffer {device.name} \d+ "
            r"bytes>, which was freed \(buffer used after free\)")
    lines = r.stdout.splitlines()
    assert len(lines) == 8 and all(re.fullmatch(want, line) for line in lines), r.stdout
