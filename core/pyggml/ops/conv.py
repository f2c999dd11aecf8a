"""Convolution family: IM2COL (and its gradient IM2COL_BACK), IM2COL_3D, COL2IM_1D, CONV_TRANSPOSE_1D, CONV_2D,
CONV_3D, CONV_2D_DW, CONV_TRANSPOSE_2D, and ggml's composite helpers built from them (conv_1d, conv_2d, conv_3d and
their depthwise / half-padding variants: IM2COL + MUL_MAT, as ggml builds them).

Layouts are ggml's (ne order, fastest first): an image is [W, H, C, N], a 2-D kernel [KW, KH, IC, OC]; the 3-D
ops fold channels and batch into ne[3] (image [W, H, D, C*N], kernel [KW, KH, KD, IC*OC]). Output sizes follow
ggml_calc_conv_output_size, out = (in + 2p - d(k-1) - 1) / s + 1, except that pyggml refuses a dilated kernel
wider than the padded input (ggml's C division rounds such a window up to one output of partial overlap; see
docs/op-semantics.md), zero-size kernels, strides or dilations below 1 and negative padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, TypeVar

from pyggml.errors import ShapeError
from pyggml.ops.base import Op, define, fail, need, record
from pyggml.ops.layout import cont, permute, reshape
from pyggml.ops.matmul import mul_mat
from pyggml.tensor import Ne, Tensor
from pyggml.types import FLOAT_TYPES, GGMLType

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Srcs = tuple[Tensor | None, ...]
P = TypeVar("P", bound="DataclassInstance")
"""A params dataclass of this module."""
F32 = GGMLType.F32


# ---- params (the fields are ggml's op_params words, in ggml's order) --------------------------------------------


@dataclass(frozen=True, slots=True)
class Window2d:
    """A kernel window's words over two spatial dims (0: width, 1: height): stride, padding, dilation."""

    s0: int
    s1: int
    p0: int
    p1: int
    d0: int
    d1: int


@dataclass(frozen=True, slots=True)
class Window3d:
    """A kernel window's words over three spatial dims (0: width, 1: height, 2: depth)."""

    s0: int
    s1: int
    s2: int
    p0: int
    p1: int
    p2: int
    d0: int
    d1: int
    d2: int


@dataclass(frozen=True, slots=True)
class Im2colParams(Window2d):
    is_2d: bool
    dst_type: GGMLType = GGMLType.F16
    """The result type (ggml passes it to ggml_im2col and keeps it as the tensor's type, not in op_params)."""


@dataclass(frozen=True, slots=True)
class Im2colBackParams(Window2d):
    """IM2COL_BACK: IM2COL's words (the window, is_2d); `ne` is the result's shape (the forward op's input), which
    ggml keeps only in the result, so it is not a word."""

    is_2d: bool
    ne: Ne


@dataclass(frozen=True, slots=True)
class Im2col3dParams(Window3d):
    ic: int
    dst_type: GGMLType = GGMLType.F16


@dataclass(frozen=True, slots=True)
class Col2im1dParams:
    s0: int
    oc: int
    p0: int


@dataclass(frozen=True, slots=True)
class ConvTranspose1dParams:
    s0: int
    p0: int = 0
    d0: int = 1


@dataclass(frozen=True, slots=True)
class Conv2dParams(Window2d):
    """CONV_2D and CONV_2D_DW: the window alone."""


@dataclass(frozen=True, slots=True)
class Conv3dParams(Window3d):
    c: int
    n: int
    oc: int


@dataclass(frozen=True, slots=True)
class ConvTranspose2dParams:
    stride: int


ConvParams = (Im2colParams | Im2colBackParams | Im2col3dParams | Col2im1dParams | ConvTranspose1dParams
              | Conv2dParams | Conv3dParams | ConvTranspose2dParams)


