"""The convolution and spatial shaders on Vulkan beyond the conformance suite (pyggml_testing.conv_graphs): model
front ends as whole graphs on the device, repeatable sums, ggml's nearest pixel at a float32 rounding boundary; and
lavapipe's loop limit and the packed push-constant words refused in supports_op, never computed wrong."""

from __future__ import annotations

import numpy as np

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.ops.spatial import PoolOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.ops.conv import MAX_LOOP
from pyggml_testing.conv_graphs import ConvGraphTests
from pyggml_testing.on_device import place

F32 = GGMLType.F32


class TestConvGraphs(ConvGraphTests):
    pass


def _limits(c: Context, over: int) -> list[Tensor]:
    """One node per loop budget at its limit (over 0) or one step past it (over 1). A 1x1 CONV_2D takes 3
    iterations per input channel (the channel, row and column loops); POOL_1D 1 + (k0 + 1); 1-D IM2COL_BACK
    1 + (KW + 1) (its one row of taps); POOL_2D_BACK AVG 1 + (1 + k0) for a window row of k0 at stride 1 (the
    most windows that may hold an element; spatial.comp's budget is conv.comp's)."""
    ic = MAX_LOOP // 3 + over
    k0 = MAX_LOOP - 2 + over
    return [ops.conv_2d_direct(c.new_tensor(F32, 1, 1, ic, 1), c.new_tensor(F32, 1, 1, ic, 1), 1, 1, 0, 0, 1, 1),
            ops.pool_1d(c.new_tensor(F32, k0), PoolOp.MAX, k0, 1),
            ops.im2col_back(c.new_tensor(F32, k0, 1, 1), c.new_tensor(F32, k0, 1, 1), (k0, 1, 1), 1, 0, 0, 0, 1, 0,
                            False),
            ops.pool_2d_back(c.new_tensor(F32, 1, 1), c.new_tensor(F32, k0, 1), PoolOp.AVG, k0, 1, 1, 1)]


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


def test_at_the_loop_limit_the_max_scan_is_whole(device) -> None:  # type: ignore[no-untyped-def]
    """POOL_2D_BACK MAX over one window as long as the rule accepts (4 + k0 iterations at stride k0): the scan
    reaches the window's last element, its maximum, which gets the gradient."""
    ctx = Context(no_alloc=True)
    k0 = MAX_LOOP - 4
    g, x = ctx.new_tensor(F32, 1, 1), ctx.new_tensor(F32, k0, 1)
    out = ops.pool_2d_back(g, x, PoolOp.MAX, k0, 1, k0, 1)
    assert device.supports_op(out)
    assert not device.supports_op(ops.pool_2d_back(g, ctx.new_tensor(F32, k0 + 1, 1), PoolOp.MAX, k0 + 1, 1, k0 + 1,
                                                   1))
    place(ctx, device.buffer_type())
    x.set(np.arange(k0, dtype=np.float32))
    g.set(np.array([2.0], np.float32))
    device.init_backend().graph_compute(build_graph(out))
    assert np.array_equal(out.numpy().reshape(-1), np.where(np.arange(k0) == k0 - 1, 2.0, 0.0).astype(np.float32))
