"""Tensor's Python operators mean what numpy's do on numpy-order shapes (pyggml.ops.operators), record the ops
docs/library.md's cheat sheet names, and refuse what ggml cannot broadcast with a ShapeError naming both tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import get_device
from pyggml.ops.base import Op

Fn = Callable[..., Any]


def run(fn: Fn, *arrays: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = gg.function(fn, device="numpy")(*arrays)
    assert isinstance(out, np.ndarray)
    return out


def arrays(*shapes: tuple[int, ...]) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(len(shapes))
    return [rng.standard_normal(s).astype(np.float32) + 3.0 for s in shapes]


@pytest.mark.parametrize(("fn", "shapes"), [
    (lambda a, b: a + b, [(3, 4), (3, 4)]),
    (lambda a, b: a + b, [(3, 4), (4,)]),
    (lambda a, b: a + b, [(4,), (3, 4)]),            # the smaller operand on the left: swapped (+ commutes)
    (lambda a, b: a - b, [(1, 4), (2, 3, 4)]),       # repeated first (- does not)
    (lambda a, b: a / b, [(3, 1), (3, 4)]),
    (lambda a, b: a * b, [(2, 1, 4), (2, 3, 4)]),
    (lambda a, b: 2 * a - b / 4 + 1, [(3, 4), (3, 4)]),
    (lambda a, b: 1 - a * 3, [(3, 4), (3, 4)]),
    (lambda a, b: -a, [(3, 4), (3, 4)]),
], ids=["same", "row", "row-left", "sub-repeat", "col-div", "batch-mul", "numbers", "rsub", "neg"])
def test_elementwise_as_numpy(fn: Fn, shapes: list[tuple[int, ...]]) -> None:
    a, b = arrays(*shapes)
    want = fn(a, b)
    got = run(fn, a, b)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6)


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
    ((2, 2, 3, 4), (1, 2, 4, 5)), ((3, 4), (2, 2, 4, 5)),
    ((4,), (4, 5)), ((3, 4), (4,)),
])
def test_matmul_as_numpy(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    a, b = arrays(a_shape, b_shape)
    want = a @ b
    got = run(lambda x, y: x @ y, a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_matmul_by_a_transpose_is_one_mul_mat() -> None:
    """`x @ w.T` is MUL_MAT(w, x): ggml's weight layout, no copy; `x @ w` copies w.mT once per compute (CONT)."""
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor(gg.F32, 4, 3, name="x")
    w = ctx.new_tensor(gg.F32, 4, 5, name="w")           # numpy (5, 4)
    y = x @ w.T
    assert y.op is Op.MUL_MAT and y.src == (w, x) and y.shape == (3, 5)
    v = ctx.new_tensor(gg.F32, 5, 4, name="v")           # numpy (4, 5)
    z = x @ v
    assert z.op is Op.MUL_MAT and z.src[1] is x
    src0 = z.src[0]
    assert src0 is not None and src0.op is Op.CONT and src0.shape == (5, 4)
    a, wv = arrays((3, 4), (5, 4))
    np.testing.assert_allclose(run(lambda p, q: p @ q.T, a, wv), a @ wv.T, rtol=1e-5)


def test_results_stay_out_of_the_weights_context() -> None:
    """`b + x @ w.T` and `x @ v` with b, w and v weights (leafs with memory): every node goes to the activations'
    context, so placing the weights' context again never places a node (`w.T` alone, a view of w, stays with w)."""
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(gg.F32, 5, 4, name="w")        # numpy (4, 5)
    v = weights.new_tensor(gg.F32, 4, 5, name="v")        # numpy (5, 4)
    b = weights.new_tensor(gg.F32, 4, name="b")
    alloc_ctx_tensors(weights, get_device("numpy").buffer_type())
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor(gg.F32, 5, 3, name="x")            # numpy (3, 5)
    y = (b + x @ w.T) * (x @ v)
    assert y.shape == (3, 4) and {t.op for t in weights} == {Op.NONE, Op.TRANSPOSE}
    assert all(t.ctx is ctx for t in gg.build_graph(y).nodes)
    with gg.Context(no_alloc=True) as other:
        z = b * 2
    assert z.ctx is other


@pytest.mark.parametrize(("fn", "message"), [
    (lambda a, b, c, d: a + b, "+: cannot broadcast 'a' of numpy shape (3, 4) (ne=[4, 3, 1, 1]) with 'b' of numpy "
                               "shape (2,) (ne=[2, 1, 1, 1]): every dimension must be equal, or 1 in one of them"),
    (lambda a, b, c, d: c - d, "numpy would stretch both operands; ggml repeats one operand"),
    (lambda a, b, c, d: a @ a, "@: 'a' of numpy shape (3, 4) (ne=[4, 3, 1, 1]) @ 'a' of numpy shape (3, 4) "
                               "(ne=[4, 3, 1, 1]): the left operand's last dimension (4) must equal the right "
                               "operand's second-to-last (3)"),
])
def test_refused_with_both_shapes(fn: Fn, message: str) -> None:
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4, 3, name="a")
    b = ctx.new_tensor(gg.F32, 2, name="b")
    c = ctx.new_tensor(gg.F32, 1, 3, name="c")
    d = ctx.new_tensor(gg.F32, 4, 1, name="d")
    with pytest.raises(gg.ShapeError) as e:
        fn(a, b, c, d)
    assert message in str(e.value)


def test_transpose_of_more_than_two_dims_and_numbers_divided_by_tensors() -> None:
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(gg.F32, 4, 3, 2, name="t")
    with pytest.raises(gg.ShapeError, match=r"numpy's \.T reverses all 3 axes; use \.mT"):
        _ = t.T
    assert t.mT.shape == (2, 4, 3)
    with pytest.raises(TypeError, match="a number divided by a tensor is no ggml op"):
        _ = 2 / t
    with pytest.raises(TypeError, match="a tensor and a ndarray do not combine"):
        _ = np.ones(4, dtype=np.float32) + t
    assert (t / 4).op is Op.SCALE
