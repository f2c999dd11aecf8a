"""Reference kernels of the spatial ops (POOL_1D, POOL_2D, POOL_2D_BACK, UPSCALE, PAD_REFLECT_1D, ROLL,
TIMESTEP_EMBEDDING, WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS), vectorised over numpy's 4-D view (numpy
order: [i3, i2, i1, i0]).

One place where float32 is part of the semantics: UPSCALE's nearest-neighbour source index is ggml's float32
quotient i / (ne / ne_src), truncated, so the pixel picked at a rounding boundary is ggml's (the interpolation
weights are exact float64; a float32 rounding there changes a value by an ulp, not which pixel is read).
"""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.ops.spatial import PoolOp, ScaleMode, UpscaleParams
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, src
from pyggml.tensor import Tensor

rules = KernelRules()

FLT_MAX = float(np.finfo(np.float32).max)
"""What ggml's MAX pool gives for a window wholly in the padding (its initial value, -FLT_MAX)."""


def _window_index(n: int, k: int, s: int, p: int, n_out: int) -> tuple[Array, Array]:
    """Input indices [n_out, k] of each output's window (clipped into range) and whether each is real data."""
    idx = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :]
    valid = (idx >= 0) & (idx < n)
    return np.clip(idx, 0, max(n - 1, 0)), valid


def _pool(x: Array, valid: Array, op: PoolOp, axes: tuple[int, ...], divisor: Array | float) -> Array:
    """Reduce the gathered windows x over `axes`, padding positions (valid False) excluded."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if op is PoolOp.MAX:
            m = np.where(valid, x, -np.inf).max(axis=axes)
            return np.where(np.isneginf(m) & ~valid.any(axis=axes), -FLT_MAX, m)
        total = np.where(valid, x, 0.0).sum(axis=axes)
        return np.where(np.asarray(divisor) > 0, total / np.maximum(divisor, 1), 0.0)


@rules.kernel(Op.POOL_1D)
def pool_1d(dst: Tensor) -> None:
    """Windows along dim 0; AVG divides by the real elements of each window (ggml's POOL_1D)."""
    p = dst.params
    x = load(src(dst, 0))
    idx, valid = _window_index(x.shape[3], p.k0, p.s0, p.p0, dst.ne[0])
    g = x[..., idx]  # [n3, n2, n1, OW, k]
    store(dst, _pool(g, valid, p.op, (-1,), valid.sum(axis=1)))


@rules.kernel(Op.POOL_2D)
def pool_2d(dst: Tensor) -> None:
    """k1 x k0 windows over dims 1 and 0; AVG divides by k0*k1 whatever part is padding (ggml's POOL_2D)."""
    p = dst.params
    x = load(src(dst, 0))
    ix, vx = _window_index(x.shape[3], p.k0, p.s0, p.p0, dst.ne[0])
    iy, vy = _window_index(x.shape[2], p.k1, p.s1, p.p1, dst.ne[1])
    g = x[:, :, iy[:, None, :, None], ix[None, :, None, :]]  # [n3, n2, OH, OW, k1, k0]
    valid = vy[:, None, :, None] & vx[None, :, None, :]
    store(dst, _pool(g, valid, p.op, (-2, -1), float(p.k0 * p.k1)))


@rules.kernel(Op.POOL_2D_BACK)
def pool_2d_back(dst: Tensor) -> None:
    """The adjoint of POOL_2D's window reads: AVG spreads grad / (k0*k1) over the window's elements inside x;
    MAX gives grad to the element ggml's scan picks (pyggml.ops.pool_2d_back states it), found here with the
    same comparisons, tap by tap in the window's row-major order, for every output at once."""
    p = dst.params
    g, x = load(src(dst, 0)), load(src(dst, 1))  # [n3, n2, OH, OW], [n3, n2, H, W]
    ix, vx = _window_index(x.shape[3], p.k0, p.s0, p.p0, g.shape[3])
    iy, vy = _window_index(x.shape[2], p.k1, p.s1, p.p1, g.shape[2])
    out = np.zeros(x.shape)
    taps = [(ky, kx) for ky in range(p.k1) for kx in range(p.k0)]
    i3 = np.arange(g.shape[0])[:, None, None, None]
    i2 = np.arange(g.shape[1])[None, :, None, None]
    if p.op is PoolOp.AVG:
        share = g / float(p.k0 * p.k1)
        for ky, kx in taps:
            valid = vy[:, ky, None] & vx[None, :, kx]  # [OH, OW]
            np.add.at(out, (i3, i2, iy[:, ky, None], ix[None, :, kx]), np.where(valid, share, 0.0))
        store(dst, out)
        return
    best = np.full(g.shape, -FLT_MAX)
    by = np.full(g.shape, -1)
    bx = np.full(g.shape, -1)
    with np.errstate(invalid="ignore"):
        for ky, kx in taps:
            valid = vy[:, ky, None] & vx[None, :, kx]
            v = x[:, :, iy[:, ky, None], ix[None, :, kx]]
            take = valid & ~(v <= best)  # ggml's test: a NaN, on either side, takes the place
            best = np.where(take, v, best)
            by = np.where(take, iy[:, ky, None], by)
            bx = np.where(take, ix[None, :, kx], bx)
    hit = by >= 0
    j3, j2 = np.indices(g.shape)[:2]
    np.add.at(out, (j3[hit], j2[hit], by[hit], bx[hit]), g[hit])
    store(dst, out)


def nearest_index(n_dst: int, n_src: int, sf: np.float32) -> Array:
    """ggml's nearest source index: (int64)((float)i / sf) in float32, clipped into the source."""
    q = np.arange(n_dst, dtype=np.float32) / sf
    return np.minimum(q.astype(np.int64), n_src - 1)


def scale_factor(n_dst: int, n_src: int, align_corners: bool) -> np.float32:
    """ggml's float32 scale of one dim; align corners maps first and last pixel onto each other."""
    if align_corners and n_dst > 1 and n_src > 1:
        return np.float32(n_dst - 1) / np.float32(n_src - 1)
    return np.float32(n_dst) / np.float32(n_src)


def bilinear_weights(n_dst: int, n_src: int, align_corners: bool) -> Array:
    """[n_dst, n_src] interpolation matrix of one dim: output i samples the source at
    x = (i + o) * n_src' / n_dst' - o (o = 0.5, or 0 with the scale of the corners when aligned), between the two
    neighbouring pixels clamped into the source (positions outside take the edge pixel)."""
    x, _ = _source_pos(n_dst, n_src, align_corners)
    x0 = np.floor(x).astype(np.int64)
    lo, hi = np.clip(x0, 0, n_src - 1), np.clip(x0 + 1, 0, n_src - 1)
    d = np.clip(x - lo, 0.0, 1.0)
    w = np.zeros((n_dst, n_src))
    rows = np.arange(n_dst)
    np.add.at(w, (rows, lo), 1.0 - d)
    np.add.at(w, (rows, hi), d)
    return w


def _source_pos(n_dst: int, n_src: int, align_corners: bool) -> tuple[Array, float]:
    """Each output's source position x = (i + o) / sf - o and the offset o (0.5: pixel centres; 0 when aligned)."""
    if align_corners and n_dst > 1 and n_src > 1:
        return np.arange(n_dst) * ((n_src - 1) / (n_dst - 1)), 0.0
    off = 0.0 if align_corners else 0.5
    return (np.arange(n_dst) + off) * (n_src / n_dst) - off, off


def bicubic_weights(n_dst: int, n_src: int, align_corners: bool) -> Array:
    """[n_dst, n_src] cubic-convolution matrix (a = -0.75, PyTorch's and ggml's): taps floor(x) - 1 .. + 2, each
    clamped into the source."""
    x, _ = _source_pos(n_dst, n_src, align_corners)
    x0 = np.floor(x)
    t = x - x0
    a = -0.75

    def near(d: Array) -> Array:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: Array) -> Array:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    w = np.zeros((n_dst, n_src))
    rows = np.arange(n_dst)
    for k, wk in ((-1, far(t + 1)), (0, near(t)), (1, near(1 - t)), (2, far(2 - t))):
        np.add.at(w, (rows, np.clip(x0.astype(np.int64) + k, 0, n_src - 1)), wk)
    return w


