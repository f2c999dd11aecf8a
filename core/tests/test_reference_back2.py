"""IM2COL_BACK and POOL_2D_BACK's reference against independent formulations: IM2COL_BACK as the adjoint of IM2COL
(<im2col(x), g> = <x, im2col_back(g)>) and as ggml's per-input-element gather loop; POOL_2D_BACK AVG as the adjoint
of POOL_2D AVG, MAX as a direct loop of ggml's window scan (ties, padding, -inf, NaN) and as the finite-difference
gradient of POOL_2D MAX where the maxima are distinct; and the shape rules' refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.ops import PoolOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import new_ctx, rand, result, tensor

Arr = np.ndarray
FLT_MAX = float(np.finfo(np.float32).max)


def res(t: Tensor) -> Arr:
    return result(t).reshape(t.ne[::-1])


# (input ne, kernel ne, s0, s1, p0, p1, d0, d1, is_2d)
IM2COL_GEOMS = [
    ((7, 6, 3, 2), (3, 3, 3, 4), 1, 1, 1, 1, 1, 1, True),
    ((9, 8, 2, 1), (3, 2, 2, 5), 2, 3, 1, 0, 1, 2, True),
    ((10, 7, 3, 2), (2, 3, 3, 2), 3, 1, 2, 2, 2, 1, True),
    ((5, 5, 1, 3), (5, 5, 1, 1), 1, 1, 0, 0, 1, 1, True),
    ((11, 9, 2, 1), (3, 3, 2, 1), 4, 3, 0, 1, 1, 1, True),  # a stride wider than the kernel: inputs no tap reads
    ((20, 3, 2, 1), (3, 3, 4, 1), 2, 0, 1, 0, 2, 0, False),
    ((13, 2, 1, 1), (4, 2, 1, 1), 3, 0, 2, 0, 1, 0, False),
]


def _im2col_back_loop(g: Arr, ne_in: tuple[int, ...], kw: int, kh: int, s: tuple[int, int], p: tuple[int, int],
                      d: tuple[int, int], is_2d: bool) -> Arr:
    """ggml's formulation: each input element gathers the gradient of every (output, tap) that read it, found by
    inverting out * s + k * d - p = i (only where the division is exact and the output exists)."""
    w_, h_, ic_, n_ = ne_in if is_2d else (ne_in[0], 1, ne_in[1], ne_in[2])
    rows = g.reshape(n_, -1, g.shape[-1])  # [N, OH*OW, K] (1-D: [N, OW, K])
    oh_, ow_ = (g.shape[1] if is_2d else 1), g.shape[2]
    out = np.zeros((n_, ic_, h_, w_))
    for n, c, y, x in itertools.product(range(n_), range(ic_), range(h_), range(w_)):
        acc = 0.0
        for i, j in itertools.product(range(kh), range(kw)):
            tx, ty = x + p[1] - j * d[1], y + p[0] - i * d[0]
            if tx % s[1] or (is_2d and ty % s[0]):
                continue
            ox, oy = tx // s[1], (ty // s[0] if is_2d else 0)
            if 0 <= ox < ow_ and 0 <= oy < oh_:
                acc += rows[n, oy * ow_ + ox, (c * kh + i) * kw + j]
        out[n, c, y, x] = acc
    return out


@pytest.mark.parametrize("geom", IM2COL_GEOMS)
def test_im2col_back_is_the_adjoint_of_im2col_and_ggmls_gather(geom: tuple) -> None:  # type: ignore[type-arg]
    ne_in, ne_k, s0, s1, p0, p1, d0, d1, is_2d = geom
    ctx = new_ctx()
    x = rand(*ne_in[::-1], seed=1)
    a, b = ctx.new_tensor(T.F16, *ne_k), tensor(ctx, x)
    cols = ops.im2col(a, b, s0, s1, p0, p1, d0, d1, is_2d, T.F32)
    g = rand(*cols.ne[::-1], seed=2)
    back = ops.im2col_back(tensor(ctx, g), a, ne_in, s0, s1, p0, p1, d0, d1, is_2d)
    assert back.ne == b.ne and back.type == T.F32
    got = res(back)
    assert np.isclose(np.sum(res(cols) * g), np.sum(x * got), rtol=1e-6)
    kh = ne_k[1] if is_2d else 1
    want = _im2col_back_loop(g, ne_in, ne_k[0], kh, (s1, s0), (p1, p0), (d1, d0), is_2d)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-6)  # F32 result


def test_im2col_back_shape_rule_refusals() -> None:
    ctx = new_ctx()
    k = ctx.new_tensor(T.F32, 3, 3, 2, 4)
    g = ctx.new_tensor(T.F32, 18, 5, 4, 1)  # IM2COL of [7, 6, 2, 1] with s 1, p 0
    assert ops.im2col_back(g, k, (7, 6, 2, 1), 1, 1, 0, 0, 1, 1, True).ne == (7, 6, 2, 1)
    with pytest.raises(ShapeError, match="IM2COL's result"):
        ops.im2col_back(g, k, (8, 6, 2, 1), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ShapeError, match="input channels"):
        ops.im2col_back(g, k, (7, 6, 3, 1), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ShapeError, match="larger than the padded input"):
        ops.im2col_back(g, k, (2, 6, 2, 1), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ShapeError, match="stride and dilation"):
        ops.im2col_back(g, k, (7, 6, 2, 1), 0, 1, 0, 0, 1, 1, True)
    with pytest.raises(ShapeError, match="four positive"):
        ops.im2col_back(g, k, (7, 0, 2, 1), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(UnsupportedTypeError, match="IM2COL_BACK"):
        ops.im2col_back(ctx.new_tensor(T.F16, 18, 5, 4, 1), k, (7, 6, 2, 1), 1, 1, 0, 0, 1, 1, True)
    with pytest.raises(ShapeError, match="ne\\[3\\] == 1"):
        ops.im2col_back(ctx.new_tensor(T.F32, 6, 5, 2, 1), ctx.new_tensor(T.F32, 3, 2, 1), (7, 2, 2, 2), 1, 0, 0,
                        0, 1, 0, False)


def _pool_back_loop(g: Arr, x: Arr, op: PoolOp, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int]) -> Arr:
    """ggml's loop: per output, AVG spreads g / (k0*k1) on the window inside x, MAX scans the window (dim 1 outer)
    from -FLT_MAX and gives g to the last element that was not <= the running maximum."""
    k0, k1 = k
    out = np.zeros(x.shape)
    n3, n2, h_, w_ = x.shape
    for i3, i2, oy, ox in itertools.product(range(n3), range(n2), range(g.shape[2]), range(g.shape[3])):
        iy, ix = oy * s[1] - p[1], ox * s[0] - p[0]
        cells = [(iy + ky, ix + kx) for ky in range(k1) for kx in range(k0)
                 if 0 <= iy + ky < h_ and 0 <= ix + kx < w_]
        if op is PoolOp.AVG:
            for y, xx in cells:
                out[i3, i2, y, xx] += g[i3, i2, oy, ox] / (k0 * k1)
            continue
        best, at = -FLT_MAX, None
        for y, xx in cells:
            v = x[i3, i2, y, xx]
            if not v <= best:
                best, at = v, (y, xx)
        if at is not None:
            out[i3, i2, at[0], at[1]] += g[i3, i2, oy, ox]
    return out


POOL_GEOMS = [((3, 3), (1, 1), (1, 1)), ((3, 2), (2, 1), (1, 1)), ((2, 2), (2, 2), (0, 0)), ((1, 3), (2, 3), (0, 1)),
              ((4, 3), (1, 2), (2, 1)), ((3, 3), (3, 3), (0, 0))]


@pytest.mark.parametrize("pool", list(PoolOp))
@pytest.mark.parametrize(("k", "s", "p"), POOL_GEOMS)
def test_pool_2d_back_matches_ggmls_loop(pool: PoolOp, k: tuple[int, int], s: tuple[int, int],
                                        p: tuple[int, int]) -> None:
    x = np.round(rand(2, 3, 7, 8, seed=3) * 3) / 2  # few distinct values: ties in most windows
    x[0, 0, 2, :] = -np.inf
    x[1, 2, :, :] = -FLT_MAX  # windows with nothing above the scan's start value: no gradient
    x[0, 1, 3, 3] = np.nan
    ctx = new_ctx()
    xt = tensor(ctx, x)
    fwd = ops.pool_2d(xt, pool, k[0], k[1], s[0], s[1], p[0], p[1])
    g = rand(*fwd.ne[::-1], seed=4)
    got = res(ops.pool_2d_back(tensor(ctx, g), xt, pool, k[0], k[1], s[0], s[1], p[0], p[1]))
    want = _pool_back_loop(g, x, pool, k, s, p)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_pool_2d_back_avg_is_the_adjoint_and_max_the_derivative() -> None:
    rng = np.random.default_rng(5)
    x = (rng.permutation(2 * 9 * 10) * 0.25).reshape(1, 2, 9, 10).astype(np.float32)  # distinct values
    ctx = new_ctx()
    xt = tensor(ctx, x)
    for pool in PoolOp:
        fwd = ops.pool_2d(xt, pool, 3, 2, 2, 2, 1, 1)
        g = rand(*fwd.ne[::-1], seed=6)
        got = res(ops.pool_2d_back(tensor(ctx, g), xt, pool, 3, 2, 2, 2, 1, 1))
        base = np.sum(res(fwd) * g)
        num = np.zeros(x.shape)
        for idx in itertools.product(*map(range, x.shape)):  # the loss is linear near x: one-sided steps are exact
            xp = x.copy()
            xp[idx] += 0.0625
            c2 = new_ctx()
            num[idx] = (np.sum(res(ops.pool_2d(tensor(c2, xp), pool, 3, 2, 2, 2, 1, 1)) * g) - base) / 0.0625
        np.testing.assert_allclose(got, num, rtol=1e-3, atol=5e-4)  # F32 forward results


def test_pool_2d_back_shape_rule_refusals() -> None:
    ctx = new_ctx()
    x = ctx.new_tensor(T.F32, 8, 7, 3)
    g = ctx.new_tensor(T.F32, 8, 7, 3)  # pool 3x3 s 1 p 1
    assert ops.pool_2d_back(g, x, PoolOp.MAX, 3, 3, 1, 1, 1, 1).ne == x.ne
    assert ops.pool_2d_back(g, ctx.new_tensor(T.F16, 8, 7, 3), PoolOp.AVG, 3, 3, 1, 1, 1, 1).type == T.F32
    with pytest.raises(ShapeError, match="POOL_2D's result shape"):
        ops.pool_2d_back(g, x, PoolOp.MAX, 3, 3, 1, 1, 0, 0)
    with pytest.raises(ShapeError, match="must be positive"):
        ops.pool_2d_back(g, x, PoolOp.MAX, 3, 3, 0, 1, 1, 1)
    with pytest.raises(ShapeError, match="larger than the padded input"):
        ops.pool_2d_back(g, x, PoolOp.MAX, 3, 12, 1, 1, 1, 1)
    with pytest.raises(UnsupportedTypeError, match="POOL_2D_BACK"):
        ops.pool_2d_back(ctx.new_tensor(T.F16, 8, 7, 3), x, PoolOp.MAX, 3, 3, 1, 1, 1, 1)
    with pytest.raises(PyGGMLError, match="PoolOp"):
        ops.pool_2d_back(g, x, 0, 3, 3, 1, 1, 1, 1)  # type: ignore[arg-type]
