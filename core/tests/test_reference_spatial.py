"""The spatial reference kernels (vectorised numpy) against scalar loops written from the index arithmetic of
ggml's CPU kernels: pooling window by window, bilinear as an explicit 4-tap per pixel, bicubic as 16 taps,
antialiased bilinear over ggml's source range, ADD_REL_POS through ggml's
flat indices, WIN_PART / WIN_UNPART element by element and as inverses; and the shape rules' refusals."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.ops import PoolOp, ScaleMode
from pyggml.ops.spatial import SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f32, new_ctx, rand, result, tensor

FLT_MAX = float(np.finfo(np.float32).max)


def _pool1d_loop(x: np.ndarray, op: PoolOp, k: int, s: int, p: int) -> np.ndarray:
    n = x.shape[-1]
    ow = (n + 2 * p - k) // s + 1
    out = np.empty((*x.shape[:-1], ow))
    for idx in np.ndindex(*x.shape[:-1]):
        for o in range(ow):
            vals = [x[idx][j] for j in range(o * s - p, o * s - p + k) if 0 <= j < n]
            if op is PoolOp.MAX:
                out[idx][o] = max(vals) if vals else -FLT_MAX
            else:
                out[idx][o] = sum(vals) / len(vals) if vals else 0.0
    return out


def _pool2d_loop(x: np.ndarray, op: PoolOp, k0: int, k1: int, s0: int, s1: int, p0: int, p1: int) -> np.ndarray:
    h, w = x.shape[-2:]
    oh, ow = (h + 2 * p1 - k1) // s1 + 1, (w + 2 * p0 - k0) // s0 + 1
    out = np.empty((*x.shape[:-2], oh, ow))
    for idx in np.ndindex(*x.shape[:-2]):
        for oy in range(oh):
            for ox in range(ow):
                vals = [x[idx][iy, ix] for iy in range(oy * s1 - p1, oy * s1 - p1 + k1)
                        for ix in range(ox * s0 - p0, ox * s0 - p0 + k0) if 0 <= iy < h and 0 <= ix < w]
                if op is PoolOp.MAX:
                    out[idx][oy, ox] = max(vals) if vals else -FLT_MAX
                else:
                    out[idx][oy, ox] = sum(vals) / (k0 * k1)
    return out


@pytest.mark.parametrize("op", list(PoolOp))
@pytest.mark.parametrize(("k", "s", "p"), [(1, 1, 0), (3, 2, 1), (2, 3, 2), (3, 1, 3), (5, 5, 0)])
def test_pool_1d_matches_window_loop(op: PoolOp, k: int, s: int, p: int) -> None:
    x = rand(2, 3, 11, seed=k * 7 + s)
    got = result(ops.pool_1d(tensor(new_ctx(), x), op, k, s, p))
    np.testing.assert_allclose(got.reshape(2, 3, -1), f32(_pool1d_loop(x, op, k, s, p)), rtol=1e-6)


@pytest.mark.parametrize("op", list(PoolOp))
@pytest.mark.parametrize("kps", [(3, 3, 1, 1, 0, 0), (3, 2, 2, 1, 1, 1), (2, 3, 1, 2, 1, 0), (1, 1, 2, 2, 1, 1)])
def test_pool_2d_matches_window_loop(op: PoolOp, kps: tuple[int, ...]) -> None:
    x = rand(3, 7, 9, seed=sum(kps))
    got = result(ops.pool_2d(tensor(new_ctx(), x), op, *kps))
    np.testing.assert_allclose(got.reshape(3, *got.shape[-2:]), f32(_pool2d_loop(x, op, *kps)), rtol=1e-6)


def test_pool_reads_f16() -> None:
    x = rand(4, 10, seed=2)
    out = ops.pool_1d(tensor(new_ctx(), x, T.F16), PoolOp.AVG, 2, 2)
    assert out.type == T.F32
    xh = x.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(result(out).reshape(4, 5), f32(_pool1d_loop(xh, PoolOp.AVG, 2, 2, 0)), rtol=1e-6)


def _src_pos(i: int, n_dst: int, n_src: int, align: bool) -> float:
    if align and n_dst > 1 and n_src > 1:
        return i * (n_src - 1) / (n_dst - 1)
    off = 0.0 if align else 0.5
    return (i + off) * n_src / n_dst - off


def _per_pixel(x: np.ndarray, oh: int, ow: int, align: bool,
               pixel: Callable[[np.ndarray, float, float], float]) -> np.ndarray:
    """The oracles' frame: every output pixel (i1, i0) of every image of x is pixel(image, y, x) at its source
    position by ggml's rule (_src_pos)."""
    h, w = x.shape[-2:]
    out = np.empty((*x.shape[:-2], oh, ow))
    for idx in np.ndindex(*x.shape[:-2]):
        for i1 in range(oh):
            for i0 in range(ow):
                out[idx][i1, i0] = pixel(x[idx], _src_pos(i1, oh, h, align), _src_pos(i0, ow, w, align))
    return out