def antialias_weights(n_dst: int, n_src: int, align_corners: bool) -> Array:
    """[n_dst, n_src] triangle filter of half-width max(1, 1/sf) around c = (i + o) / sf (ggml's antialiased
    bilinear, PyTorch's antialias=True) over source pixels trunc(c - support + o) .. trunc(c + support + o) - 1,
    each row normalised to sum 1 (a row without weight stays 0). The range is part of the semantics and ggml
    computes it in float32 (with align corners, o = 0, its end can cut a pixel of weight ~1/support), so the
    reference does too; the weights are float64."""
    f32 = np.float32
    off = f32(0.0 if align_corners else 0.5)
    sf = scale_factor(n_dst, n_src, align_corners)
    support = max(f32(1.0), f32(1.0) / sf)
    centre = (np.arange(n_dst, dtype=f32) + off) / sf
    lo = np.maximum((centre - support + off).astype(np.int64), 0)[:, None]
    hi = np.minimum((centre + support + off).astype(np.int64), n_src)[:, None]
    s = np.arange(n_src)[None, :]
    d = (s - centre[:, None].astype(np.float64) + float(off)) / float(support)
    w: Array = np.maximum(1.0 - np.abs(d), 0.0) * ((s >= lo) & (s < hi))
    total = w.sum(axis=1, keepdims=True)
    out: Array = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    return out


def _weights(p: UpscaleParams, n_dst: int, n_src: int) -> Array:
    if p.scale_mode == ScaleMode.BICUBIC:
        return bicubic_weights(n_dst, n_src, p.align_corners)
    if p.antialias:
        return antialias_weights(n_dst, n_src, p.align_corners)
    return bilinear_weights(n_dst, n_src, p.align_corners)


