"""The training ops on Vulkan beyond the conformance suite (pyggml_testing.train_ops): in place, optimiser steps
replayed with new hyper-parameters, deterministic sums, bad row ids; and the lavapipe loop limits refused in
supports_op, never computed wrong."""

from __future__ import annotations

import numpy as np

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.ops.train import MAX_LOOP, MAX_ROW
from pyggml_testing.on_device import place
from pyggml_testing.train_ops import TrainOpsTests

F32, I32 = GGMLType.F32, GGMLType.I32


class TestTrainOps(TrainOpsTests):
    pass


def _limits(c: Context, over: int) -> list[Tensor]:
    """One node per loop limit, at the limit (over 0) or one step past it (over 1)."""
    like = c.new_tensor(F32, 4)
    n_ids = MAX_LOOP // 2 + over  # GET_ROWS_BACK: one pass over the ids plus one per matched row of 128 columns
    wide = MAX_ROW + over
    return [ops.repeat_back(c.new_tensor(F32, 4 * (MAX_LOOP + over)), like),
            ops.get_rows_back(c.new_tensor(F32, 128, n_ids), c.new_tensor(I32, n_ids), c.new_tensor(F32, 128, 2)),
            ops.rms_norm_back(c.new_tensor(F32, wide), c.new_tensor(F32, wide), 1e-5),
            ops.soft_max_ext_back(c.new_tensor(F32, wide), c.new_tensor(F32, wide)),
            ops.cross_entropy_loss(c.new_tensor(F32, wide), c.new_tensor(F32, wide)),
            ops.cross_entropy_loss_back(c.new_tensor(F32, 1), c.new_tensor(F32, wide), c.new_tensor(F32, wide))]


def test_loop_limits_are_refused(device) -> None:  # type: ignore[no-untyped-def]
    """lavapipe ends a shader's loops silently past LAVAPIPE_LOOPS: the rules accept up to their budget and
    refuse past it (the scheduler runs those nodes elsewhere)."""
    for node in _limits(Context(no_alloc=True), 0):
        assert device.supports_op(node), node.op.name
    for node in _limits(Context(no_alloc=True), 1):
        assert not device.supports_op(node), node.op.name


def test_at_the_loop_limit_the_sums_are_whole(device) -> None:  # type: ignore[no-untyped-def]
    """The longest loops the rules accept run to their end on lavapipe: REPEAT_BACK over MAX_LOOP tiles and
    GET_ROWS_BACK with every id the same row (integers, so the float sums are exact)."""
    ctx = Context(no_alloc=True)
    a, n = ctx.new_tensor(F32, 4 * MAX_LOOP), MAX_LOOP // 2
    g, ids = ctx.new_tensor(F32, 128, n), ctx.new_tensor(I32, n)
    outs = (ops.repeat_back(a, ctx.new_tensor(F32, 4)), ops.get_rows_back(g, ids, ctx.new_tensor(F32, 128, 2)))
    graph = build_graph(*outs)
    assert all(device.supports_op(x) for x in graph.nodes)
    place(ctx, device.buffer_type())
    rng = np.random.default_rng(0)
    av, gv = (rng.integers(-3, 4, t.nelements()).astype(np.float32) for t in (a, g))
    a.set(av)
    g.set(gv)
    ids.set(np.ones(n, np.int32))
    device.init_backend().graph_compute(graph)
    assert np.array_equal(outs[0].numpy(), av.reshape(-1, 4).sum(0))
    assert np.array_equal(outs[1].numpy(), np.stack([np.zeros(128, np.float32), gv.reshape(n, 128).sum(0)]))