def _bilinear_loop(x: np.ndarray, oh: int, ow: int, align: bool) -> np.ndarray:
    """One 4-tap interpolation per output pixel, as ggml's kernel: floor, clamp both taps, clamp the fraction."""
    def pixel(img: np.ndarray, y: float, xx: float) -> float:
        h, w = img.shape
        y0, x0 = min(max(math.floor(y), 0), h - 1), min(max(math.floor(xx), 0), w - 1)
        y1, x1 = min(max(math.floor(y) + 1, 0), h - 1), min(max(math.floor(xx) + 1, 0), w - 1)
        dy, dx = min(max(y - y0, 0.0), 1.0), min(max(xx - x0, 0.0), 1.0)
        a, b, c, d = img[y0, x0], img[y0, x1], img[y1, x0], img[y1, x1]
        return float(a * (1 - dx) * (1 - dy) + b * dx * (1 - dy) + c * (1 - dx) * dy + d * dx * dy)

    return _per_pixel(x, oh, ow, align, pixel)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("src", "dst"), [((5, 2), (7, 5)), ((7, 5), (5, 2)), ((4, 1), (8, 2)), ((1, 4), (1, 1)),
                                          ((6, 6), (12, 12))])
def test_bilinear_matches_four_tap_loop(align: bool, src: tuple[int, int], dst: tuple[int, int]) -> None:
    x = rand(2, *src, seed=src[0] + dst[1])
    mode = ScaleMode.BILINEAR | (SCALE_FLAG_ALIGN_CORNERS if align else 0)
    got = result(ops.interpolate(tensor(new_ctx(), x), dst[1], dst[0], 2, 1, mode))
    np.testing.assert_allclose(got.reshape(2, *dst), f32(_bilinear_loop(x, *dst, align)), rtol=1e-6, atol=1e-7)


def _cubic(t: float) -> tuple[float, float, float, float]:
    a = -0.75
    near = [((a + 2) * d - (a + 3)) * d * d + 1 for d in (t, 1 - t)]
    far = [((a * d - 5 * a) * d + 8 * a) * d - 4 * a for d in (t + 1, 2 - t)]
    return far[0], near[0], near[1], far[1]


def _bicubic_loop(x: np.ndarray, oh: int, ow: int, align: bool) -> np.ndarray:
    """Sixteen taps per output pixel, rows first as ggml's kernel, each tap clamped into the image."""
    def pixel(img: np.ndarray, y: float, xx: float) -> float:
        h, w = img.shape
        y0, x0 = math.floor(y), math.floor(xx)
        wy, wx = _cubic(y - y0), _cubic(xx - x0)
        rows = [sum(wx[m] * img[min(max(y0 + k - 1, 0), h - 1), min(max(x0 + m - 1, 0), w - 1)] for m in range(4))
                for k in range(4)]
        return float(sum(wy[k] * rows[k] for k in range(4)))

    return _per_pixel(x, oh, ow, align, pixel)