@rules.kernel(Op.UPSCALE)
def upscale(dst: Tensor) -> None:
    """Resample dims 0 and 1 (nearest, or a separable filter: bilinear, bicubic, antialiased bilinear), dims 2
    and 3 nearest."""
    p: UpscaleParams = dst.params
    x = load(src(dst, 0))
    n3, n2, n1, n0 = x.shape
    ac = p.align_corners
    x = x[nearest_index(dst.ne[3], n3, scale_factor(dst.ne[3], n3, False))]
    x = x[:, nearest_index(dst.ne[2], n2, scale_factor(dst.ne[2], n2, False))]
    if p.scale_mode == ScaleMode.NEAREST:
        y = x[:, :, nearest_index(dst.ne[1], n1, scale_factor(dst.ne[1], n1, ac))]
        y = y[..., nearest_index(dst.ne[0], n0, scale_factor(dst.ne[0], n0, ac))]
    else:
        y = np.einsum("yj,abji,xi->abyx", _weights(p, dst.ne[1], n1), x, _weights(p, dst.ne[0], n0))
    store(dst, y)


@rules.kernel(Op.PAD_REFLECT_1D)
def pad_reflect_1d(dst: Tensor) -> None:
    """Mirror dim 0 about its first and last element (numpy's 'reflect')."""
    p = dst.params
    store(dst, np.pad(load(src(dst, 0)), ((0, 0), (0, 0), (0, 0), (p.p0, p.p1)), mode="reflect"))


@rules.kernel(Op.ROLL)
def roll(dst: Tensor) -> None:
    """dst[i] = a[(i - shift) mod ne] in each dim."""
    s = dst.params.shifts
    store(dst, np.roll(load(src(dst, 0)), (s[3], s[2], s[1], s[0]), axis=(0, 1, 2, 3)))


@rules.kernel(Op.TIMESTEP_EMBEDDING)
def timestep_embedding(dst: Tensor) -> None:
    """Row i: cos(t_i f_j), then sin(t_i f_j), f_j = max_period^(-j/half), a 0 last when dim is odd."""
    p = dst.params
    t = load(src(dst, 0))[0, 0, 0]  # [N]
    half = p.dim // 2
    out = np.zeros((t.shape[0], p.dim))
    if half:
        freq = np.exp(-np.log(p.max_period) * np.arange(half) / half)
        arg = t[:, None] * freq[None, :]
        out[:, :half] = np.cos(arg)
        out[:, half : 2 * half] = np.sin(arg)
    store(dst, out)


@rules.kernel(Op.WIN_PART)
def win_part(dst: Tensor) -> None:
    """[1, H, W, C] zero-padded to whole windows, window (py, px) to dst plane py*npx + px."""
    p = dst.params
    x = load(src(dst, 0))[0]  # [H, W, C]
    h, w_, c = x.shape
    x = np.pad(x, ((0, p.npy * p.w - h), (0, p.npx * p.w - w_), (0, 0)))
    x = x.reshape(p.npy, p.w, p.npx, p.w, c).transpose(0, 2, 1, 3, 4)
    store(dst, x.reshape(p.npy * p.npx, p.w, p.w, c))


@rules.kernel(Op.WIN_UNPART)
def win_unpart(dst: Tensor) -> None:
    """The windows of src0 put back in place, the padding cropped."""
    p = dst.params
    x = load(src(dst, 0))  # [n, w, w, C]
    npx, npy = -(-p.w0 // p.w), -(-p.h0 // p.w)
    c = x.shape[3]
    img = x.reshape(npy, npx, p.w, p.w, c).transpose(0, 2, 1, 3, 4).reshape(npy * p.w, npx * p.w, c)
    store(dst, img[None, : p.h0, : p.w0])


@rules.kernel(Op.GET_REL_POS)
def get_rel_pos(dst: Tensor) -> None:
    """dst[q, k] = a[size - 1 - k + q] (numpy order, C last)."""
    a = load(src(dst, 0))[0, 0]  # [2*size - 1, C]
    size = dst.ne[1]
    q, k = np.arange(size)[:, None], np.arange(size)[None, :]
    store(dst, a[size - 1 - k + q][None])


@rules.kernel(Op.ADD_REL_POS)
def add_rel_pos(dst: Tensor) -> None:
    """a[n, qy, qx, ky, kx] + pw[n, qy, qx, kx] + ph[n, qy, qx, ky]."""
    a = load(src(dst, 0))
    pw, ph = load(src(dst, 1)), load(src(dst, 2))  # [n, qh, qw, k]
    n, qh, qw, k = pw.shape
    out = a.reshape(n, qh, qw, k, k) + pw[:, :, :, None, :] + ph[:, :, :, :, None]
    store(dst, out.reshape(a.shape))
