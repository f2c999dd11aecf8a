"""Reference kernels of the backward, loss and optimiser ops against independent formulations: every gradient op
against central finite differences of its forward op's reference (SILU, RMS_NORM, SOFT_MAX, CROSS_ENTROPY_LOSS),
the linear ones as adjoints of their forward op (<f(x), g> == <x, f_back(g)> for REPEAT, GET_ROWS, ROPE), AdamW and
SGD against a scalar loop written from ggml's kernel, and the shape rules' refusals."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import ComputeError, ShapeError, UnsupportedTypeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import new_ctx, rand, result, tensor

Array = np.ndarray


def _fd64(f: Callable[[Array], Array], x: Array, g: Array, h: float = 1e-6) -> Array:
    """d/dx sum(f(x) * g) by central differences, f a float64 numpy formula of the forward op."""
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        out[idx] = ((f(xp) - f(xm)) * g).sum() / (2 * h)
    return out


def test_silu_back_is_the_derivative() -> None:
    x, g = rand(3, 7, seed=1, scale=3.0), rand(3, 7, seed=2)
    got = result(ops.silu_back(tensor(new_ctx(), g), tensor(new_ctx(), x)))
    want = _fd64(lambda v: v / (1.0 + np.exp(-v)), x, g)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_back_is_the_derivative(eps: float) -> None:
    x, g = rand(4, 9, seed=3), rand(4, 9, seed=4)
    got = result(ops.rms_norm_back(tensor(new_ctx(), g), tensor(new_ctx(), x), eps))

    def rms(v: Array) -> Array:
        return np.asarray(v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps))

    np.testing.assert_allclose(got, _fd64(rms, x, g), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 0.37])
def test_soft_max_back_is_the_derivative(scale: float) -> None:
    x, g = rand(2, 3, 11, seed=5), rand(2, 3, 11, seed=6)

    def sm(v: Array) -> Array:
        e = np.exp(v * scale - (v * scale).max(axis=-1, keepdims=True))
        return np.asarray(e / e.sum(axis=-1, keepdims=True))

    ctx = new_ctx()
    y = result(ops.soft_max(tensor(ctx, x), scale=scale))
    got = result(ops.soft_max_ext_back(tensor(new_ctx(), g), tensor(new_ctx(), y), scale))
    np.testing.assert_allclose(got, _fd64(sm, x, g), rtol=1e-5, atol=1e-6)


def _ce(logits: Array, labels: Array) -> float:
    z = logits - logits.max(axis=-1, keepdims=True)
    ls = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-(labels * ls).sum() / (logits.size // logits.shape[-1]))


def test_cross_entropy_loss_and_its_gradient() -> None:
    logits = rand(5, 6, seed=7, scale=2.0)
    labels = np.eye(6)[[0, 3, 5, 1, 1]] * 0.9 + 0.1 / 6
    loss = result(ops.cross_entropy_loss(tensor(new_ctx(), logits), tensor(new_ctx(), labels)))
    assert loss.size == 1
    assert loss.ravel()[0] == pytest.approx(_ce(logits, labels), rel=1e-6)
    d = 0.75
    got = result(ops.cross_entropy_loss_back(tensor(new_ctx(), [d]), tensor(new_ctx(), logits),
                                             tensor(new_ctx(), labels)))
    want = _fd64(lambda v: np.array(_ce(v, labels)), logits, np.array(d))
    np.testing.assert_allclose(got.reshape(logits.shape), want, rtol=1e-5, atol=1e-7)


def _dot(a: Array, b: Array) -> float:
    return float((a.astype(np.float64) * b.astype(np.float64)).sum())


def test_repeat_back_is_repeats_adjoint() -> None:
    ctx = new_ctx()
    x, g = rand(2, 2, 3, 4, seed=8), rand(4, 2, 6, 8, seed=9)
    xt, gt = tensor(ctx, x), tensor(ctx, g)
    fwd = result(ops.repeat(xt, gt))
    back = result(ops.repeat_back(gt, xt))
    assert back.shape == x.shape
    assert _dot(fwd, g) == pytest.approx(_dot(x, back), rel=1e-6)


def test_get_rows_back_is_get_rows_adjoint() -> None:
    ctx = new_ctx()
    x, g = rand(5, 4, seed=10), rand(7, 4, seed=11)
    ids = np.array([4, 0, 4, 2, 4, 1, 0], dtype=np.int32)
    xt, it, gt = tensor(ctx, x), tensor(ctx, ids, T.I32), tensor(ctx, g)
    fwd = result(ops.get_rows(xt, it))
    back = result(ops.get_rows_back(gt, it, xt))
    assert back.shape == (5, 4)
    assert _dot(fwd, g) == pytest.approx(_dot(x, back), rel=1e-6)
    with pytest.raises(ComputeError, match="GET_ROWS_BACK: row id 9"):
        result(ops.get_rows_back(gt, tensor(ctx, np.array([9, 0, 0, 0, 0, 0, 0], np.int32), T.I32), xt))


@pytest.mark.parametrize("mode", [ops.ROPE_TYPE_NORMAL, ops.ROPE_TYPE_NEOX])
@pytest.mark.parametrize("yarn", [False, True])
def test_rope_back_is_ropes_adjoint(mode: int, yarn: bool) -> None:
    ctx = new_ctx()
    x, g = rand(2, 3, 2, 10, seed=12), rand(2, 3, 2, 10, seed=13)
    pos = tensor(ctx, np.array([3, -1, 17], np.int32), T.I32)
    kw = dict(n_ctx_orig=64, freq_scale=0.25, ext_factor=1.0, attn_factor=0.9) if yarn else {}
    fwd = result(ops.rope(tensor(ctx, x), pos, 8, mode, **kw))  # type: ignore[arg-type]
    back = result(ops.rope_back(tensor(ctx, g), pos, ops.RopeParams(8, mode, **kw)))  # type: ignore[arg-type]
    assert _dot(fwd, g) == pytest.approx(_dot(x, back), rel=1e-5)


def _params(ctx: object, values: Array) -> Tensor:
    t = tensor(ctx, values)  # type: ignore[arg-type]
    return t.set_param()


def test_adamw_matches_ggml_loop() -> None:
    w0, g, m0, v0 = rand(3, 5, seed=14), rand(3, 5, seed=15), rand(3, 5, seed=16), np.abs(rand(3, 5, seed=17))
    hp = np.array([1e-2, 0.9, 0.999, 1e-8, 0.1, 1 / (1 - 0.9**3), 1 / (1 - 0.999**3)])
    ctx = new_ctx()
    w, m, v = _params(ctx, w0), tensor(ctx, m0), tensor(ctx, v0)
    out = ops.opt_step_adamw(w, tensor(ctx, g), m, v, tensor(ctx, hp))
    assert out.view_src is w
    got = result(out)
    alpha, b1, b2, eps, wd, b1h, b2h = (float(np.float32(h)) for h in hp)
    m1 = m0 * b1 + g * (1 - b1)
    v1 = v0 * b2 + g * g * (1 - b2)
    want = w0 * (1 - alpha * wd) - alpha * (m1 * b1h) / (np.sqrt(v1 * b2h) + eps)
    np.testing.assert_allclose(got.reshape(3, 5), want, rtol=2e-6)
    np.testing.assert_allclose(w.numpy(), want, rtol=2e-6)
    np.testing.assert_allclose(m.numpy(), m1, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(v.numpy(), v1, rtol=2e-6, atol=1e-7)


def test_sgd_matches_ggml_loop() -> None:
    w0, g = rand(4, 3, seed=18), rand(4, 3, seed=19)
    ctx = new_ctx()
    w = _params(ctx, w0)
    result(ops.opt_step_sgd(w, tensor(ctx, g), tensor(ctx, [0.05, 0.2])))
    want = w0 * (1 - np.float32(0.05) * np.float32(0.2)) - np.float32(0.05) * g
    np.testing.assert_allclose(w.numpy(), want, rtol=2e-6)


def test_shape_rules_refuse_bad_input() -> None:
    ctx = new_ctx()
    a = tensor(ctx, rand(3, 4))
    with pytest.raises(ShapeError, match=r"SILU_BACK: .*same shape"):
        ops.silu_back(a, tensor(ctx, rand(4, 3)))
    with pytest.raises(ShapeError, match=r"REPEAT_BACK: .*whole multiple"):
        ops.repeat_back(a, tensor(ctx, rand(3, 3)))
    with pytest.raises(UnsupportedTypeError, match="RMS_NORM_BACK: src0"):
        ops.rms_norm_back(tensor(ctx, rand(3, 4), T.F16), a, 1e-6)
    with pytest.raises(ShapeError, match="SOFT_MAX_BACK: max_bias"):
        ops.soft_max_ext_back(a, a, 1.0, 8.0)
    with pytest.raises(ShapeError, match="ROPE_BACK: n_dims"):
        ops.rope_back(tensor(ctx, rand(1, 2, 3, 4)), tensor(ctx, np.zeros(2, np.int32), T.I32), ops.RopeParams(5))
    with pytest.raises(ShapeError, match="GET_ROWS_BACK: one row id per gradient row"):
        ops.get_rows_back(a, tensor(ctx, np.zeros(2, np.int32), T.I32), a)
    with pytest.raises(ShapeError, match="CROSS_ENTROPY_LOSS_BACK: the gradient of the loss must be a scalar"):
        ops.cross_entropy_loss_back(a, a, a)
    with pytest.raises(ShapeError, match="CROSS_ENTROPY_LOSS: logits and labels"):
        ops.cross_entropy_loss(a, tensor(ctx, rand(4, 3)))
    hp = tensor(ctx, np.zeros(7))
    with pytest.raises(ShapeError, match="OPT_STEP_ADAMW: src0 is not marked as a parameter"):
        ops.opt_step_adamw(a, a, tensor(ctx, rand(3, 4)), tensor(ctx, rand(3, 4)), hp)
    w = _params(ctx, rand(3, 4))
    with pytest.raises(ShapeError, match=r"OPT_STEP_ADAMW: src2 \(m, first moment\) must have the parameter's shape"):
        ops.opt_step_adamw(w, a, tensor(ctx, rand(4, 3)), tensor(ctx, rand(3, 4)), hp)
    with pytest.raises(ShapeError, match=r"OPT_STEP_ADAMW: src4 .* must hold 7 values"):
        ops.opt_step_adamw(w, a, tensor(ctx, rand(3, 4)), tensor(ctx, rand(3, 4)), tensor(ctx, np.zeros(6)))
    with pytest.raises(ShapeError, match="OPT_STEP_ADAMW: the parameter and its optimiser state must be distinct"):
        m = tensor(ctx, rand(3, 4))
        ops.opt_step_adamw(w, a, m, m, hp)
    w16 = tensor(ctx, rand(3, 4), T.F16).set_param()
    with pytest.raises(UnsupportedTypeError, match=r"OPT_STEP_SGD: src0 \(parameter\)"):
        ops.opt_step_sgd(w16, a, tensor(ctx, [0.1, 0.0]))
    with pytest.raises(ShapeError, match=r"OPT_STEP_SGD: src2 .* must hold 2 values"):
        ops.opt_step_sgd(w, a, tensor(ctx, [0.1, 0.0, 1.0]))