def _antialias_loop(x: np.ndarray, oh: int, ow: int, align: bool) -> np.ndarray:
    """ggml's antialiased bilinear pixel by pixel: the source range it visits (float32, as ggml computes it),
    triangle weights, normalised."""
    h, w = x.shape[-2:]
    out = np.empty((*x.shape[:-2], oh, ow))
    f = np.float32
    off = f(0.0 if align else 0.5)

    def geometry(i: int, nd: int, ns: int) -> tuple[float, float, range]:
        sf = f(nd - 1) / f(ns - 1) if align and nd > 1 and ns > 1 else f(nd) / f(ns)
        support = max(f(1.0), f(1.0) / sf)
        c = (f(i) + off) / sf
        return float(c), float(support), range(max(int(c - support + off), 0), min(int(c + support + off), ns))

    for idx in np.ndindex(*x.shape[:-2]):
        for i1 in range(oh):
            cy, sup_y, ys = geometry(i1, oh, h)
            for i0 in range(ow):
                cx, sup_x, xs = geometry(i0, ow, w)
                val = total = 0.0
                for sy in ys:
                    for sx in xs:
                        wx = max(1.0 - abs((sx - cx + float(off)) / sup_x), 0.0)
                        wt = wx * max(1.0 - abs((sy - cy + float(off)) / sup_y), 0.0)
                        val += wt * x[idx][sy, sx]
                        total += wt
                out[idx][i1, i0] = val / total if total > 0 else val
    return out


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("src", "dst"), [((5, 2), (7, 5)), ((7, 5), (5, 2)), ((20, 17), (6, 4)), ((3, 3), (9, 8))])
def test_bicubic_and_antialias_match_pixel_loops(align: bool, src: tuple[int, int], dst: tuple[int, int]) -> None:
    x = rand(2, *src, seed=src[0] * 3 + dst[0])
    flags = SCALE_FLAG_ALIGN_CORNERS if align else 0
    got = result(ops.interpolate(tensor(new_ctx(), x), dst[1], dst[0], 2, 1, ScaleMode.BICUBIC | flags))
    np.testing.assert_allclose(got.reshape(2, *dst), f32(_bicubic_loop(x, *dst, align)), rtol=1e-6, atol=1e-7)
    mode = ScaleMode.BILINEAR | SCALE_FLAG_ANTIALIAS | flags
    got = result(ops.interpolate(tensor(new_ctx(), x), dst[1], dst[0], 2, 1, mode))
    np.testing.assert_allclose(got.reshape(2, *dst), f32(_antialias_loop(x, *dst, align)), rtol=1e-6, atol=1e-7)


def test_nearest_picks_ggml_float32_index_and_resamples_every_dim() -> None:
    x = rand(3, 2, 5, 4, seed=4)  # ne [4, 5, 2, 3]
    got = result(ops.interpolate(tensor(new_ctx(), x), 9, 3, 5, 2, ScaleMode.NEAREST))
    idx = [[int(np.float32(i) / (np.float32(n) / np.float32(m))) for i in range(n)]
           for n, m in ((2, 3), (5, 2), (3, 5), (9, 4))]
    np.testing.assert_array_equal(got, f32(x[np.ix_(*idx)]))
    up = result(ops.upscale(tensor(new_ctx(), x), 2))
    np.testing.assert_array_equal(up, f32(x.repeat(2, axis=2).repeat(2, axis=3)))


def test_pad_reflect_and_roll_loops() -> None:
    x = rand(3, 6, seed=5)
    got = result(ops.pad_reflect_1d(tensor(new_ctx(), x), 3, 2))
    for r in range(3):
        ref = [x[r][abs(j - 3) if j - 3 < 6 else 2 * 5 - (j - 3)] for j in range(11)]
        np.testing.assert_array_equal(got.reshape(3, 11)[r], f32(ref))
    y = rand(3, 4, 5, 6, seed=6)
    got = result(ops.roll(tensor(new_ctx(), y), 2, -3, 1, -2))
    for i3, i2, i1, i0 in np.ndindex(3, 4, 5, 6):
        assert got[i3, i2, i1, i0] == f32(y[(i3 + 2) % 3, (i2 - 1) % 4, (i1 + 3) % 5, (i0 - 2) % 6])