def op_words(params: ConvParams) -> list[int]:
    """The params as ggml's int32 op_params words (the dataclass fields in order; dst_type is the result's type and
    IM2COL_BACK's ne its shape, not words): what the cpu plugin's C kernels read."""
    return [int(getattr(params, f.name)) for f in fields(params) if f.name not in ("dst_type", "ne")]


# ---- shape rules ------------------------------------------------------------------------------------------------


def out_size(op: Op, dim: str, ins: int, ks: int, s: int, p: int, d: int, *tensors: Tensor) -> int:
    """ggml_calc_conv_output_size for one spatial dim, after checking the geometry makes sense."""
    if s < 1 or d < 1:
        raise fail(op, f"stride and dilation of the {dim} must be >= 1 (got s={s}, d={d})", *tensors)
    if p < 0:
        raise fail(op, f"padding of the {dim} must be >= 0 (got p={p})", *tensors)
    if ks < 1:
        raise fail(op, f"the kernel's {dim} is {ks}: it must be >= 1", *tensors)
    span = d * (ks - 1) + 1
    if span > ins + 2 * p:
        raise fail(op, f"the dilated kernel's {dim} ({span}) is larger than the padded input's ({ins} + 2*{p}): "
                   "no output", *tensors)
    return (ins + 2 * p - span) // s + 1


def _srcs2(op: Op, srcs: Srcs) -> tuple[Tensor, Tensor]:
    a = need(srcs[0], op, "src0 (kernel)", FLOAT_TYPES)
    b = need(srcs[1] if len(srcs) > 1 else None, op, "src1 (input)", FLOAT_TYPES)
    return a, b


def _params(op: Op, params: object, cls: type[P]) -> P:
    """params, checked to be the op's dataclass with every word an int (they travel as int32 op_params)."""
    if not isinstance(params, cls):
        raise ShapeError(f"{op.name}: params must be {cls.__name__}, got {type(params).__name__}")
    for f in fields(params):
        v = getattr(params, f.name)
        if f.name not in ("dst_type", "ne") and not (isinstance(v, int) and -(1 << 31) <= v < (1 << 31)):
            raise ShapeError(f"{op.name}: {f.name}={v!r} must be an int32")
    return params


def _out_wh(op: Op, a: Tensor, b: Tensor, p: Window2d | Window3d) -> tuple[int, int]:
    """Output width and height of kernel a over input b (ne[0], ne[1]) with p's strides, paddings, dilations."""
    return (out_size(op, "width", b.ne[0], a.ne[0], p.s0, p.p0, p.d0, a, b),
            out_size(op, "height", b.ne[1], a.ne[1], p.s1, p.p1, p.d1, a, b))


def _kernel_input(op: Op, srcs: Srcs, params: object, cls: type[P]) -> tuple[Tensor, Tensor, P]:
    """The (kernel, input) pair of a convolution-like op and its checked params."""
    p = _params(op, params, cls)
    a, b = _srcs2(op, srcs)
    return a, b, p


