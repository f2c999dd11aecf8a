"""build_backward: gradients of a small network against hand-derived float64 numpy, gradient accumulation across
micro-batches, the scheduler + graph allocator on a forward+backward graph, and every refusal before compute."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.autodiff import GradientError, build_backward, differentiable
from pyggml.backend import get_device, init_backend
from pyggml.backend.sched import Scheduler
from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.tensor import TensorFlag

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((6, 4)).astype(np.float32)
B1 = RNG.standard_normal(6).astype(np.float32)
W2 = RNG.standard_normal((3, 6)).astype(np.float32)
X = RNG.standard_normal((5, 4)).astype(np.float32)
LAB = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 5)]


def numpy_grads(x: np.ndarray, lab: np.ndarray) -> dict[str, np.ndarray]:
    """d cross_entropy(w2 tanh(w1 x + b1)) by hand, float64."""
    a = x @ W1.T.astype(np.float64) + B1
    h = np.tanh(a)
    z = h @ W2.T.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = (p - lab) / x.shape[0]
    dh = dz @ W2
    da = dh * (1 - h**2)
    return {"w2": dz.T @ h, "w1": da.T @ x, "b1": da.sum(0)}


def mlp(ctx: gg.Context, weights: gg.Context | None = None) -> tuple[dict[str, gg.Tensor], gg.Tensor, gg.Tensor,
                                                                    gg.Tensor]:
    wctx = weights if weights is not None else ctx
    p = {"w1": wctx.new_tensor(gg.F32, 4, 6, name="w1").set_param(),
         "b1": wctx.new_tensor(gg.F32, 6, name="b1").set_param(),
         "w2": wctx.new_tensor(gg.F32, 6, 3, name="w2").set_param()}
    with ctx:
        x = ctx.new_tensor(gg.F32, 4, 5, name="x").set_input()
        lab = ctx.new_tensor(gg.F32, 3, 5, name="lab").set_input()
        h = ops.tanh(ops.add(ops.mul_mat(p["w1"], x), p["b1"]))
        loss = ops.cross_entropy_loss(ops.mul_mat(p["w2"], h), lab).set_name("loss").set_loss()
    return p, x, lab, loss


def _fill(p: dict[str, gg.Tensor]) -> None:
    p["w1"].set(W1)
    p["b1"].set(B1)
    p["w2"].set(W2)


def test_mlp_gradients_match_numpy() -> None:
    ctx = gg.Context(1 << 22)
    p, x, lab, loss = mlp(ctx)
    graph = gg.build_graph(loss)
    n_forward = graph.n_nodes
    grads = build_backward(graph)
    assert graph.n_nodes > n_forward
    _fill(p)
    x.set(X)
    lab.set(LAB)
    grads.reset()
    init_backend("numpy").graph_compute(graph)
    want = numpy_grads(X, LAB)
    for name, t in p.items():
        g = grads.grad(t)
        assert g is not None and g.flags & TensorFlag.OUTPUT
        np.testing.assert_allclose(g.numpy().reshape(want[name].shape), want[name], rtol=1e-5, atol=1e-6)


def test_scheduler_and_allocator_keep_gradients_and_parameters() -> None:
    """The forward+backward graph through Scheduler + gallocr: parameters in their own buffer stay untouched,
    gradients come out as with a context that holds every tensor separately."""
    dev = get_device("numpy")
    weights = gg.Context(no_alloc=True)
    comp = gg.Context(no_alloc=True)
    p, x, lab, loss = mlp(comp, weights)
    static = gg.Context(no_alloc=True)
    seed = static.new_tensor(gg.F32, 1, name="seed")
    graph = gg.build_graph(loss)
    grads = build_backward(graph, {loss: seed})
    alloc_ctx_tensors(weights, dev.buffer_type())
    alloc_ctx_tensors(static, dev.buffer_type())
    _fill(p)
    sched = Scheduler([dev.init_backend()])
    sched.alloc_graph(graph)
    grads.reset()
    for _ in range(2):  # a replay gives the same gradients: nothing persistent was overwritten
        x.set(X)  # inputs are rewritten before every compute: their memory is reused once they are consumed
        lab.set(LAB)
        sched.graph_compute(graph)
        want = numpy_grads(X, LAB)
        for name, t in p.items():
            g = grads.grad(t)
            assert g is not None
            np.testing.assert_allclose(g.numpy().reshape(want[name].shape), want[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(p["w1"].numpy(), W1)
        np.testing.assert_array_equal(seed.numpy(), [1.0])


def test_gradient_accumulation_over_micro_batches() -> None:
    ctx = gg.Context(1 << 22)
    p, x, lab, loss = mlp(ctx)
    accs = {t: ctx.new_tensor(gg.F32, *t.ne, name=f"acc {n}") for n, t in p.items()}
    graph = gg.build_graph(loss)
    grads = build_backward(graph, accs)
    assert all(grads.grad_acc(t) is accs[t] for t in p.values())
    _fill(p)
    grads.reset()
    be = init_backend("numpy")
    halves = [(X[:3], LAB[:3]), (X[2:], LAB[2:])]
    for xs, ls in halves:  # same batch shape (5 rows): pad by reusing rows so the graph is unchanged
        xb = np.concatenate([xs, X[: 5 - len(xs)]])
        lb = np.concatenate([ls, LAB[: 5 - len(ls)]])
        x.set(xb)
        lab.set(lb)
        be.graph_compute(graph)
    want = {k: sum(numpy_grads(np.concatenate([xs, X[: 5 - len(xs)]]), np.concatenate([ls, LAB[: 5 - len(ls)]]))[k]
                   for xs, ls in halves) for k in p}
    for name, t in p.items():
        np.testing.assert_allclose(accs[t].numpy().reshape(want[name].shape), want[name], rtol=1e-5, atol=1e-6)
    grads.reset()
    assert not accs[p["w1"]].numpy().any()


def test_refusals_before_compute() -> None:
    ctx = gg.Context(no_alloc=True)
    with pytest.raises(UnsupportedTypeError, match="i32"):
        ctx.new_tensor(gg.I32, 4).set_param()
    w = ctx.new_tensor(gg.F32, 4, 3, name="w").set_param()
    with pytest.raises(ShapeError, match="only leaf"):
        ops.sqr(w).set_param()
    with pytest.raises(ShapeError, match="not a scalar"):
        ops.sqr(w).set_loss()
    with pytest.raises(UnsupportedTypeError, match="must be F32"):
        ops.sum(ctx.new_tensor(gg.F16, 4)).set_loss()
    with pytest.raises(GradientError, match="no loss"):
        build_backward(gg.build_graph(ops.sum(w)))
    with pytest.raises(GradientError, match="no parameter"):
        build_backward(gg.build_graph(ops.sum(ctx.new_tensor(gg.F32, 3)).set_loss()))


@pytest.mark.parametrize(("make", "what"), [
    (lambda w: ops.l2_norm(w), "L2_NORM"),
    (lambda w: ops.gelu_erf(w), "UNARY GELU_ERF"),
    (lambda w: ops.cumsum(w), "CUMSUM"),
])
def test_op_without_rule_names_op_and_tensor(make: object, what: str) -> None:
    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(gg.F32, 4, 3, name="w").set_param()
    y = make(w).set_name("culprit")  # type: ignore[operator]
    loss = ops.sum(y).set_loss()
    with pytest.raises(GradientError, match=f"no gradient rule for {what}.*culprit"):
        build_backward(gg.build_graph(loss))


def test_pool_1d_avg_with_padding_is_refused_by_name() -> None:
    """POOL_1D's AVG divides edge windows by the real elements they cover, which POOL_2D_BACK does not model."""
    from pyggml.ops.spatial import PoolOp

    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(gg.F32, 9, 2, name="w").set_param()
    loss = ops.sum(ops.pool_1d(w, PoolOp.AVG, 3, 2, 1)).set_loss()
    with pytest.raises(GradientError, match=r"POOL_1D.*AVG.*padding"):
        build_backward(gg.build_graph(loss))


