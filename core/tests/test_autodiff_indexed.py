"""The gradient rules ggml lacks for MUL_MAT_ID, SET_ROWS and the GELUs (finite differences of every case run in
conformance/tests/test_grad.py): here, MUL_MAT_ID's gradients with quantised experts against float64 numpy of the
dequantised weights, and the refusals before compute."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.autodiff import GradientError, build_backward
from pyggml.backend import init_backend
from pyggml.quants import dequantize, quantize
from pyggml.types import GGMLType

K, M, X, E, T = 32, 3, 4, 2, 5
"""Row length (one Q8_0 block), rows per expert, experts, experts used per token, tokens."""


def _moe_grads(ids: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d/d(as, b) of sum(w * mul_mat_id(as, b, ids)), float64; as [X, M, K], b [T, 1, K], w [T, E, M] (numpy
    order); b is broadcast over the E slots."""
    da, db = np.zeros_like(a), np.zeros_like(b)
    for t in range(T):
        for e in range(E):
            x = ids[t, e]
            da[x] += np.outer(w[t, e], b[t, 0])
            db[t, 0] += a[x].T @ w[t, e]
    return da, db


@pytest.mark.parametrize("qtype", [GGMLType.F32, GGMLType.Q8_0])
def test_mul_mat_id_gradients_with_frozen_quantised_experts(qtype: GGMLType) -> None:
    """The experts frozen (quantised, as in a LoRA on a MoE model) still pass the gradient on to src1: the rule's
    OUT_PROD reads them as any weight."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (X, M, K)).astype(np.float32)
    a_deq = dequantize(quantize(a, qtype), qtype).reshape(a.shape) if qtype != GGMLType.F32 else a
    b = rng.uniform(-1, 1, (T, 1, K)).astype(np.float32)
    w = rng.uniform(-1, 1, (T, E, M)).astype(np.float32)
    ids = np.stack([rng.permutation(X)[:E] for _ in range(T)]).astype(np.int32)
    ctx = gg.Context(1 << 22)
    t_as = ctx.new_tensor(qtype, K, M, X, name="experts")
    if qtype == GGMLType.F32:
        t_as.set_param()
    t_b = ctx.new_tensor(gg.F32, K, 1, T, name="b").set_param()
    t_ids = ctx.new_tensor(gg.I32, E, T, name="ids")
    t_w = ctx.new_tensor(gg.F32, M, E, T, name="w")
    with ctx:
        loss = ops.sum(ops.mul(ops.mul_mat_id(t_as, t_b, t_ids), t_w)).set_loss()
    graph = gg.build_graph(loss)
    grads = build_backward(graph)
    t_as.set(a)  # quantised on the way in
    t_b.set(b)
    t_ids.set(ids)
    t_w.set(w)
    grads.reset()
    init_backend("numpy").graph_compute(graph)
    want_a, want_b = _moe_grads(ids, a_deq.astype(np.float64), b.astype(np.float64), w.astype(np.float64))
    got_b = grads.grad(t_b)
    assert got_b is not None
    np.testing.assert_allclose(got_b.numpy().reshape(want_b.shape), want_b, rtol=1e-5, atol=1e-5)
    if qtype == GGMLType.F32:
        got_a = grads.grad(t_as)
        assert got_a is not None
        np.testing.assert_allclose(got_a.numpy().reshape(want_a.shape), want_a, rtol=1e-5, atol=1e-5)


def test_set_rows_gradient_refusals_name_the_op() -> None:
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4, 6, 2, name="a").set_param()
    b = ctx.new_tensor(gg.F32, 4, 3, 2, name="b").set_param()
    shared_ids = ctx.new_tensor(gg.I32, 3, 1, name="ids")  # one id list broadcast over both batches
    with ctx:
        loss = ops.sum(ops.set_rows(a, b, shared_ids)).set_loss()
    with pytest.raises(GradientError, match=r"SET_ROWS.*broadcast"):
        build_backward(gg.build_graph(loss))
    cache = ctx.new_tensor(gg.F16, 4, 6, name="cache")
    rows = ctx.new_tensor(gg.F32, 4, 3, name="rows").set_param()
    with ctx:
        loss = ops.sum(ops.cpy(ops.set_rows(cache, rows, ctx.new_tensor(gg.I32, 3)),
                               ctx.new_tensor(gg.F32, 4, 6))).set_loss()
    with pytest.raises(GradientError, match=r"SET_ROWS.*F32 destination"):
        build_backward(gg.build_graph(loss))