def _im2col(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.IM2COL
    a, b, p = _kernel_input(op, srcs, params, Im2colParams)
    if p.dst_type not in FLOAT_TYPES:
        raise fail(op, f"dst_type {p.dst_type} must be f32, f16 or bf16")
    return p.dst_type, _cols_ne(op, a, b.ne, p, "the input's", a, b)


define(Op.IM2COL, (2, 2), _im2col, Im2colParams)


def _cols_ne(op: Op, a: Tensor, ne: Ne, p: Im2colParams | Im2colBackParams, what: str, *tensors: Tensor) -> Ne:
    """The patch matrix IM2COL makes from kernel a and an input of shape ne (IM2COL_BACK's gradient has it)."""
    ow = out_size(op, "width", ne[0], a.ne[0], p.s0, p.p0, p.d0, *tensors)
    if p.is_2d:
        if a.ne[2] != ne[2]:
            raise fail(op, f"kernel ne[2] (input channels) must equal {what} ne[2] ({ne[2]})", *tensors)
        oh = out_size(op, "height", ne[1], a.ne[1], p.s1, p.p1, p.d1, *tensors)
        return (a.ne[2] * a.ne[1] * a.ne[0], ow, oh, ne[3])
    if a.ne[1] != ne[1]:
        raise fail(op, f"1-D: kernel ne[1] (input channels) must equal {what} ne[1] ({ne[1]})", *tensors)
    if ne[3] != 1:
        raise fail(op, f"1-D: {what} shape {list(ne)} must be [W, C, N] (ne[3] == 1)", *tensors)
    return (a.ne[1] * a.ne[0], ow, ne[2], 1)


def _im2col_back(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.IM2COL_BACK
    p = _params(op, params, Im2colBackParams)
    g = need(srcs[0], op, "src0 (gradient)", frozenset({F32}))
    a = need(srcs[1] if len(srcs) > 1 else None, op, "src1 (kernel)", FLOAT_TYPES)
    ne = p.ne
    if len(ne) != 4 or not all(isinstance(n, int) and n > 0 for n in ne):
        raise fail(op, f"the result's ne {list(ne)} must be four positive ints", g)
    want = _cols_ne(op, a, ne, p, "the result's", g, a)
    if g.ne != want:
        raise fail(op, f"the gradient must be IM2COL's result for an input of shape {list(ne)}: {list(want)}", g, a)
    return F32, (ne[0], ne[1], ne[2], ne[3])


define(Op.IM2COL_BACK, (2, 2), _im2col_back, Im2colBackParams)


def _im2col_3d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.IM2COL_3D
    a, b, p = _kernel_input(op, srcs, params, Im2col3dParams)
    if p.dst_type not in FLOAT_TYPES:
        raise fail(op, f"dst_type {p.dst_type} must be f32, f16 or bf16")
    if p.ic < 1 or b.ne[3] % p.ic or a.ne[3] % p.ic:
        raise fail(op, f"IC={p.ic} must be >= 1 and divide both ne[3]s (kernel OC*IC, input N*IC)", a, b)
    ow, oh = _out_wh(op, a, b, p)
    od = out_size(op, "depth", b.ne[2], a.ne[2], p.s2, p.p2, p.d2, a, b)
    return p.dst_type, (a.ne[0] * a.ne[1] * a.ne[2] * p.ic, ow, oh, od * (b.ne[3] // p.ic))


define(Op.IM2COL_3D, (2, 2), _im2col_3d, Im2col3dParams)


def _col2im_1d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.COL2IM_1D
    p = _params(op, params, Col2im1dParams)
    a = need(srcs[0], op, "src0 (columns)", FLOAT_TYPES)
    if a.ne[2] != 1 or a.ne[3] != 1:
        raise fail(op, "src0 must be a matrix [K*OC, T_in]", a)
    if p.s0 < 1 or p.oc < 1 or p.p0 < 0:
        raise fail(op, f"needs s0 >= 1, oc >= 1, p0 >= 0 (got s0={p.s0}, oc={p.oc}, p0={p.p0})", a)
    if a.ne[0] % p.oc or a.ne[0] == 0:
        raise fail(op, f"src0 ne[0] must be a positive multiple of oc={p.oc} (K*OC)", a)
    k = a.ne[0] // p.oc
    t_out = (a.ne[1] - 1) * p.s0 + k - 2 * p.p0
    if t_out <= 0 or a.ne[1] < 1:
        raise fail(op, f"output length (T_in-1)*s0 + K - 2*p0 = {t_out} must be > 0", a)
    return a.type, (t_out, p.oc, 1, 1)


define(Op.COL2IM_1D, (1, 1), _col2im_1d, Col2im1dParams)


def _conv_transpose_1d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CONV_TRANSPOSE_1D
    a, b, p = _kernel_input(op, srcs, params, ConvTranspose1dParams)
    if b.ne[2] != 1 or b.ne[3] != 1:
        raise fail(op, "the input must be a matrix [L, IC]", b)
    if a.ne[2] != b.ne[1] or a.ne[3] != 1:
        raise fail(op, "the kernel must be [K, OC, IC] with IC the input's ne[1]", a, b)
    if p.p0 != 0 or p.d0 != 1:
        raise fail(op, f"ggml supports p0 == 0 and d0 == 1 only (got p0={p.p0}, d0={p.d0})")
    if p.s0 < 1 or a.ne[0] < 1 or b.ne[0] < 1:
        raise fail(op, f"needs s0 >= 1 and non-empty kernel and input (s0={p.s0})", a, b)
    return F32, ((b.ne[0] - 1) * p.s0 + a.ne[0], a.ne[1], 1, 1)


define(Op.CONV_TRANSPOSE_1D, (2, 2), _conv_transpose_1d, ConvTranspose1dParams)


def _conv_2d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CONV_2D
    a, b, p = _kernel_input(op, srcs, params, Conv2dParams)
    if a.ne[2] != b.ne[2]:
        raise fail(op, "kernel ne[2] (input channels) must equal the input's ne[2]", a, b)
    ow, oh = _out_wh(op, a, b, p)
    return b.type, (ow, oh, a.ne[3], b.ne[3])


define(Op.CONV_2D, (2, 2), _conv_2d, Conv2dParams)


def _conv_2d_dw(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CONV_2D_DW
    a, b, p = _kernel_input(op, srcs, params, Conv2dParams)
    if a.ne[2] != 1 or a.ne[3] != b.ne[2]:
        raise fail(op, "the kernel must be [KW, KH, 1, C] with C the input's ne[2]", a, b)
    ow, oh = _out_wh(op, a, b, p)
    return b.type, (ow, oh, b.ne[2], b.ne[3])


define(Op.CONV_2D_DW, (2, 2), _conv_2d_dw, Conv2dParams)


def _conv_3d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CONV_3D
    a, b, p = _kernel_input(op, srcs, params, Conv3dParams)
    if min(p.c, p.n, p.oc) < 1:
        raise fail(op, f"c, n, oc must be >= 1 (got {p.c}, {p.n}, {p.oc})")
    if a.ne[3] != p.c * p.oc:
        raise fail(op, f"kernel ne[3] must be c*oc = {p.c}*{p.oc}", a)
    if b.ne[3] != p.c * p.n:
        raise fail(op, f"input ne[3] must be c*n = {p.c}*{p.n}", b)
    ow, oh = _out_wh(op, a, b, p)
    od = out_size(op, "depth", b.ne[2], a.ne[2], p.s2, p.p2, p.d2, a, b)
    return F32, (ow, oh, od, p.oc * p.n)


define(Op.CONV_3D, (2, 2), _conv_3d, Conv3dParams)


def _conv_transpose_2d(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CONV_TRANSPOSE_2D
    a, b, p = _kernel_input(op, srcs, params, ConvTranspose2dParams)
    s = p.stride
    if a.ne[3] != b.ne[2]:
        raise fail(op, "the kernel must be [KW, KH, OC, IC] with IC the input's ne[2]", a, b)
    if s < 1 or min(a.ne[0], a.ne[1], b.ne[0], b.ne[1]) < 1:
        raise fail(op, f"needs stride >= 1 and non-empty kernel and input (stride={s})", a, b)
    return F32, ((b.ne[0] - 1) * s + a.ne[0], (b.ne[1] - 1) * s + a.ne[1], a.ne[2], b.ne[3])


define(Op.CONV_TRANSPOSE_2D, (2, 2), _conv_transpose_2d, ConvTranspose2dParams)


# ---- the ops ----------------------------------------------------------------------------------------------------


def im2col(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int, is_2d: bool,
           dst_type: GGMLType = GGMLType.F16) -> Tensor:
    """The patches a convolution with kernel `a` reads from `b`, one row per output position (ggml_im2col).

    2-D: a [KW, KH, IC, OC] (only its shape is read), b [W, H, IC, N] -> [IC*KH*KW, OW, OH, N]; row element
    ic*KH*KW + kh*KW + kw holds b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n], 0 outside b (zero padding).
    1-D (is_2d False): a [KW, IC, OC], b [W, IC, N] -> [IC*KW, OW, N]. A MUL_MAT of the result with the kernel
    reshaped to [IC*KH*KW, OC] is the convolution (conv_1d / conv_2d)."""
    return record(Op.IM2COL, (a, b), Im2colParams(s0, s1, p0, p1, d0, d1, bool(is_2d), dst_type))


def im2col_back(grad: Tensor, kernel: Tensor, ne: Sequence[int], s0: int, s1: int, p0: int, p1: int, d0: int,
                d1: int, is_2d: bool) -> Tensor:
    """The gradient of IM2COL with respect to its input (ggml_im2col_back): grad has IM2COL's result shape for
    an input of shape `ne` (the forward input's) and the same kernel and words; the F32 result [ne] holds, at each
    input element, the sum of the grad elements that IM2COL copied from it (the adjoint of IM2COL: padding taps
    and elements no window reaches get nothing). The kernel is read for its shape only."""
    if not 1 <= len(ne) <= 4:
        raise ShapeError(f"IM2COL_BACK: the result's ne {list(ne)} must have 1 to 4 dims")
    d = (*(int(n) for n in ne), 1, 1, 1)
    return record(Op.IM2COL_BACK, (grad, kernel), Im2colBackParams(s0, s1, p0, p1, d0, d1, bool(is_2d),
                                                                   (d[0], d[1], d[2], d[3])))


def im2col_3d(a: Tensor, b: Tensor, ic: int, s0: int, s1: int, s2: int, p0: int, p1: int, p2: int, d0: int,
              d1: int, d2: int, dst_type: GGMLType = GGMLType.F16) -> Tensor:
    """3-D patches (ggml_im2col_3d): a [KW, KH, KD, OC*IC], b [W, H, D, N*IC] (channel c of batch n at ne[3]
    index n*IC + c) -> [IC*KD*KH*KW, OW, OH, OD*N]; element ic*KD*KH*KW + kd*KH*KW + kh*KW + kw of the row for
    (ow, oh, od, n) holds b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, od*s2 + kd*d2 - p2, n*IC + ic] or 0."""
    return record(Op.IM2COL_3D, (a, b), Im2col3dParams(s0, s1, s2, p0, p1, p2, d0, d1, d2, ic, dst_type))


def col2im_1d(a: Tensor, s0: int, oc: int, p0: int) -> Tensor:
    """Scatter-add of GEMM columns back to a 1-D signal (ggml_col2im_1d): a [K*OC, T_in] (column t holds K taps
    per output channel, channel-major) -> [T_out, OC] of a's type, T_out = (T_in-1)*s0 + K - 2*p0:
    dst[t, o] = sum over (t_in, k) with t_in*s0 + k = t + p0 of a[o*K + k, t_in]."""
    return record(Op.COL2IM_1D, (a,), Col2im1dParams(s0, oc, p0))


def conv_transpose_1d(a: Tensor, b: Tensor, s0: int, p0: int = 0, d0: int = 1) -> Tensor:
    """Transposed 1-D convolution (ggml_conv_transpose_1d): kernel a [K, OC, IC], input b [L, IC] -> F32
    [(L-1)*s0 + K, OC]: dst[l*s0 + k, o] += sum_c a[k, o, c] * b[l, c]. ggml supports p0 = 0, d0 = 1 only."""
    return record(Op.CONV_TRANSPOSE_1D, (a, b), ConvTranspose1dParams(s0, p0, d0))


def conv_transpose_2d_p0(a: Tensor, b: Tensor, stride: int) -> Tensor:
    """Transposed 2-D convolution without padding (ggml_conv_transpose_2d_p0): kernel a [KW, KH, OC, IC], input b
    [W, H, IC, N] -> F32 [(W-1)*s + KW, (H-1)*s + KH, OC, N]: dst[x*s + kx, y*s + ky, o, n] += a[kx, ky, o, c] *
    b[x, y, c, n], summed over c and every (x, kx), (y, ky) landing there."""
    return record(Op.CONV_TRANSPOSE_2D, (a, b), ConvTranspose2dParams(stride))


def conv_2d_direct(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int) -> Tensor:
    """2-D convolution as one op (ggml_conv_2d_direct, CONV_2D): kernel a [KW, KH, IC, OC], input b [W, H, IC, N]
    -> [OW, OH, OC, N] of b's type: dst[x, y, o, n] = sum_{c, ky, kx} a[kx, ky, c, o] *
    b[x*s0 + kx*d0 - p0, y*s1 + ky*d1 - p1, c, n], zero outside b. (Cross-correlation, as every ggml conv.)"""
    return record(Op.CONV_2D, (a, b), Conv2dParams(s0, s1, p0, p1, d0, d1))


def conv_2d_dw_direct(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int) -> Tensor:
    """Depthwise 2-D convolution as one op (ggml_conv_2d_dw_direct, CONV_2D_DW): kernel a [KW, KH, 1, C], input
    b [W, H, C, N] -> [OW, OH, C, N] of b's type, each channel convolved with its own kernel. The result is
    always contiguous WHCN (ggml gives a channels-first input a channels-first result; see op-semantics.md)."""
    return record(Op.CONV_2D_DW, (a, b), Conv2dParams(s0, s1, p0, p1, d0, d1))


def conv_3d_direct(a: Tensor, b: Tensor, s0: int, s1: int, s2: int, p0: int, p1: int, p2: int, d0: int, d1: int,
                   d2: int, c: int, n: int, oc: int) -> Tensor:
    """3-D convolution as one op (ggml_conv_3d_direct, CONV_3D): kernel a [KW, KH, KD, IC*OC] (kernel of (o, c)
    at ne[3] index o*IC + c), input b [W, H, D, IC*N] (index n*IC + c) -> F32 [OW, OH, OD, OC*N] (index
    n*OC + o)."""
    return record(Op.CONV_3D, (a, b), Conv3dParams(s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc))


# ---- ggml's composite helpers: IM2COL + MUL_MAT ----------------------------------------------------------------


def _col_type(a: Tensor) -> GGMLType:
    """The patch type ggml's helpers pick: F32 for a BF16 kernel, else F16."""
    return F32 if a.type == GGMLType.BF16 else GGMLType.F16


def conv_1d(a: Tensor, b: Tensor, s0: int, p0: int, d0: int) -> Tensor:
    """1-D convolution (ggml_conv_1d): kernel a [K, IC, OC], input b [L, IC, N] -> F32 [OL, OC, N], as IM2COL
    (F16 patches) then MUL_MAT with the kernel reshaped to [K*IC, OC]. As ggml's helper, it reshapes the
    product [N*OL, OC] to [OL, OC, N], which is the convolution laid out as documented for N = 1 only."""
    cols = im2col(a, b, s0, 0, p0, 0, d0, 0, False, _col_type(a))
    out = mul_mat(reshape(cols, cols.ne[0], cols.ne[2] * cols.ne[1]), reshape(a, a.ne[0] * a.ne[1], a.ne[2]))
    return reshape(out, cols.ne[1], a.ne[2], cols.ne[2])


def conv_1d_ph(a: Tensor, b: Tensor, s: int, d: int) -> Tensor:
    """conv_1d with half padding (p = K // 2): ggml_conv_1d_ph."""
    return conv_1d(a, b, s, a.ne[0] // 2, d)


def conv_1d_dw(a: Tensor, b: Tensor, s0: int, p0: int, d0: int) -> Tensor:
    """Depthwise 1-D convolution (ggml_conv_1d_dw): kernel a [K, 1, C], input b [L, C] -> F32 [OL, C]."""
    nb = reshape(b, b.ne[0], 1, b.ne[1], b.ne[2])
    cols = im2col(a, nb, s0, 0, p0, 0, d0, 0, False, _col_type(a))
    out = mul_mat(cols, a)
    return reshape(out, out.ne[0], out.ne[2], 1)


def conv_1d_dw_ph(a: Tensor, b: Tensor, s0: int, d0: int) -> Tensor:
    """conv_1d_dw with half padding: ggml_conv_1d_dw_ph."""
    return conv_1d_dw(a, b, s0, a.ne[0] // 2, d0)


def conv_2d(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int) -> Tensor:
    """2-D convolution (ggml_conv_2d): kernel a [KW, KH, IC, OC], input b [W, H, IC, N] -> F32 [OW, OH, OC, N],
    as IM2COL (F16 patches unless the kernel is BF16) then MUL_MAT, then a permuting CONT."""
    cols = im2col(a, b, s0, s1, p0, p1, d0, d1, True, _col_type(a))
    out = mul_mat(reshape(cols, cols.ne[0], cols.ne[3] * cols.ne[2] * cols.ne[1]),
                  reshape(a, a.ne[0] * a.ne[1] * a.ne[2], a.ne[3]))
    out = reshape(out, cols.ne[1], cols.ne[2], cols.ne[3], a.ne[3])
    return cont(permute(out, 0, 1, 3, 2))


def conv_2d_sk_p0(a: Tensor, b: Tensor) -> Tensor:
    """conv_2d with stride = kernel size and no padding (patch embedding): ggml_conv_2d_sk_p0."""
    return conv_2d(a, b, a.ne[0], a.ne[1], 0, 0, 1, 1)


def conv_2d_s1_ph(a: Tensor, b: Tensor) -> Tensor:
    """conv_2d with stride 1 and half padding: ggml_conv_2d_s1_ph."""
    return conv_2d(a, b, 1, 1, a.ne[0] // 2, a.ne[1] // 2, 1, 1)


def conv_2d_dw(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int) -> Tensor:
    """Depthwise 2-D convolution through IM2COL + MUL_MAT (ggml_conv_2d_dw): kernel a [KW, KH, 1, C], input b
    [W, H, C, N] -> F32 [OW, OH, C, N]."""
    na = reshape(a, a.ne[0], a.ne[1], 1, a.ne[2] * a.ne[3])
    cols = im2col(na, reshape(b, b.ne[0], b.ne[1], 1, b.ne[2] * b.ne[3]), s0, s1, p0, p1, d0, d1, True,
                  _col_type(a))
    nb = reshape(cols, cols.ne[0], cols.ne[2] * cols.ne[1], b.ne[2], b.ne[3])
    na = reshape(na, na.ne[0] * na.ne[1], na.ne[2], na.ne[3], 1)
    out = mul_mat(na, nb)
    return reshape(out, cols.ne[1], cols.ne[2], b.ne[2], b.ne[3])


def conv_3d(a: Tensor, b: Tensor, ic: int, s0: int, s1: int, s2: int, p0: int, p1: int, p2: int, d0: int, d1: int,
            d2: int) -> Tensor:
    """3-D convolution (ggml_conv_3d): kernel a [KW, KH, KD, OC*IC], input b [W, H, D, N*IC] -> F32
    [OW, OH, OD, N*OC], as IM2COL_3D then MUL_MAT then a permuting CONT."""
    cols = im2col_3d(a, b, ic, s0, s1, s2, p0, p1, p2, d0, d1, d2, _col_type(a))
    oc, n = a.ne[3] // ic, b.ne[3] // ic
    out = mul_mat(reshape(cols, cols.ne[0], cols.ne[3] * cols.ne[2] * cols.ne[1]),
                  reshape(a, a.ne[0] * a.ne[1] * a.ne[2] * ic, oc))
    od = cols.ne[3] // n
    out = reshape(out, cols.ne[1] * cols.ne[2], od, n, oc)
    out = cont(permute(out, 0, 1, 3, 2))
    return reshape(out, cols.ne[1], cols.ne[2], od, oc * n)
