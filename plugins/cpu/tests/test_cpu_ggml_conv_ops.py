"""The convolution family against ggml itself: IM2COL (2-D, 1-D; F32 and F16 patches), IM2COL_3D, COL2IM_1D,
CONV_TRANSPOSE_1D / _2D, CONV_2D, CONV_3D, CONV_2D_DW and ggml's composite conv_2d / conv_1d_dw, computed by the
cpu backend and by ggml's CPU library (`make llama-cpp-ref`, driven through ctypes with each op's own ggml
constructor) on the same inputs, F32 and F16 kernels, strides / padding / dilation and batch > 1."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, assert_close, run_pyggml

T = GGMLType
RNG = np.random.default_rng(2126)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("tk", [T.F32, T.F16])
@pytest.mark.parametrize(("xs", "ks", "prm"), [
    ((2, 5, 17, 21), (7, 5, 4, 3), (1, 1, 0, 0, 1, 1)),
    ((2, 6, 19, 16), (9, 6, 3, 3), (2, 3, 4, 2, 2, 1)),
    ((1, 16, 24, 20), (33, 16, 3, 3), (1, 1, 1, 1, 1, 1)),
])
def test_conv_2d(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType, xs: tuple[int, ...], ks: tuple[int, ...],
                 prm: tuple[int, ...]) -> None:
    x, k = _rand(*xs), _rand(*ks)
    out = gg.call("ggml_conv_2d_direct", gg.tensor(k, tk), gg.tensor(x, T.F32), *prm)
    got = run_pyggml(cpu_backend, lambda mk: O.conv_2d_direct(mk(k, tk), mk(x, T.F32), *prm))
    assert_close(got, gg.run(out, got.shape))
    out2 = gg.call("ggml_conv_2d", gg.tensor(k, tk), gg.tensor(x, T.F32), *prm)  # IM2COL + MUL_MAT + CONT
    got2 = run_pyggml(cpu_backend, lambda mk: O.conv_2d(mk(k, tk), mk(x, T.F32), *prm))
    assert_close(got2, gg.run(out2, got2.shape), 1e-6)  # F16 patches: the two matmuls may sum in other orders


@pytest.mark.parametrize("tk", [T.F32, T.F16])
def test_conv_2d_dw_and_conv_1d_dw(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType) -> None:
    x, k = _rand(2, 9, 34, 17), _rand(9, 1, 3, 3)
    for prm in ((1, 1, 0, 0, 1, 1), (2, 1, 1, 2, 2, 1)):
        out = gg.call("ggml_conv_2d_dw_direct", gg.tensor(k, tk), gg.tensor(x, T.F32), *prm)
        got = run_pyggml(cpu_backend, lambda mk, prm=prm: O.conv_2d_dw_direct(mk(k, tk), mk(x, T.F32), *prm))
        assert_close(got, gg.run(out, got.shape))
    x1, k1 = _rand(33, 97), _rand(33, 1, 5)
    out = gg.call("ggml_conv_1d_dw", gg.tensor(k1, tk), gg.tensor(x1, T.F32), 2, 2, 2)
    got = run_pyggml(cpu_backend, lambda mk: O.conv_1d_dw(mk(k1, tk), mk(x1, T.F32), 2, 2, 2))
    assert_close(got, gg.run(out, got.shape), 1e-6)


@pytest.mark.parametrize("tk", [T.F32, T.F16])
def test_conv_3d(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType) -> None:
    n, ic, oc = 2, 5, 17
    x, k = _rand(n * ic, 7, 9, 13), _rand(oc * ic, 2, 3, 4)
    prm = (2, 1, 3, 3, 2, 2, 2, 1, 2)
    out = gg.call("ggml_conv_3d_direct", gg.tensor(k, tk), gg.tensor(x, T.F32), *prm, ic, n, oc)
    got = run_pyggml(cpu_backend, lambda mk: O.conv_3d_direct(mk(k, tk), mk(x, T.F32), *prm, ic, n, oc))
    assert_close(got, gg.run(out, got.shape))


@pytest.mark.parametrize(("tk", "td"), [(T.F32, T.F32), (T.F16, T.F16), (T.F16, T.F32)])
def test_im2col(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType, td: GGMLType) -> None:
    x, k = _rand(2, 3, 9, 11), _rand(4, 3, 2, 3)
    prm = (2, 1, 1, 2, 2, 1, True)
    out = gg.call("ggml_im2col", gg.tensor(k, tk), gg.tensor(x, T.F32), *prm, int(td))
    got = run_pyggml(cpu_backend, lambda mk: O.im2col(mk(k, tk), mk(x, T.F32), *prm, td))
    np.testing.assert_array_equal(got, gg.run(out, got.shape, td))
    x1, k1 = _rand(1, 2, 24, 30), _rand(5, 24, 3)
    prm1 = (2, 0, 2, 0, 1, 0, False)
    out = gg.call("ggml_im2col", gg.tensor(k1, tk), gg.tensor(x1, T.F32), *prm1, int(td))
    got = run_pyggml(cpu_backend, lambda mk: O.im2col(mk(k1, tk), mk(x1, T.F32), *prm1, td))
    np.testing.assert_array_equal(got, gg.run(out, got.shape, td))
    x3, k3 = _rand(4, 10, 11, 12), _rand(6, 3, 2, 3)
    prm3 = (1, 2, 1, 1, 0, 1, 2, 1, 1)
    out = gg.call("ggml_im2col_3d", gg.tensor(k3, tk), gg.tensor(x3, T.F32), ctypes.c_int64(2), *prm3, int(td))
    got = run_pyggml(cpu_backend, lambda mk: O.im2col_3d(mk(k3, tk), mk(x3, T.F32), 2, *prm3, td))
    np.testing.assert_array_equal(got, gg.run(out, got.shape, td))


@pytest.mark.parametrize("s0", [1, 2, 3])
@pytest.mark.parametrize("tk", [T.F32, T.F16])
def test_conv_transpose(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType, s0: int) -> None:
    k, x = _rand(8, 6, 5), _rand(8, 37)  # kernel [K 5, OC 6, IC 8], input [L 37, IC 8]
    out = gg.call("ggml_conv_transpose_1d", gg.tensor(k, tk), gg.tensor(x, T.F32), s0, 0, 1)
    got = run_pyggml(cpu_backend, lambda mk: O.conv_transpose_1d(mk(k, tk), mk(x, T.F32), s0))
    assert_close(got, gg.run(out, got.shape))
    k2, x2 = _rand(4, 5, 3, 4), _rand(2, 4, 7, 9)  # kernel [KW 4, KH 3, OC 5, IC 4], input [9, 7, 4, 2]
    out = gg.call("ggml_conv_transpose_2d_p0", gg.tensor(k2, tk), gg.tensor(x2, T.F32), s0)
    got = run_pyggml(cpu_backend, lambda mk: O.conv_transpose_2d_p0(mk(k2, tk), mk(x2, T.F32), s0))
    assert_close(got, gg.run(out, got.shape))


@pytest.mark.parametrize(("k", "oc", "t_in", "s0", "p0"), [(4, 3, 7, 2, 0), (16, 2, 20, 8, 4), (5, 2, 9, 3, 2)])
@pytest.mark.parametrize("t", [T.F32, T.F16])
def test_col2im_1d(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType, k: int, oc: int, t_in: int, s0: int,
                   p0: int) -> None:
    cols = _rand(t_in, k * oc)
    out = gg.call("ggml_col2im_1d", gg.tensor(cols, t), s0, oc, p0)
    got = run_pyggml(cpu_backend, lambda mk: O.col2im_1d(mk(cols, t), s0, oc, p0))
    assert_close(got, gg.run(out, got.shape, t), 1e-10 if t == T.F32 else 1e-6)
