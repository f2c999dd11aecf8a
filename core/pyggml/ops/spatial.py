"""Spatial ops of ggml's vision and audio models: POOL_1D, POOL_2D (and its gradient POOL_2D_BACK), UPSCALE,
PAD_REFLECT_1D, ROLL, TIMESTEP_EMBEDDING, WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS.

Params keep ggml's op_params words (order and meaning) so a node travels over RPC unchanged; where ggml keeps a
size only in the result's shape (UPSCALE's target, WIN_UNPART's image size) the params carry it too, because a
shape rule sees only srcs and params. docs/op-semantics.md states each op's index arithmetic.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import Enum, IntEnum

from pyggml.ops.base import Op, check_types, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]
F32_ONLY = frozenset({GGMLType.F32})
F32_F16 = frozenset({GGMLType.F32, GGMLType.F16})


class PoolOp(Enum):
    """enum ggml_op_pool (the number is op_params word 0 of POOL_1D / POOL_2D)."""

    MAX = 0
    AVG = 1


class ScaleMode(IntEnum):
    """enum ggml_scale_mode: the low byte of UPSCALE's mode word."""

    NEAREST = 0
    BILINEAR = 1
    BICUBIC = 2


SCALE_FLAG_ALIGN_CORNERS = 1 << 8
SCALE_FLAG_ANTIALIAS = 1 << 9
SCALE_FLAGS = SCALE_FLAG_ALIGN_CORNERS | SCALE_FLAG_ANTIALIAS


def _ints(op: Op, a: Tensor, **values: object) -> None:
    """Each value is an int (the params are ggml's int32 words)."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail(op, f"{name}={v!r} must be an integer", a)


def _positive(op: Op, a: Tensor, **values: int) -> None:
    _ints(op, a, **values)
    for name, v in values.items():
        if v <= 0:
            raise fail(op, f"{name}={v} must be positive", a)


def _pool_len(op: Op, a: Tensor, dim: int, k: int, s: int, p: int) -> int:
    """ggml_calc_pool_output_size: (n + 2p - k) / s + 1, refusing a kernel that does not fit the padded input."""
    _ints(op, a, **{f"p{dim}": p})
    if p < 0:
        raise fail(op, f"padding p{dim}={p} must be non-negative", a)
    n = a.ne[dim]
    if k > n + 2 * p:
        raise fail(op, f"kernel k{dim}={k} is larger than the padded input (ne[{dim}]={n} + 2*{p})", a)
    return (n + 2 * p - k) // s + 1


def _pooled_ne(op: Op, a: Tensor, p: Pool1DParams | Pool2DParams) -> Ne:
    """The pooled shape of input a (POOL_1D's, or POOL_2D's and so POOL_2D_BACK's gradient's)."""
    if not isinstance(p.op, PoolOp):
        raise fail(op, f"op {p.op!r} is not a PoolOp", a)
    if isinstance(p, Pool1DParams):
        _positive(op, a, k0=p.k0, s0=p.s0)
        return _pool_len(op, a, 0, p.k0, p.s0, p.p0), a.ne[1], a.ne[2], a.ne[3]
    _positive(op, a, k0=p.k0, k1=p.k1, s0=p.s0, s1=p.s1)
    return _pool_len(op, a, 0, p.k0, p.s0, p.p0), _pool_len(op, a, 1, p.k1, p.s1, p.p1), a.ne[2], a.ne[3]


@dataclass(frozen=True, slots=True)
class Pool1DParams:
    """ggml's words: op, k0, s0, p0."""

    op: PoolOp
    k0: int
    s0: int
    p0: int


def _pool_1d(srcs: Srcs, p: Pool1DParams) -> tuple[GGMLType, Ne]:
    return GGMLType.F32, _pooled_ne(Op.POOL_1D, need(srcs[0], Op.POOL_1D, "src0", F32_F16), p)


define(Op.POOL_1D, (1, 1), _pool_1d, Pool1DParams)


@dataclass(frozen=True, slots=True)
class Pool2DParams:
    """ggml's words: op, k0, k1, s0, s1, p0, p1 (ggml_pool_2d takes float paddings but stores them as int32, and
    its kernel uses the ints: pyggml takes ints)."""

    op: PoolOp
    k0: int
    k1: int
    s0: int
    s1: int
    p0: int
    p1: int


