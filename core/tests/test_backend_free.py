"""`Backend.free()` (issue 33, the lifetime family's backend_use_after_free / free_backend_during_compute): a freed
backend refuses computes with one ComputeError ("backend used after free"), a second free does nothing, and a free
from another thread waits for the compute being queued. Before, numpy and OpenCL0 computed on after free, MetalSim0
raised a bare AssertionError, and Vulkan0 named its status buffer, then died of a double free at the second free.
Also `OpTable.fits`, the table-wide size limit Vulkan and Metal give their rules."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.op_table import OpTable, RuleSet
from pyggml.backend.plan_cache import PlannedBackend
from pyggml.context import Context
from pyggml.errors import ComputeError, UnsupportedOpError
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_testing.devices import numpy_device


def _graph() -> tuple[Graph, Tensor]:
    ctx = Context(mem_size=1 << 16)
    a = ctx.new_tensor("f32", 4, name="a").set(np.arange(4, dtype=np.float32))
    y = ops.scale(a, 2.0)
    return build_graph(y), y


def test_a_freed_numpy_backend_refuses_computes() -> None:
    dev = numpy_device()
    be = dev.init_backend()
    g, y = _graph()
    be.graph_compute(g)
    be.free()
    with pytest.raises(ComputeError, match=r"numpy: the backend was freed \(backend used after free\)"):
        be.graph_compute(g)
    be.free()  # a second free does nothing
    dev.init_backend().graph_compute(g)  # the device gives a working backend as before
    np.testing.assert_array_equal(y.numpy(), [0, 2, 4, 6])


class SlowPlanned(PlannedBackend[int]):
    """Replaying a plan takes until `go` is set; `released` counts release_resources calls."""

    def __init__(self) -> None:
        super().__init__(numpy_device(), lambda g: g.uid)
        self.inside, self.go = threading.Event(), threading.Event()
        self.released = 0

    def replay(self, plan: int) -> None:
        self.inside.set()
        assert self.go.wait(30)

    def release_resources(self) -> None:
        self.released += 1
        super().release_resources()


def test_a_planned_backend_frees_once_after_the_compute_being_queued() -> None:
    be = SlowPlanned()
    g, _ = _graph()
    worker = threading.Thread(target=be.graph_compute, args=(g,))
    worker.start()
    assert be.inside.wait(30)
    freer = threading.Thread(target=be.free)
    freer.start()
    freer.join(0.2)
    assert freer.is_alive(), "free() did not wait for the compute being queued on another thread"
    be.go.set()
    worker.join(30)
    freer.join(30)
    assert not freer.is_alive() and be.freed and be.released == 1
    with pytest.raises(ComputeError, match=r"the backend was freed \(backend used after free\)"):
        be.graph_compute(g)
    be.free()
    assert be.released == 1


def test_fits_limits_every_rule_of_a_table() -> None:
    rules: RuleSet[object] = RuleSet()
    rules.rule(Op.SCALE)(lambda node, b: None)
    table: OpTable[object] = OpTable("Small", rules, fits=lambda node: node.nelements() <= 4)
    ctx = Context(no_alloc=True)
    small, big = ops.scale(ctx.new_tensor("f32", 4), 2.0), ops.scale(ctx.new_tensor("f32", 5), 2.0)
    assert table.supports(small) and not table.supports(big)
    src = big.src[0]
    assert src is not None and table.supports(ops.view(src, (5,)))  # views are free whatever their size
    with pytest.raises(UnsupportedOpError, match="not supported by the Small backend"):
        table.rule_for(big, "Small0")
