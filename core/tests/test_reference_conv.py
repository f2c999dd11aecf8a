"""The convolution family's reference against independent formulations: a direct loop over output positions and
kernel taps (CONV_2D, CONV_3D, CONV_2D_DW, IM2COL, IM2COL_3D), IM2COL + MUL_MAT (ggml's composite helpers), the
transposed convs as the adjoint of the forward conv (<T(a, b), x> = <b, conv(a, x)>), COL2IM_1D after MUL_MAT
as CONV_TRANSPOSE_1D, and the shape rules' refusals (channel mismatch, no output, bad strides, types)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import new_ctx, rand, result, tensor

Arr = np.ndarray


def res(t: Tensor) -> Arr:
    """t computed on the numpy backend, as a 4-D float64 array in numpy order (ne reversed)."""
    return result(t).reshape(t.ne[::-1])


def _at(x: Arr, idx: tuple[int, ...]) -> float:
    """x[idx], 0 outside x (zero padding)."""
    if any(i < 0 or i >= n for i, n in zip(idx, x.shape, strict=True)):
        return 0.0
    return float(x[idx])


def _loop_conv2d(w: Arr, x: Arr, s: tuple[int, int], p: tuple[int, int], d: tuple[int, int],
                 oh: int, ow: int) -> Arr:
    """Direct 2-D cross-correlation, numpy order: w [OC, IC, KH, KW], x [N, IC, H, W]; s, p, d as (y, x)."""
    n_, ic_, (oc_, _, kh_, kw_) = x.shape[0], x.shape[1], w.shape
    out = np.zeros((n_, oc_, oh, ow))
    for n, o, y, xx in itertools.product(range(n_), range(oc_), range(oh), range(ow)):
        acc = 0.0
        for c, i, j in itertools.product(range(ic_), range(kh_), range(kw_)):
            acc += w[o, c, i, j] * _at(x, (n, c, y * s[0] + i * d[0] - p[0], xx * s[1] + j * d[1] - p[1]))
        out[n, o, y, xx] = acc
    return out


CONV2D_GEOMS = [
    # (W, H, IC, N), (KW, KH, OC), s0, s1, p0, p1, d0, d1
    ((7, 6, 3, 2), (3, 3, 4), 1, 1, 1, 1, 1, 1),
    ((9, 8, 2, 1), (3, 2, 5), 2, 3, 1, 0, 1, 2),
    ((10, 7, 3, 2), (2, 3, 2), 3, 1, 2, 2, 2, 1),
    ((5, 5, 1, 3), (5, 5, 1), 1, 1, 0, 0, 1, 1),
]


@pytest.mark.parametrize("geom", CONV2D_GEOMS)
def test_conv_2d_matches_direct_loop_and_im2col_mul_mat(geom: tuple) -> None:  # type: ignore[type-arg]
    (w_, h_, ic, n), (kw, kh, oc), s0, s1, p0, p1, d0, d1 = geom
    x = rand(n, ic, h_, w_, seed=1)
    k = rand(oc, ic, kh, kw, seed=2)
    ctx = new_ctx()
    a, b = tensor(ctx, k), tensor(ctx, x)
    got = res(ops.conv_2d_direct(a, b, s0, s1, p0, p1, d0, d1))
    want = _loop_conv2d(k, x, (s1, s0), (p1, p0), (d1, d0), got.shape[2], got.shape[3])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    cols = ops.im2col(a, b, s0, s1, p0, p1, d0, d1, True, T.F32)
    mm = ops.mul_mat(ops.reshape(cols, cols.ne[0], cols.ne[1] * cols.ne[2] * cols.ne[3]),
                     ops.reshape(a, kw * kh * ic, oc))
    via = ops.cont(ops.permute(ops.reshape(mm, cols.ne[1], cols.ne[2], cols.ne[3], oc), 0, 1, 3, 2))
    np.testing.assert_allclose(res(via), got, rtol=1e-5, atol=1e-5)
    composite = res(ops.conv_2d(a, b, s0, s1, p0, p1, d0, d1))  # F16 patches, as ggml's helper
    np.testing.assert_allclose(composite, got, rtol=2e-2, atol=2e-2)


def test_im2col_rows_are_patches() -> None:
    x = rand(2, 3, 5, 6, seed=3)  # [N, IC, H, W]
    ctx = new_ctx()
    a = ctx.new_tensor(T.F16, 3, 2, 3, 4)  # [KW, KH, IC, OC]: only the shape is read
    b = tensor(ctx, x)
    got = res(ops.im2col(a, b, 2, 1, 1, 0, 1, 2, True, T.F32))  # [N, OH, OW, IC*KH*KW]
    for n, oy, ox, c, i, j in itertools.product(range(2), range(got.shape[1]), range(got.shape[2]), range(3),
                                                range(2), range(3)):
        assert got[n, oy, ox, c * 6 + i * 3 + j] == _at(x, (n, c, oy * 1 + i * 2 - 0, ox * 2 + j * 1 - 1))
    b1 = tensor(ctx, x[0])  # numpy [3, 5, 6]: ne (W 6, IC 5, N 3)
    a1 = ctx.new_tensor(T.F32, 3, 5, 2)  # [K, IC, OC]
    got1 = res(ops.im2col(a1, b1, 1, 0, 2, 0, 2, 0, False, T.F32))[0]  # [N, OW, IC*K]
    for n, ox, c, j in itertools.product(range(3), range(got1.shape[1]), range(5), range(3)):
        assert got1[n, ox, c * 3 + j] == _at(x[0], (n, c, ox + j * 2 - 2))


def test_im2col_3d_and_conv_3d_match_loops() -> None:
    n, ic, oc, d_, h_, w_ = 2, 2, 3, 4, 5, 6
    kd, kh, kw = 2, 3, 2
    s, p, dl = (1, 2, 1), (1, 0, 1), (1, 1, 2)  # (depth, height, width)
    x = rand(n * ic, d_, h_, w_, seed=4)
    k = rand(oc * ic, kd, kh, kw, seed=5)
    ctx = new_ctx()
    a, b = tensor(ctx, k), tensor(ctx, x)
    args = (s[2], s[1], s[0], p[2], p[1], p[0], dl[2], dl[1], dl[0])
    got = res(ops.conv_3d_direct(a, b, *args, ic, n, oc))  # [N*OC, OD, OH, OW]
    od, oh, ow = got.shape[1:]
    xs, ks = x.reshape(n, ic, d_, h_, w_), k.reshape(oc, ic, kd, kh, kw)
    want = np.zeros((n, oc, od, oh, ow))
    for bn, o, z, y, xx in itertools.product(range(n), range(oc), range(od), range(oh), range(ow)):
        want[bn, o, z, y, xx] = sum(
            ks[o, c, i, j, q] * _at(xs, (bn, c, z * s[0] + i * dl[0] - p[0], y * s[1] + j * dl[1] - p[1],
                                        xx * s[2] + q * dl[2] - p[2]))
            for c, i, j, q in itertools.product(range(ic), range(kd), range(kh), range(kw)))
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-5)
    cols = res(ops.im2col_3d(a, b, ic, *args, T.F32))  # [N*OD, OH, OW, IC*KD*KH*KW]
    assert cols.shape == (n * od, oh, ow, ic * kd * kh * kw)
    for bn, z, y, xx, c, i in itertools.product(range(n), range(od), range(oh), range(ow), range(ic), range(kd)):
        row = cols[bn * od + z, y, xx]
        for j, q in itertools.product(range(kh), range(kw)):
            assert row[((c * kd + i) * kh + j) * kw + q] == _at(
                xs, (bn, c, z * s[0] + i * dl[0] - p[0], y * s[1] + j * dl[1] - p[1], xx * s[2] + q * dl[2] - p[2]))
    composite = res(ops.conv_3d(a, b, ic, *args))
    np.testing.assert_allclose(composite, got, rtol=2e-2, atol=2e-2)


def test_conv_2d_dw_matches_loop_and_composite() -> None:
    n, c, h_, w_ = 2, 3, 7, 8
    x = rand(n, c, h_, w_, seed=6)
    k = rand(c, 1, 3, 3, seed=7)
    ctx = new_ctx()
    a, b = tensor(ctx, k), tensor(ctx, x)
    got = res(ops.conv_2d_dw_direct(a, b, 2, 1, 1, 2, 1, 2))
    for ch in range(c):
        want = _loop_conv2d(k[ch:ch + 1], x[:, ch:ch + 1], (1, 2), (2, 1), (2, 1), got.shape[2], got.shape[3])
        np.testing.assert_allclose(got[:, ch:ch + 1], want, rtol=1e-5, atol=1e-5)
    composite = res(ops.conv_2d_dw(a, b, 2, 1, 1, 2, 1, 2))
    np.testing.assert_allclose(composite, got, rtol=2e-2, atol=2e-2)


def test_conv_1d_and_dw_composites_match_loop() -> None:
    x = rand(1, 3, 11, seed=8)  # [N, IC, L]: N = 1, see conv_1d's docstring
    k = rand(4, 3, 3, seed=9)  # [OC, IC, K]
    ctx = new_ctx()
    a, b = tensor(ctx, k, T.F16), tensor(ctx, x)
    got = res(ops.conv_1d(a, b, 2, 1, 2))[0]  # [N, OC, OL]
    kf = res(ops.cpy(a, ctx.new_tensor(T.F32, 3, 3, 4)))
    want = _loop_conv2d(kf[0][:, :, None, :], x[:, :, None, :], (1, 2), (0, 1), (1, 2), 1, got.shape[2])[:, :, 0]
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    xd = rand(5, 13, seed=10)  # [C, L]
    kd = rand(5, 1, 3, seed=11)  # [C, 1, K]
    got_dw = res(ops.conv_1d_dw(tensor(ctx, kd), tensor(ctx, xd), 1, 1, 1))
    assert got_dw.shape[-2:] == (5, 13)
    for ch in range(5):
        want_ch = np.convolve(np.pad(xd[ch], 1), kd[ch, 0, ::-1], mode="valid")
        np.testing.assert_allclose(got_dw[0, 0, ch], want_ch, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_conv_transpose_2d_is_the_adjoint_of_conv_2d(stride: int) -> None:
    n, ic, oc, h_, w_, kh, kw = 2, 3, 4, 4, 5, 3, 2
    ctx = new_ctx()
    a = tensor(ctx, rand(ic, oc, kh, kw, seed=12))  # ne [KW, KH, OC, IC]
    b = tensor(ctx, rand(n, ic, h_, w_, seed=13))
    out = ops.conv_transpose_2d_p0(a, b, stride)
    z = res(out)
    x = rand(*z.shape, seed=14)
    y = res(ops.conv_2d_direct(a, tensor(ctx, x), stride, stride, 0, 0, 1, 1))  # kernel as [KW, KH, IC=OC_t, OC]
    np.testing.assert_allclose(np.vdot(z, x), np.vdot(b.numpy(), y), rtol=1e-5)


@pytest.mark.parametrize("stride", [1, 2, 4])
def test_conv_transpose_1d_is_the_adjoint_of_conv_1d_and_col2im_of_mul_mat(stride: int) -> None:
    ic, oc, length, k = 3, 2, 6, 3
    ctx = new_ctx()
    a = tensor(ctx, rand(ic, oc, k, seed=15))  # ne [K, OC, IC]
    b = tensor(ctx, rand(ic, length, seed=16))  # ne [L, IC]
    z = res(ops.conv_transpose_1d(a, b, stride))[0, 0]  # [OC, L_out]
    x = rand(oc, z.shape[1], seed=17)
    cols = ops.im2col(a, tensor(ctx, x), stride, 0, 0, 0, 1, 0, False, T.F32)  # kernel [K, IC=OC_t, OC=IC_t]
    y = res(ops.mul_mat(ops.reshape(cols, cols.ne[0], cols.ne[1]), ops.reshape(a, k * oc, ic)))  # [IC, L]
    np.testing.assert_allclose(np.vdot(z, x), np.vdot(b.numpy(), y[0, 0]), rtol=1e-5)
    kmat = ops.reshape(ops.cont(ops.permute(a, 1, 2, 0, 3)), ic, k * oc)  # rows oc*K + k of length IC
    mm = ops.mul_mat(kmat, ops.cont(ops.transpose(b)))  # [K*OC, L]
    np.testing.assert_allclose(res(ops.col2im_1d(mm, stride, oc, 0))[0, 0], z, rtol=1e-5, atol=1e-6)
    cropped = res(ops.col2im_1d(mm, stride, oc, 1))[0, 0]
    np.testing.assert_allclose(cropped, z[:, 1:-1], rtol=1e-5, atol=1e-6)


def test_shape_rules_refuse_bad_geometry() -> None:
    ctx = new_ctx()
    k = ctx.new_tensor(T.F32, 3, 3, 4, 8)
    x = ctx.new_tensor(T.F32, 10, 10, 5, 1)
    with pytest.raises(ShapeError, match=r"CONV_2D: kernel ne\[2\] .*input channels"):
        ops.conv_2d_direct(k, x, 1, 1, 0, 0, 1, 1)
    x4 = ctx.new_tensor(T.F32, 2, 2, 4, 1)
    with pytest.raises(ShapeError, match=r"CONV_2D: the dilated kernel's width .* larger than the padded input"):
        ops.conv_2d_direct(k, x4, 1, 1, 0, 0, 1, 1)
    x10 = ctx.new_tensor(T.F32, 10, 10, 4, 1)
    with pytest.raises(ShapeError, match="stride and dilation of the height must be >= 1"):
        ops.conv_2d_direct(k, x10, 1, 0, 0, 0, 1, 1)
    with pytest.raises(ShapeError, match="padding of the width must be >= 0"):
        ops.im2col(k, x10, 1, 1, -1, 0, 1, 1, True, T.F32)
    with pytest.raises(UnsupportedTypeError, match=r"CONV_2D: src1 \(input\)"):
        ops.conv_2d_direct(k, ctx.new_tensor(T.I32, 10, 10, 4, 1), 1, 1, 0, 0, 1, 1)
    with pytest.raises(ShapeError, match="CONV_TRANSPOSE_1D: ggml supports p0 == 0 and d0 == 1"):
        ops.conv_transpose_1d(ctx.new_tensor(T.F32, 3, 2, 4), ctx.new_tensor(T.F32, 7, 4), 1, 1, 1)
    with pytest.raises(ShapeError, match="CONV_3D: kernel ne\\[3\\] must be c\\*oc"):
        ops.conv_3d_direct(ctx.new_tensor(T.F32, 2, 2, 2, 7), ctx.new_tensor(T.F32, 4, 4, 4, 6), 1, 1, 1, 0, 0, 0,
                           1, 1, 1, 3, 2, 2)
    with pytest.raises(ShapeError, match="CONV_2D_DW: the kernel must be"):
        ops.conv_2d_dw_direct(ctx.new_tensor(T.F32, 3, 3, 1, 4), x, 1, 1, 0, 0, 1, 1)
    with pytest.raises(ShapeError, match="COL2IM_1D: src0 ne\\[0\\] must be a positive multiple"):
        ops.col2im_1d(ctx.new_tensor(T.F32, 7, 5), 1, 2, 0)
    with pytest.raises(ShapeError, match="IM2COL_3D: IC=4"):
        ops.im2col_3d(ctx.new_tensor(T.F32, 2, 2, 2, 6), ctx.new_tensor(T.F32, 4, 4, 4, 6), 4, 1, 1, 1, 0, 0, 0,
                      1, 1, 1)
    with pytest.raises(ShapeError, match=r"CONV_2D: s1=1\.5 must be an int32"):
        ops.conv_2d_direct(k, x10, 1, 1.5, 0, 0, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="IM2COL: dst_type q4_0 must be f32, f16 or bf16"):
        ops.im2col(k, x10, 1, 1, 0, 0, 1, 1, True, T.Q4_0)
    with pytest.raises(PyGGMLError, match="CONV_TRANSPOSE_2D: the kernel must be"):
        ops.conv_transpose_2d_p0(ctx.new_tensor(T.F32, 3, 3, 2, 5), x10, 2)