def _pool_2d(srcs: Srcs, p: Pool2DParams) -> tuple[GGMLType, Ne]:
    return GGMLType.F32, _pooled_ne(Op.POOL_2D, need(srcs[0], Op.POOL_2D, "src0", F32_F16), p)


define(Op.POOL_2D, (1, 1), _pool_2d, Pool2DParams)


def _pool_2d_back(srcs: Srcs, p: Pool2DParams) -> tuple[GGMLType, Ne]:
    """POOL_2D_BACK (gradient, POOL_2D's input): the gradient has POOL_2D's result shape for that input."""
    op = Op.POOL_2D_BACK
    g = need(srcs[0], op, "src0 (gradient)", F32_ONLY)
    x = need(srcs[1] if len(srcs) > 1 else None, op, "src1 (pool_2d's input)", F32_F16)
    if not isinstance(p, Pool2DParams):
        raise fail(op, f"params must be Pool2DParams, got {p!r}", g)
    want = _pooled_ne(op, x, p)
    if g.ne != want:
        raise fail(op, f"the gradient must have POOL_2D's result shape {list(want)} for the input", g, x)
    return GGMLType.F32, x.ne


define(Op.POOL_2D_BACK, (2, 2), _pool_2d_back, Pool2DParams)


@dataclass(frozen=True, slots=True)
class UpscaleParams:
    """`mode` is ggml's word 0 (ggml_scale_mode | flags); `ne` the result's shape, which ggml keeps only there."""

    ne: Ne
    mode: int

    @property
    def scale_mode(self) -> int:
        return self.mode & 0xFF

    @property
    def align_corners(self) -> bool:
        return bool(self.mode & SCALE_FLAG_ALIGN_CORNERS)

    @property
    def antialias(self) -> bool:
        return bool(self.mode & SCALE_FLAG_ANTIALIAS)


def _upscale(srcs: Srcs, p: UpscaleParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.UPSCALE, "src0", F32_ONLY)
    if p.scale_mode not in tuple(ScaleMode):
        raise fail(Op.UPSCALE, f"mode {p.scale_mode} is not a ggml_scale_mode (0 nearest, 1 bilinear, 2 bicubic)", a)
    if p.mode & ~0xFF & ~SCALE_FLAGS:
        raise fail(Op.UPSCALE, f"mode flags {p.mode & ~0xFF:#x}: ggml has ALIGN_CORNERS (0x100) and ANTIALIAS "
                               "(0x200) only", a)
    if p.antialias and p.scale_mode != ScaleMode.BILINEAR:
        raise fail(Op.UPSCALE, "the antialias flag goes with BILINEAR only (as ggml asserts)", a)
    ne = tuple(operator.index(n) for n in p.ne)
    if len(ne) != 4 or any(n <= 0 for n in ne):
        raise fail(Op.UPSCALE, f"target ne {list(p.ne)} must be four positive sizes", a)
    if 0 in a.ne:
        raise fail(Op.UPSCALE, "cannot interpolate from an empty tensor", a)
    return a.type, (ne[0], ne[1], ne[2], ne[3])


define(Op.UPSCALE, (1, 1), _upscale, UpscaleParams)


@dataclass(frozen=True, slots=True)
class PadReflect1DParams:
    p0: int
    p1: int


def _pad_reflect_1d(srcs: Srcs, p: PadReflect1DParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.PAD_REFLECT_1D, "src0", F32_ONLY)
    _ints(Op.PAD_REFLECT_1D, a, p0=p.p0, p1=p.p1)
    for name, v in (("p0", p.p0), ("p1", p.p1)):
        if not 0 <= v < a.ne[0]:
            raise fail(Op.PAD_REFLECT_1D, f"{name}={v} must be in [0, ne[0]) (a reflection repeats no edge)", a)
    return a.type, (a.ne[0] + p.p0 + p.p1, a.ne[1], a.ne[2], a.ne[3])


define(Op.PAD_REFLECT_1D, (1, 1), _pad_reflect_1d, PadReflect1DParams)


