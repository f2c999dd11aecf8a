"""Reference kernels of the convolution family, in float64 on numpy-order arrays ([N, C, H, W] for ggml's
[W, H, C, N]). Every forward conv goes through `windows` (the zero-padded, strided, dilated patches of an input);
the transposed convs scatter-add kernel taps with strided slices. core/tests/test_reference_conv.py checks these
against a direct loop over output positions and the transposed ones against the adjoint of the forward conv."""

from __future__ import annotations

from collections.abc import Sequence
from types import EllipsisType

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pyggml.ops import conv
from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, src
from pyggml.tensor import Tensor

rules = KernelRules()


def windows(x: Array, ks: Sequence[int], s: Sequence[int], p: Sequence[int], d: Sequence[int]) -> Array:
    """x [..., *spatial] (the last len(ks) axes, numpy order) -> [..., *out, *ks]: element (o, k) is
    x[o*s + k*d - p] per spatial axis, 0 where that falls outside x (zero padding)."""
    nsp = len(ks)
    lead = x.ndim - nsp
    xp = np.pad(x, [(0, 0)] * lead + [(pi, pi) for pi in p])
    span = tuple(di * (ki - 1) + 1 for ki, di in zip(ks, d, strict=True))
    w = sliding_window_view(xp, span, axis=tuple(range(lead, x.ndim)))
    idx: tuple[EllipsisType | slice, ...] = (Ellipsis, *(slice(None, None, si) for si in s),
                                            *(slice(None, None, di) for di in d))
    return w[idx]


@rules.kernel(Op.IM2COL)
def im2col(dst: Tensor) -> None:
    """Rows of patches: [N, OH, OW, IC*KH*KW] (2-D) or [N, OW, IC*KW] (1-D), channel-major inside a row."""
    p = dst.params
    assert isinstance(p, conv.Im2colParams)
    a, b = src(dst, 0), load(src(dst, 1))
    if p.is_2d:
        win = windows(b, (a.ne[1], a.ne[0]), (p.s1, p.s0), (p.p1, p.p0), (p.d1, p.d0))  # [N, IC, OH, OW, KH, KW]
        cols = win.transpose(0, 2, 3, 1, 4, 5)
    else:
        win = windows(b[0], (a.ne[0],), (p.s0,), (p.p0,), (p.d0,))  # [N, IC, OW, KW]
        cols = win.transpose(0, 2, 1, 3)[np.newaxis]
    store(dst, cols.reshape(dst.ne[::-1]))


@rules.kernel(Op.IM2COL_BACK)
def im2col_back(dst: Tensor) -> None:
    """The adjoint of `im2col`: each kernel tap's column of the gradient is added back, with a strided slice, onto
    the zero-padded input positions that tap read; the padding is then cut off."""
    p = dst.params
    assert isinstance(p, conv.Im2colBackParams)
    a, g = src(dst, 1), load(src(dst, 0))
    ks: tuple[int, ...]
    s: tuple[int, ...]
    pad: tuple[int, ...]
    d: tuple[int, ...]
    if p.is_2d:
        n, ic, ih, iw = dst.ne[::-1]
        kh, kw = a.ne[1], a.ne[0]
        taps = g.reshape(n, g.shape[1], g.shape[2], ic, kh, kw).transpose(0, 3, 1, 2, 4, 5)  # [N, IC, OH, OW, ..]
        ks, s, pad, d = (kh, kw), (p.s1, p.s0), (p.p1, p.p0), (p.d1, p.d0)
        out = np.zeros((n, ic, ih + 2 * p.p1, iw + 2 * p.p0))
    else:
        _, n, ic, iw = dst.ne[::-1]
        kw = a.ne[0]
        taps = g[0].reshape(n, g.shape[2], ic, kw).transpose(0, 2, 1, 3)  # [N, IC, OW, KW]
        ks, s, pad, d = (kw,), (p.s0,), (p.p0,), (p.d0,)
        out = np.zeros((n, ic, iw + 2 * p.p0))
    nsp = len(ks)
    n_out = taps.shape[2 : 2 + nsp]
    for k in np.ndindex(*ks):
        at: tuple[EllipsisType | slice, ...] = (Ellipsis, *(
            slice(ki * di, ki * di + si * (no - 1) + 1, si) for ki, di, si, no in zip(k, d, s, n_out, strict=True)))
        tap: tuple[EllipsisType | int, ...] = (Ellipsis, *k)
        out[at] += taps[tap]
    crop: tuple[EllipsisType | slice, ...] = (Ellipsis, *(slice(pi, out.shape[2 + i] - pi) for i, pi in enumerate(pad)))
    store(dst, out[crop].reshape(dst.ne[::-1]))