@pytest.mark.parametrize("dim", [1, 7, 8, 320])
def test_timestep_embedding_formula(dim: int) -> None:
    t = np.array([0.0, 1.0, 37.5, 999.0])
    got = result(ops.timestep_embedding(tensor(new_ctx(), t), dim, 10000)).reshape(4, dim)
    half = dim // 2
    for i, ti in enumerate(t):
        for j in range(half):
            f = math.exp(-math.log(10000) * j / half)
            assert got[i, j] == pytest.approx(math.cos(ti * f), abs=1e-6)
            assert got[i, j + half] == pytest.approx(math.sin(ti * f), abs=1e-6)
        if dim % 2:
            assert got[i, dim - 1] == 0.0


@pytest.mark.parametrize(("c", "w", "h", "win"), [(3, 7, 5, 3), (2, 6, 6, 3), (1, 4, 9, 4), (2, 3, 2, 5)])
def test_win_part_unpart_loops_and_inverse(c: int, w: int, h: int, win: int) -> None:
    x = rand(h, w, c, seed=w * h)
    ctx = new_ctx()
    part = ops.win_part(tensor(ctx, x), win)
    got = result(part).reshape(part.ne[::-1])
    npx = -(-w // win)
    for i3, i2, i1, i0 in np.ndindex(*got.shape):
        py, px = divmod(i3, npx)
        yy, xx = py * win + i2, px * win + i1
        assert got[i3, i2, i1, i0] == (f32(x[yy, xx, i0]) if yy < h and xx < w else 0.0)
    back = result(ops.win_unpart(part, w, h, win))
    np.testing.assert_array_equal(back.reshape(h, w, c), f32(x))


def test_get_rel_pos_loop() -> None:
    a = rand(9, 4, seed=7)  # ne [4, 9]: size 5
    got = result(ops.get_rel_pos(tensor(new_ctx(), a, T.F16), 5, 5)).reshape(5, 5, 4)
    for q, k, ch in np.ndindex(5, 5, 4):
        assert got[q, k, ch] == np.float16(a[(5 - k - 1) + q, ch])


def test_add_rel_pos_matches_ggml_flat_indexing() -> None:
    k, qw, qh, n = 3, 4, 2, 2
    a = rand(n, qh * qw, k * k, seed=8)
    pw, ph = rand(n, qh, qw, k, seed=9), rand(n, qh, qw, k, seed=10)
    ctx = new_ctx()
    got = result(ops.add_rel_pos(tensor(ctx, a), tensor(ctx, pw), tensor(ctx, ph)))
    flat, fw, fh = f32(a).ravel().copy(), f32(pw).ravel(), f32(ph).ravel()
    for jp0 in range(fw.size):  # ggml's loop over pw's elements in memory order
        i10 = jp0 % k
        jdh = jp0 * k
        jdw = jdh - (k - 1) * i10
        for j in range(k):
            flat[jdh + j] += fh[jp0]
            flat[jdw + j * k] += fw[jp0]
    np.testing.assert_allclose(got.ravel(), flat, rtol=1e-6)


def test_add_rel_pos_in_place_is_a_view() -> None:
    ctx = new_ctx()
    a = tensor(ctx, rand(1, 2, 4, seed=1))
    pw = tensor(ctx, rand(1, 1, 2, 2, seed=2))
    out = ops.add_rel_pos(a, pw, tensor(ctx, rand(1, 1, 2, 2, seed=3)), inplace=True)
    assert out.view_src is a


@pytest.mark.parametrize(("build", "match"), [
    (lambda a: ops.pool_1d(a, PoolOp.MAX, 9, 1), "POOL_1D: kernel k0=9 is larger than the padded input"),
    (lambda a: ops.pool_1d(a, PoolOp.MAX, 2, 0), "POOL_1D: s0=0 must be positive"),
    (lambda a: ops.pool_1d(a, PoolOp.AVG, 2, 1, -1), "POOL_1D: padding p0=-1"),
    (lambda a: ops.pool_1d(a, PoolOp.AVG, 2.0, 1), "POOL_1D: k0=2.0 must be an integer"),  # type: ignore[arg-type]
    (lambda a: ops.roll(a, 0.5), "ROLL: shift0=0.5 must be an integer"),  # type: ignore[arg-type]
    (lambda a: ops.pool_2d(a, PoolOp.AVG, 0, 1, 1, 1), "POOL_2D: k0=0 must be positive"),
    (lambda a: ops.pool_2d(a, PoolOp.AVG, 2, 6, 1, 1), "POOL_2D: kernel k1=6 is larger"),
    (lambda a: ops.pool_2d(a, PoolOp.AVG, 2, 2, 1, -2), "POOL_2D: s1=-2 must be positive"),
    (lambda a: ops.upscale(a, 1), "UPSCALE: scale_factor=1"),
    (lambda a: ops.interpolate(a, 4, 4, 1, 1, 3), "UPSCALE: mode 3 is not a ggml_scale_mode"),
    (lambda a: ops.interpolate(a, 4, 4, 1, 1, ScaleMode.BICUBIC | SCALE_FLAG_ANTIALIAS), "antialias flag goes"),
    (lambda a: ops.interpolate(a, 4, 4, 1, 1, 0x400), "UPSCALE: mode flags 0x400"),
    (lambda a: ops.interpolate(a, 0, 4), "UPSCALE: target ne"),
    (lambda a: ops.pad_reflect_1d(a, 6, 0), "PAD_REFLECT_1D: p0=6"),
    (lambda a: ops.roll(a, 0, 4), r"ROLL: shift1=4: \|shift\| must be below ne\[1\]=4"),
    (lambda a: ops.timestep_embedding(a, 8), "TIMESTEP_EMBEDDING: timesteps must be a vector"),
    (lambda a: ops.win_part(a, 0), "WIN_PART: w=0"),
    (lambda a: ops.win_unpart(a, 6, 4, 3), r"WIN_UNPART: src0 must hold windows \[C, 3, 3, n\]"),
    (lambda a: ops.get_rel_pos(a, 3, 3), "GET_REL_POS: qh=3, kh=3"),
])
def test_bad_input_names_op_and_tensor(build: object, match: str) -> None:
    a = tensor(new_ctx(), rand(4, 6, seed=0), name="img")
    with pytest.raises(ShapeError, match=match) as e:
        build(a)  # type: ignore[operator]
    assert "img" in str(e.value) or "GET_REL_POS" in str(e.value) or "UPSCALE: scale" in str(e.value)


def test_bad_types() -> None:
    ctx = new_ctx()
    with pytest.raises(UnsupportedTypeError, match="UPSCALE: src0"):
        ops.upscale(tensor(ctx, rand(2, 2), T.F16), 2)
    with pytest.raises(UnsupportedTypeError, match="GET_REL_POS: src0"):
        ops.get_rel_pos(tensor(ctx, rand(3, 2)), 2, 2)
    with pytest.raises(ShapeError, match="ADD_REL_POS: pw and ph must have the same shape"):
        ops.add_rel_pos(tensor(ctx, rand(2, 4)), tensor(ctx, rand(2, 2)), tensor(ctx, rand(1, 2)))
    with pytest.raises(ShapeError, match=r"ADD_REL_POS: src0 must be \[k\*k"):
        ops.add_rel_pos(tensor(ctx, rand(2, 5)), tensor(ctx, rand(2, 2)), tensor(ctx, rand(2, 2)))