@dataclass(frozen=True, slots=True)
class RollParams:
    shifts: tuple[int, int, int, int]


def _roll(srcs: Srcs, p: RollParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ROLL, "src0", F32_ONLY)
    if len(p.shifts) != 4:
        raise fail(Op.ROLL, f"shifts {p.shifts} must be four values", a)
    _ints(Op.ROLL, a, **{f"shift{i}": s for i, s in enumerate(p.shifts)})
    for i, s in enumerate(p.shifts):
        if abs(s) >= a.ne[i] and not (s == 0 and a.ne[i] == 0):
            raise fail(Op.ROLL, f"shift{i}={s}: |shift| must be below ne[{i}]={a.ne[i]} (as ggml asserts)", a)
    return a.type, a.ne


define(Op.ROLL, (1, 1), _roll, RollParams)


@dataclass(frozen=True, slots=True)
class TimestepEmbeddingParams:
    dim: int
    max_period: int


def _timestep_embedding(srcs: Srcs, p: TimestepEmbeddingParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.TIMESTEP_EMBEDDING, "src0 (timesteps)", F32_ONLY)
    if a.ne[1] != 1 or a.ne[2] != 1 or a.ne[3] != 1:
        raise fail(Op.TIMESTEP_EMBEDDING, "timesteps must be a vector [N] (ggml reads ne[0] values only)", a)
    _positive(Op.TIMESTEP_EMBEDDING, a, dim=p.dim, max_period=p.max_period)
    return GGMLType.F32, (p.dim, a.ne[0], 1, 1)


define(Op.TIMESTEP_EMBEDDING, (1, 1), _timestep_embedding, TimestepEmbeddingParams)


@dataclass(frozen=True, slots=True)
class WinPartParams:
    """ggml's words: npx, npy (windows along dims 1 and 2), w (the window side)."""

    npx: int
    npy: int
    w: int


