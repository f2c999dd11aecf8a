"""The convolution and spatial shaders on Vulkan beyond the conformance suite (pyggml_testing.conv_graphs): model
front ends as whole graphs on the device, repeatable sums, ggml's nearest pixel at a float32 rounding boundary; and
lavapipe's loop limit and the packed push-constant words refused in supports_op, never computed wrong."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.ops.spatial import PoolOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing import conv_graphs
from pyggml_testing.opencl import place
from pyggml_vulkan.ops.conv import MAX_LOOP

F32 = GGMLType.F32


@pytest.mark.parametrize("name", sorted(conv_graphs.MODEL_GRAPHS))
def test_model_graph(device, name: str) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_model_graph(device, name)


def test_sums_are_deterministic(device) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_deterministic(device)


def test_nearest_pixel_at_a_rounding_boundary(device) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_nearest_boundary(device)


def _limits(c: Context, over: int) -> list[Tensor]:
    """One node per loop budget at its limit (over 0) or one step past it (over 1). A 1x1 CONV_2D takes 3
    iterations per input channel (the channel, row and column loops); POOL_1D 1 + (k0 + 1)."""
    ic = MAX_LOOP // 3 + over
    k0 = MAX_LOOP - 2 + over
    return [ops.conv_2d_direct(c.new_tensor(F32, 1, 1, ic, 1), c.new_tensor(F32, 1, 1, ic, 1), 1, 1, 0, 0, 1, 1),
            ops.pool_1d(c.new_tensor(F32, k0), PoolOp.MAX, k0, 1)]


def test_loop_limits_are_refused(device) -> None:  # type: ignore[no-untyped-def]
    for node in _limits(Context(no_alloc=True), 0):
        assert device.supports_op(node), node.op.name
    for node in _limits(Context(no_alloc=True), 1):
        assert not device.supports_op(node), node.op.name


def test_words_that_do_not_fit_are_refused(device) -> None:  # type: ignore[no-untyped-def]
    """Strides travel as 16-bit halves (10-bit thirds for the 3-D ops): larger ones are left to another backend."""
    c = Context(no_alloc=True)
    x, k = c.new_tensor(F32, 5, 5, 2, 1), c.new_tensor(F32, 1, 1, 2, 3)
    assert device.supports_op(ops.conv_2d_direct(k, x, (1 << 15) - 1, 1, 0, 0, 1, 1))
    assert not device.supports_op(ops.conv_2d_direct(k, x, 1 << 15, 1, 0, 0, 1, 1))
    x3, k3 = c.new_tensor(F32, 5, 5, 5, 2), c.new_tensor(F32, 1, 1, 1, 6)
    assert device.supports_op(ops.conv_3d_direct(k3, x3, 1023, 1, 1, 0, 0, 0, 1, 1, 1, 2, 1, 3))
    assert not device.supports_op(ops.conv_3d_direct(k3, x3, 1024, 1, 1, 0, 0, 0, 1, 1, 1, 2, 1, 3))


def test_at_the_loop_limit_the_sum_is_whole(device) -> None:  # type: ignore[no-untyped-def]
    """The longest channel loop the rule accepts runs to its end on lavapipe (integers: the float sum is exact)."""
    ctx = Context(no_alloc=True)
    ic = MAX_LOOP // 3
    k, x = ctx.new_tensor(F32, 1, 1, ic, 1), ctx.new_tensor(F32, 1, 1, ic, 1)
    out = ops.conv_2d_direct(k, x, 1, 1, 0, 0, 1, 1)
    assert device.supports_op(out)
    place(ctx, device.buffer_type())
    rng = np.random.default_rng(0)
    kv, xv = (rng.integers(-2, 3, ic).astype(np.float32) for _ in range(2))
    k.set(kv)
    x.set(xv)
    device.init_backend().graph_compute(build_graph(out))
    assert out.numpy().reshape(-1)[0] == float(np.dot(kv.astype(np.int64), xv.astype(np.int64)))
