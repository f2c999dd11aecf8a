"""The toy plugin's own tests. The conformance cases of its ops come from the pytest plugin of pyggml-conformance
(configured in pyproject.toml's addopts); these check what the cases do not: loading, memory, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from pyggml_toy.buffer import TOTAL_MEMORY
from pyggml_toy.plugin import PYGGML_API_VERSION

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import get_device, hub, init_backend
from pyggml.backend.sched import Scheduler
from pyggml.errors import AllocationError


def test_loaded_through_its_entry_point() -> None:
    hub().load()
    plugins = {p.name: p for p in hub().plugins}
    toy = plugins["toy"]
    assert (toy.status, toy.distribution, toy.api_version, toy.registries) == \
           ("loaded", "pyggml-toy", PYGGML_API_VERSION, ["Toy"])
    assert get_device("Toy0").reg.name == "Toy"


def test_buffer_moves_uint8_arrays_and_refuses_use_after_free() -> None:
    dev = get_device("Toy0")
    buf = dev.buffer_type().alloc_buffer(64)
    assert dev.memory() == (TOTAL_MEMORY - 64, TOTAL_MEMORY)
    buf.write(8, np.arange(16, dtype=np.uint8))
    assert buf.read(8, 16).tolist() == list(range(16))
    with pytest.raises(AllocationError, match="outside the buffer"):
        buf.read(60, 8)
    buf.free()
    assert dev.memory()[0] == TOTAL_MEMORY
    with pytest.raises(AllocationError, match="used after free"):
        buf.read(0, 4)
    buf.free()  # a second free does nothing


def test_supports_f32_kernels_and_every_view() -> None:
    dev = get_device("Toy0")
    ctx = gg.Context(no_alloc=True)
    a, b = ctx.new_tensor(gg.F32, 4, 3), ctx.new_tensor(gg.F32, 4)
    h = ctx.new_tensor(gg.F16, 4, 3)
    assert dev.supports_op(ops.add(a, b)) and dev.supports_op(ops.scale(a, 2.0))
    assert all(dev.supports_op(n) for n in (ops.transpose(a), ops.reshape(a, 12), ops.permute(a, 1, 0, 2, 3), h))
    assert not dev.supports_op(ops.add(h, h)) and not dev.supports_op(ops.rms_norm(a))


def test_the_scheduler_runs_what_the_toy_refuses_elsewhere() -> None:
    """a and b live in the toy's memory, so MUL and SCALE run there; RMS_NORM, which the toy refuses, runs on the
    numpy device after the scheduler copied SCALE's result over."""
    dev = get_device("Toy0")
    ctx = gg.Context(no_alloc=True)
    a, b = ctx.new_tensor(gg.F32, 4, 3), ctx.new_tensor(gg.F32, 4)
    alloc_ctx_tensors(ctx, dev.buffer_type())
    x, w = np.arange(12, dtype=np.float32).reshape(3, 4) + 1, np.array([1, 2, 3, 4], np.float32)
    a.set(x)
    b.set(w)
    y = ops.rms_norm(ops.scale(ops.mul(a, b), 0.5))
    graph = gg.build_graph(y)
    sched = Scheduler([dev.init_backend(), init_backend("numpy")])
    sched.graph_compute(graph)
    assert [(sched.backends[s.backend_id].name, s.i_end - s.i_start) for s in sched.splits] == \
           [("Toy0", 2), ("numpy", 1)]
    z = x * w * 0.5
    np.testing.assert_allclose(y.numpy(), z / np.sqrt((z * z).mean(axis=1, keepdims=True) + 1e-6), rtol=1e-5)


def test_init_backend_refuses_parameters() -> None:
    with pytest.raises(ValueError, match="takes no parameters"):
        get_device("Toy0").init_backend("threads=4")