def test_unused_op_without_rule_is_fine_and_inplace_is_refused() -> None:
    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(gg.F32, 4, 3, name="w").set_param()
    side = ops.cumsum(w)  # reached from a parameter, but not on the way to the loss: no gradient needed
    loss = ops.sum(ops.sqr(w)).set_loss()
    g = gg.build_graph(loss)
    g.build_forward_expand(side)
    assert build_backward(g).grad(w) is not None
    ctx2 = gg.Context(no_alloc=True)
    w2 = ctx2.new_tensor(gg.F32, 4, name="w2").set_param()
    y = ops.sqr(ops.scale(w2, 2.0), inplace=True)
    with pytest.raises(GradientError, match="in-place"):
        build_backward(gg.build_graph(ops.sum(y).set_loss()))


def test_gradient_through_non_float_tensor_is_refused() -> None:
    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(gg.F32, 4, name="w").set_param()
    b = ops.cpy(w, ctx.new_tensor(gg.BF16, 4))
    loss = ops.sum(ops.cpy(b, ctx.new_tensor(gg.F32, 4))).set_loss()
    with pytest.raises(GradientError, match="bf16"):
        build_backward(gg.build_graph(loss))


def test_rule_table_covers_ggml_list() -> None:
    names = set(differentiable())
    for op in ("ADD", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS", "SUM", "SUM_ROWS", "MEAN", "REPEAT",
               "CONCAT", "RMS_NORM", "NORM", "MUL_MAT", "OUT_PROD", "SCALE", "SET", "CPY", "CONT", "RESHAPE", "VIEW",
               "PERMUTE", "TRANSPOSE", "GET_ROWS", "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX", "ROPE",
               "CROSS_ENTROPY_LOSS", "REPEAT_BACK", "UNARY SILU", "UNARY RELU", "UNARY EXP", "GLU SWIGLU",
               "FLASH_ATTN_EXT"):
        assert op in names, op