def _win_part(srcs: Srcs, p: WinPartParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.WIN_PART, "src0", F32_ONLY)
    _positive(Op.WIN_PART, a, w=p.w)
    _ints(Op.WIN_PART, a, npx=p.npx, npy=p.npy)
    if a.ne[3] != 1:
        raise fail(Op.WIN_PART, "src0 must be 3-D [C, W, H] (ggml asserts ne[3] == 1)", a)
    npx, npy = -(-a.ne[1] // p.w), -(-a.ne[2] // p.w)
    if (p.npx, p.npy) != (npx, npy):
        raise fail(Op.WIN_PART, f"npx={p.npx}, npy={p.npy} differ from the {npx} x {npy} windows of side {p.w}", a)
    return a.type, (a.ne[0], p.w, p.w, npx * npy)


define(Op.WIN_PART, (1, 1), _win_part, WinPartParams)


@dataclass(frozen=True, slots=True)
class WinUnpartParams:
    """`w` is ggml's one word; w0, h0 (the image's dims 1 and 2) are the result's shape, which ggml keeps only
    there."""

    w: int
    w0: int
    h0: int


def _win_unpart(srcs: Srcs, p: WinUnpartParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.WIN_UNPART, "src0", F32_ONLY)
    _positive(Op.WIN_UNPART, a, w=p.w, w0=p.w0, h0=p.h0)
    if a.ne[1] != p.w or a.ne[2] != p.w:
        raise fail(Op.WIN_UNPART, f"src0 must hold windows [C, {p.w}, {p.w}, n] (w={p.w})", a)
    n = -(-p.w0 // p.w) * -(-p.h0 // p.w)
    if a.ne[3] != n:
        raise fail(Op.WIN_UNPART, f"a {p.w0} x {p.h0} image in windows of {p.w} needs {n} windows, src0 has "
                                  f"{a.ne[3]}", a)
    return a.type, (a.ne[0], p.w0, p.h0, 1)


define(Op.WIN_UNPART, (1, 1), _win_unpart, WinUnpartParams)


def _get_rel_pos(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.GET_REL_POS, "src0", frozenset({GGMLType.F16}))
    if a.ne[1] % 2 == 0 or a.ne[2] != 1 or a.ne[3] != 1:
        raise fail(Op.GET_REL_POS, "src0 must be a table [C, 2*size - 1] (odd ne[1], ne[2] = ne[3] = 1)", a)
    size = (a.ne[1] + 1) // 2
    return a.type, (a.ne[0], size, size, 1)


define(Op.GET_REL_POS, (1, 1), _get_rel_pos)


def _add_rel_pos(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ADD_REL_POS, "src0")
    pw = need(srcs[1], Op.ADD_REL_POS, "src1 (pw)")
    ph = need(srcs[2] if len(srcs) > 2 else None, Op.ADD_REL_POS, "src2 (ph)")
    for t, slot in ((a, "src0"), (pw, "src1 (pw)"), (ph, "src2 (ph)")):
        check_types(Op.ADD_REL_POS, t, F32_ONLY, slot)
    if pw.ne != ph.ne:
        raise fail(Op.ADD_REL_POS, "pw and ph must have the same shape", pw, ph)
    k = pw.ne[0]
    if a.ne[0] != k * k or a.ne[1] != pw.ne[1] * pw.ne[2] or a.ne[2] != pw.ne[3] or a.ne[3] != 1:
        raise fail(Op.ADD_REL_POS, "src0 must be [k*k, pw.ne[1]*pw.ne[2], pw.ne[3]] for pw [k, qw, qh, n]", a, pw)
    return a.type, a.ne


define(Op.ADD_REL_POS, (3, 3), _add_rel_pos)


def pool_1d(a: Tensor, op: PoolOp, k0: int, s0: int, p0: int = 0) -> Tensor:
    """Pool windows of k0 elements along dim 0 at stride s0 over the input padded by p0 on both sides; result
    F32 [(ne0 + 2*p0 - k0) // s0 + 1, ne1, ne2, ne3]. Padding is not data: MAX ignores it (a window wholly in the
    padding gives -FLT_MAX), AVG divides by the number of real elements in the window (0 for none)."""
    return record(Op.POOL_1D, (a,), Pool1DParams(op, k0, s0, p0))


def pool_2d(a: Tensor, op: PoolOp, k0: int, k1: int, s0: int, s1: int, p0: int = 0, p1: int = 0) -> Tensor:
    """Pool k0 x k1 windows over dims 0 and 1 (strides s0, s1; padding p0, p1 on both sides of each); result F32
    [(ne0 + 2*p0 - k0) // s0 + 1, (ne1 + 2*p1 - k1) // s1 + 1, ne2, ne3]. MAX ignores the padding (-FLT_MAX for a
    window wholly in it); AVG divides by k0*k1 whatever the window covers (ggml counts the padding, unlike
    POOL_1D)."""
    return record(Op.POOL_2D, (a,), Pool2DParams(op, k0, k1, s0, s1, p0, p1))


def pool_2d_back(grad: Tensor, x: Tensor, op: PoolOp, k0: int, k1: int, s0: int, s1: int, p0: int = 0,
                 p1: int = 0) -> Tensor:
    """The gradient of pool_2d(x, ...) with respect to x (ggml_pool_2d_back): an F32 tensor shaped like x, zero
    but for each window's share of its output's gradient `grad`. AVG adds grad / (k0*k1) to every element of the
    window inside x. MAX adds grad to one element: scanning the window's elements inside x row by row (dim 1
    outer, dim 0 inner) from a running maximum of -FLT_MAX, each element that is not <= the running maximum
    becomes it; the last one to do so gets the gradient (so the first of tied maxima; none when every element is
    <= -FLT_MAX; a NaN takes the place, and so does every element after it)."""
    return record(Op.POOL_2D_BACK, (grad, x), Pool2DParams(op, k0, k1, s0, s1, p0, p1))


def interpolate(a: Tensor, ne0: int, ne1: int, ne2: int = 1, ne3: int = 1,
                mode: int = ScaleMode.NEAREST) -> Tensor:
    """Resample a to [ne0, ne1, ne2, ne3] (ggml_interpolate). `mode` is ggml's word: ScaleMode NEAREST,
    BILINEAR or BICUBIC over dims 0 and 1 (dims 2 and 3 always nearest), optionally | SCALE_FLAG_ALIGN_CORNERS
    (the corner pixels map onto each other instead of the pixel centres) and, with BILINEAR,
    | SCALE_FLAG_ANTIALIAS (a triangle filter as wide as the downscale, PyTorch's antialias=True)."""
    return record(Op.UPSCALE, (a,), UpscaleParams((ne0, ne1, ne2, ne3), int(mode)))


def upscale(a: Tensor, scale_factor: int, mode: int = ScaleMode.NEAREST) -> Tensor:
    """ggml_upscale: dims 0 and 1 times an integer scale_factor > 1 (see `interpolate`)."""
    if scale_factor <= 1:
        raise fail(Op.UPSCALE, f"scale_factor={scale_factor} must be > 1 (use interpolate for other sizes)", a)
    return interpolate(a, a.ne[0] * scale_factor, a.ne[1] * scale_factor, a.ne[2], a.ne[3], mode)


def pad_reflect_1d(a: Tensor, p0: int, p1: int) -> Tensor:
    """Pad dim 0 with its mirror image, the edge not repeated: [a, b, c, d] with (2, 1) -> [c, b, a, b, c, d, c]
    (0 <= p0, p1 < ne0)."""
    return record(Op.PAD_REFLECT_1D, (a,), PadReflect1DParams(p0, p1))


def roll(a: Tensor, shift0: int = 0, shift1: int = 0, shift2: int = 0, shift3: int = 0) -> Tensor:
    """Rotate each dim: dst[i] = a[(i - shift) mod ne] per dim, |shift| < ne (numpy.roll)."""
    return record(Op.ROLL, (a,), RollParams((shift0, shift1, shift2, shift3)))


def timestep_embedding(timesteps: Tensor, dim: int, max_period: int = 10000) -> Tensor:
    """Sinusoidal embedding of N timesteps, F32 [dim, N]: with half = dim // 2 and f_j = max_period^(-j/half),
    row i is [cos(t_i f_0) .. cos(t_i f_{half-1}), sin(t_i f_0) .. sin(t_i f_{half-1})] and a trailing 0 when dim
    is odd."""
    return record(Op.TIMESTEP_EMBEDDING, (timesteps,), TimestepEmbeddingParams(dim, max_period))


def win_part(a: Tensor, w: int) -> Tensor:
    """Cut an image [C, W, H] into w x w windows, zero-padded at the right and bottom edges: result
    [C, w, w, npx*npy] with window py*npx + px holding a[:, px*w + x, py*w + y] (SAM's windowed attention)."""
    if w <= 0:
        raise fail(Op.WIN_PART, f"w={w} must be positive", a)
    return record(Op.WIN_PART, (a,), WinPartParams(-(-a.ne[1] // w), -(-a.ne[2] // w), w))


def win_unpart(a: Tensor, w0: int, h0: int, w: int) -> Tensor:
    """The inverse of win_part: windows [C, w, w, n] back into an image [C, w0, h0], dropping the padding."""
    return record(Op.WIN_UNPART, (a,), WinUnpartParams(w, w0, h0))


def get_rel_pos(a: Tensor, qh: int, kh: int) -> Tensor:
    """Expand a relative-position table a [C, 2*size - 1] (F16) into [C, kh, qh] with dst[:, k, q] =
    a[:, (kh - 1 - k) + q] (SAM). ggml requires qh == kh == size."""
    if qh != kh or 2 * qh - 1 != a.ne[1]:
        raise fail(Op.GET_REL_POS, f"qh={qh}, kh={kh}: ggml needs qh == kh and 2*qh - 1 == ne[1]", a)
    return record(Op.GET_REL_POS, (a,))


def add_rel_pos(a: Tensor, pw: Tensor, ph: Tensor, *, inplace: bool = False) -> Tensor:
    """SAM's decomposed relative position bias: a [k*k, qw*qh, n] (attention scores, key index kx + k*ky) plus
    pw[kx, qx, qy, n] + ph[ky, qx, qy, n] for query qx + qw*qy, pw and ph [k, qw, qh, n]."""
    return record(Op.ADD_REL_POS, (a, pw, ph), inplace=inplace)