@rules.kernel(Op.IM2COL_3D)
def im2col_3d(dst: Tensor) -> None:
    """Rows of 3-D patches: [N*OD, OH, OW, IC*KD*KH*KW]."""
    p = dst.params
    assert isinstance(p, conv.Im2col3dParams)
    a, b = src(dst, 0), load(src(dst, 1))
    x = b.reshape(b.shape[0] // p.ic, p.ic, *b.shape[1:])  # [N, IC, ID, IH, IW]
    win = windows(x, (a.ne[2], a.ne[1], a.ne[0]), (p.s2, p.s1, p.s0), (p.p2, p.p1, p.p0), (p.d2, p.d1, p.d0))
    store(dst, win.transpose(0, 2, 3, 4, 1, 5, 6, 7).reshape(dst.ne[::-1]))


@rules.kernel(Op.COL2IM_1D)
def col2im_1d(dst: Tensor) -> None:
    """dst[o, t] = sum of columns[t_in, o*K + k] over t_in*s0 + k = t + p0."""
    p = dst.params
    assert isinstance(p, conv.Col2im1dParams)
    cols = load(src(dst, 0))[0, 0]  # [T_in, K*OC]
    t_in, k = cols.shape[0], cols.shape[1] // p.oc
    taps = cols.reshape(t_in, p.oc, k)
    full = np.zeros((p.oc, (t_in - 1) * p.s0 + k))
    for j in range(k):
        full[:, j : j + p.s0 * (t_in - 1) + 1 : p.s0] += taps[:, :, j].T
    store(dst, full[:, p.p0 : p.p0 + dst.ne[0]][np.newaxis, np.newaxis])


@rules.kernel(Op.CONV_TRANSPOSE_1D)
def conv_transpose_1d(dst: Tensor) -> None:
    """dst[o, l*s0 + k] += sum_c a[c, o, k] * b[c, l] (a numpy [IC, OC, K], b [IC, L])."""
    p = dst.params
    assert isinstance(p, conv.ConvTranspose1dParams)
    a = load(src(dst, 0))[0]
    b = load(src(dst, 1))[0, 0]
    taps = np.einsum("cok,cl->okl", a, b)
    out = np.zeros((a.shape[1], dst.ne[0]))
    length = b.shape[1]
    for k in range(a.shape[2]):
        out[:, k : k + p.s0 * (length - 1) + 1 : p.s0] += taps[:, k]
    store(dst, out[np.newaxis, np.newaxis])


def _conv_2d_windows(dst: Tensor) -> tuple[Array, Array]:
    """CONV_2D's and CONV_2D_DW's operands: the kernel a [.., .., KH, KW] and b's windows [N, C, OH, OW, KH, KW]
    under the op's strides, padding and dilation."""
    p = dst.params
    assert isinstance(p, conv.Conv2dParams)
    a, b = load(src(dst, 0)), load(src(dst, 1))
    return a, windows(b, a.shape[2:], (p.s1, p.s0), (p.p1, p.p0), (p.d1, p.d0))


@rules.kernel(Op.CONV_2D)
def conv_2d(dst: Tensor) -> None:
    """dst[n, o, y, x] = sum_{c, i, j} a[o, c, i, j] * window(b)[n, c, y, x, i, j]."""
    a, win = _conv_2d_windows(dst)
    store(dst, np.einsum("ncyxij,ocij->noyx", win, a, optimize=True))


@rules.kernel(Op.CONV_2D_DW)
def conv_2d_dw(dst: Tensor) -> None:
    """dst[n, c, y, x] = sum_{i, j} a[c, 0, i, j] * window(b)[n, c, y, x, i, j]: one kernel per channel."""
    a, win = _conv_2d_windows(dst)
    store(dst, np.einsum("ncyxij,cij->ncyx", win, a[:, 0], optimize=True))


@rules.kernel(Op.CONV_3D)
def conv_3d(dst: Tensor) -> None:
    """CONV_2D one dimension up, with channels and batch folded into ne[3] (input n*IC + c, kernel o*IC + c,
    result n*OC + o)."""
    p = dst.params
    assert isinstance(p, conv.Conv3dParams)
    a, b = load(src(dst, 0)), load(src(dst, 1))
    w = a.reshape(p.oc, p.c, *a.shape[1:])
    x = b.reshape(p.n, p.c, *b.shape[1:])
    win = windows(x, w.shape[2:], (p.s2, p.s1, p.s0), (p.p2, p.p1, p.p0), (p.d2, p.d1, p.d0))
    out = np.einsum("nczyxijk,ocijk->nozyx", win, w, optimize=True)
    store(dst, out.reshape(dst.ne[::-1]))


@rules.kernel(Op.CONV_TRANSPOSE_2D)
def conv_transpose_2d(dst: Tensor) -> None:
    """dst[n, o, y*s + i, x*s + j] += sum_c a[c, o, i, j] * b[n, c, y, x] (a numpy [IC, OC, KH, KW])."""
    p = dst.params
    assert isinstance(p, conv.ConvTranspose2dParams)
    a, b = load(src(dst, 0)), load(src(dst, 1))
    s = p.stride
    taps = np.einsum("coij,ncyx->noijyx", a, b, optimize=True)
    out = np.zeros(dst.ne[::-1])
    h, w = b.shape[2], b.shape[3]
    for i in range(a.shape[2]):
        for j in range(a.shape[3]):
            out[:, :, i : i + s * (h - 1) + 1 : s, j : j + s * (w - 1) + 1 : s] += taps[:, :, i, j]
    store(dst, out)
