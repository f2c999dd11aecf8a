"""SchedStats counts the copies between backends each compute makes (number and bytes), and the offload rule of
docs/scheduler.md ("Offload: why an op moves away from its weights") holds on the devices present: host weights
pull a MUL_MAT to OpenCL0 from 32 activation rows on, copied every compute, never to CPU-emulated Vulkan."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend import hub
from pyggml.backend.protocol import Backend, Device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_testing.devices import fake_device, numpy_backend
from pyggml_testing.sched import inp, weight


def _offload_graph(cpu: Backend, rows: int) -> tuple[Tensor, Tensor, Tensor, gg.Graph]:
    """relu(w x): w [64, 128] in the CPU backend's host memory (WEIGHTS), x [64, rows] a graph input."""
    w = weight(cpu.device.buffer_type(), 64, 128)
    x = inp(64, rows)
    y = ops.relu(ops.mul_mat(w, x)).set_name("y").set_output()
    return w, x, y, gg.build_graph(y)


def test_copies_are_counted_per_compute() -> None:
    """A gpu that asks for MUL_MAT (offload) gets the host weight and the input copied at every compute."""
    gpu = fake_device("gpu", offload={Op.MUL_MAT})
    cpu = numpy_backend()
    w, x, y, g = _offload_graph(cpu, 4)
    s = Scheduler([gpu.init_backend(), cpu])
    s.alloc_graph(g)
    assert s.get_tensor_backend(y) is s.backends[0] and s.plan is not None
    assert s.plan.cause[id(y.src[0])] == "1.off"
    per = w.nbytes() + x.nbytes()
    assert (s.n_split_inputs, s.split_input_bytes) == (2, per)
    split = s.splits[0]
    assert split.inputs == [w, x] and split.input_backends == [1, 1] and split.input_bytes == per
    for n in range(1, 4):
        x.set(np.ones(x.nelements(), dtype=np.float32))
        s.graph_compute(g)
        st = s.stats
        assert (st.copies, st.copy_bytes, st.last_copies, st.last_copy_bytes) == (2 * n, per * n, 2, per)
    assert "2 inputs copied (33.0 KiB) per compute" in s.debug_text(1)
    np.testing.assert_array_equal(y.numpy(), np.full((4, 128), 64.0, dtype=np.float32))


def test_one_backend_copies_nothing_and_a_stopped_compute_counts_what_it_copied() -> None:
    cpu = numpy_backend()
    _, x, _, g = _offload_graph(cpu, 4)
    s = Scheduler([cpu])
    x.set_output()  # keeps its value: no rewrite needed between computes
    s.alloc_graph(g)
    x.set(np.ones(x.nelements(), dtype=np.float32))
    s.graph_compute(g)
    assert (s.stats.copies, s.stats.last_copies, s.split_input_bytes) == (0, 0, 0)
    gpu = fake_device("gpu", exclude={Op.UNARY}, offload={Op.MUL_MAT})
    cpu2 = numpy_backend()
    _, x2, _, g2 = _offload_graph(cpu2, 4)
    s2 = Scheduler([gpu.init_backend(), cpu2])
    s2.alloc_graph(g2)
    assert s2.n_splits == 2 and s2.n_split_inputs == 3   # w and x to the gpu, the product back for the relu
    s2.set_eval_callback(lambda t, ask: ask or t.op is not Op.MUL_MAT)   # sees every node, stops at the product
    x2.set(np.ones(x2.nelements(), dtype=np.float32))
    assert not s2.graph_compute(g2)                       # stopped after the first split
    assert s2.stats.last_copies == 2


def _device(name: str) -> Device:
    try:
        return hub().device(name)
    except PyGGMLError as e:
        pytest.skip(f"no {name} device here: {e}")


@pytest.mark.parametrize(("name", "rows", "offloaded"), [
    ("OpenCL0", 31, False), ("OpenCL0", 32, True), ("Vulkan0", 32, None),
])
def test_offload_follows_the_device_rule(name: str, rows: int, offloaded: bool | None) -> None:
    dev = _device(name)
    if offloaded is None:  # Vulkan: only a real GPU asks for ops
        offloaded = not dev.description.endswith("(CPU-emulated)")
    cpu = numpy_backend()
    w, x, y, g = _offload_graph(cpu, rows)
    s = Scheduler([dev.init_backend(), cpu])
    s.alloc_graph(g)
    x.set(np.ones(x.nelements(), dtype=np.float32))
    s.graph_compute(g)
    on = s.get_tensor_backend(y)
    assert on is not None and (on.device is dev) == offloaded
    assert s.stats.last_copies == (2 if offloaded else 0)
    assert s.stats.last_copy_bytes == (w.nbytes() + x.nbytes() if offloaded else 0)
    np.testing.assert_allclose(y.numpy(), np.full((rows, 128), 64.0), rtol=1e-6)