def test_accumulators_placed_by_the_graph_allocator_keep_their_values() -> None:
    """Accumulators left to the graph allocator (no buffer of their own) are OUTPUT: no later node gets their
    memory, so a replay of the same plan keeps adding into them."""
    dev = get_device("numpy")
    weights = gg.Context(no_alloc=True)
    comp = gg.Context(no_alloc=True)
    p, x, lab, loss = mlp(comp, weights)
    accs = {t: comp.new_tensor(gg.F32, *t.ne, name=f"acc {n}") for n, t in p.items()}
    graph = gg.build_graph(loss)
    grads = build_backward(graph, accs)
    alloc_ctx_tensors(weights, dev.buffer_type())
    _fill(p)
    sched = Scheduler([dev.init_backend()])
    sched.alloc_graph(graph)
    grads.reset()
    for _ in range(3):
        x.set(X)
        lab.set(LAB)
        sched.graph_compute(graph)
    want = numpy_grads(X, LAB)
    for name, t in p.items():
        np.testing.assert_allclose(accs[t].numpy().reshape(want[name].shape), 3 * want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["acc", "set", "concat", "pad"])
def test_view_based_rules_take_a_transposed_gradient(kind: str) -> None:
    """ACC / SET / CONCAT / PAD cut src gradients out of g with strides meant for a contiguous g: a transposed g
    (TRANSPOSE's rule hands one down) must be made contiguous first, not read through its own strides."""
    rng = np.random.default_rng(3)
    ctx = gg.Context(1 << 22)
    with ctx:
        a = ctx.new_tensor(gg.F32, 4, 3, name="a").set_param()
        b = ctx.new_tensor(gg.F32, 4, 2, name="b").set_param()
        if kind == "acc":
            y = ops.acc(a, b, a.nb[1], a.nb[2], a.nb[3], a.nb[1])
        elif kind == "set":
            y = ops.set_(a, b, a.nb[1], a.nb[2], a.nb[3], a.nb[1])
        elif kind == "concat":
            y = ops.concat(a, b, 1)
        else:
            y = ops.pad_ext(a, (1, 1, 0, 0), (2, 0, 0, 0))  # [7, 4]; b takes no part
        w = ctx.new_tensor(gg.F32, y.ne[1], y.ne[0], name="w")
        loss = ops.sum(ops.mul(ops.transpose(y), w)).set_loss()
    graph = gg.build_graph(loss)
    grads = build_backward(graph)
    av, bv = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    wv = rng.standard_normal((w.ne[1], w.ne[0])).astype(np.float32)
    a.set(av)
    b.set(bv)
    w.set(wv)
    grads.reset()
    init_backend("numpy").graph_compute(graph)
    dy = wv.T  # d sum(y^T * w) / dy, numpy [ne1, ne0]
    want_a = {"acc": dy, "set": np.concatenate([dy[:1], 0 * dy[1:3]]), "concat": dy[:3], "pad": dy[1:4, 1:5]}[kind]
    ga, gb = grads.grad(a), grads.grad(b)
    assert ga is not None
    np.testing.assert_allclose(ga.numpy().reshape(3, 4), want_a, rtol=1e-6, atol=1e-6)
    if kind != "pad":
        assert gb is not None
        want_b = {"acc": dy[1:3], "set": dy[1:3], "concat": dy[3:]}[kind]
        np.testing.assert_allclose(gb.numpy().reshape(2, 4), want_b, rtol=1e-6, atol=1e-6)
