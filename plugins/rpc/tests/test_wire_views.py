"""ggml's rpc_tensor carries ne and nb in 32 bits, and a payload carries every view a node reads through, so
`supports_op` refuses a node whose sources reach a view that does not fit the wire, even where the source itself
fits (issue 33, the int64 edge family: CONT of a 4x3 view of a broadcast view of 2^60 rows was claimed by a ggml
server's device, placed there by the scheduler and then refused by the graph encoder at compute)."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
from pyggml_rpc.client import RPCDevice
from pyggml_rpc.graph_codec import wire_tensors
from pyggml_rpc.registry import RPCRegistry

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.registry import get_registry, hub
from pyggml.backend.sched import Scheduler
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.tensor import Tensor


def _cont_of_a_view_of_a_wide_view(a: Tensor) -> tuple[Tensor, Tensor]:
    wide = ops.view(a, (4, 1 << 60), (0,))
    return wide, ops.cont(ops.view(wide, (4, 3), (0,)))


def test_wire_tensors_follow_views() -> None:
    a = Context(no_alloc=True).new_tensor("f32", 4, name="a")
    wide, y = _cont_of_a_view_of_a_wide_view(a)
    small = y.src[0]
    assert {id(t) for t in wire_tensors(y)} == {id(y), id(small), id(wide), id(a)}
    assert [id(t) for t in wire_tensors(ops.scale(y, 2.0))][1:] == [id(y)]  # a computed source stops the walk


@pytest.fixture(params=["ggml", "pyggml"])
def device(request: pytest.FixtureRequest) -> RPCDevice:
    reg = cast(RPCRegistry, get_registry("RPC"))
    return reg.add_server(request.getfixturevalue(f"{request.param}_server"))[0]


def test_refused_then_computed_elsewhere(device: RPCDevice) -> None:
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 4, name="a")
    buf = alloc_ctx_tensors(ctx, device.buffer_type())
    a.set(np.arange(1, 5, dtype=np.float32))
    _, y = _cont_of_a_view_of_a_wide_view(a)
    assert not device.supports_op(y)
    g = build_graph(y)
    sched = Scheduler([device.init_backend(), hub().device("numpy").init_backend()])
    sched.graph_compute(g)
    np.testing.assert_array_equal(y.numpy(), np.tile(np.arange(1, 5, dtype=np.float32), (3, 1)))
    assert buf is not None
    buf.free()
