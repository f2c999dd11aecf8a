"""The convolution family in the style of test-backend-ops: IM2COL (2-D and 1-D, F32/F16 destinations, whisper's
1-D shapes, dilation and padding grids), IM2COL_3D (with ggml's strided view of the input), CONV_2D (ggml's
stride / padding / dilation grid, odd channel counts, batch > 1, channel-first (CWHN) input and kernel, a kernel
at an element offset), CONV_2D_DW (WHCN and CWHN), CONV_3D (ggml's geometries), CONV_TRANSPOSE_1D / _2D,
COL2IM_1D, and ggml's composite depthwise conv_1d_dw (IM2COL + MUL_MAT). Thresholds are ggml's: 5e-4 where the
op has a reduction over F16 values (CONV_2D, CONV_3D, CONV_TRANSPOSE_2D, the composite), else 1e-7."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, ne4, unique

CWHN_INPUT = (2, 0, 1, 3)
"""Memory order of a channel-first input [W, H, C, N]: C fastest (test-backend-ops' cwhn layout)."""
CWHN_KERNEL = (3, 2, 0, 1)
"""Memory order of test-backend-ops' cwhn kernel [KW, KH, IC, OC]: OC fastest, then IC, KW, KH."""
REDUCING = 5e-4


def _kernel(b: CaseBuilder, kt: GGMLType, ne: Sequence[int], cwhn: bool = False, offset: int = 0) -> Tensor:
    """A kernel of shape ne: plain, channel-first (cwhn), or a contiguous view `offset` elements into a wider
    1-D tensor (test-backend-ops' kernel_offset)."""
    if cwhn:
        return b.permuted(kt, ne, CWHN_KERNEL)
    if offset:
        full = ne4(ne)
        storage = b.input(kt, (full[0] * full[1] * full[2] * full[3] + offset,))
        es = storage.nb[0]
        nb = (full[0] * es, full[0] * full[1] * es, full[0] * full[1] * full[2] * es)
        return ops.view(storage, full, nb, offset * es)
    return b.input(kt, ne)


def im2col_case(ti: GGMLType, tk: GGMLType, td: GGMLType, ne_in: Sequence[int], ne_k: Sequence[int], s0: int,
                s1: int, p0: int, p1: int, d0: int, d1: int, is_2d: bool, v: int = 0) -> Case:
    """v 1: the input is a strided view (rows and planes padded)."""
    params = fmt_params(type_input=ti, type_kernel=tk, dst_type=td, ne_input=ne_in, ne_kernel=ne_k, s0=s0, s1=s1,
                        p0=p0, p1=p1, d0=d0, d1=d1, is_2D=is_2d, v=v)

    def build(b: CaseBuilder) -> Tensor:
        x = b.strided(ti, ne_in, pad=(2, 1, 1, 0)) if v else b.input(ti, ne_in)
        return ops.im2col(b.input(tk, ne_k), x, s0, s1, p0, p1, d0, d1, is_2d, td)

    return Case(Op.IM2COL, params, build)


def im2col_3d_case(ti: GGMLType, tk: GGMLType, td: GGMLType, ne_in: Sequence[int], ne_k: Sequence[int], ic: int,
                   s: Sequence[int], p: Sequence[int], d: Sequence[int], v: bool = False) -> Case:
    """v: the input is ggml's view of a bigger tensor (each dim 2 shorter, the bigger one's strides)."""
    params = fmt_params(type_input=ti, type_kernel=tk, dst_type=td, ne_input=ne_in, ne_kernel=ne_k, IC=ic, s=s,
                        p=p, d=d, v=v)

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(ti, ne_in)
        if v:
            x = ops.view(x, tuple(n - 2 for n in ne4(ne_in)), x.nb[1:], 0)
        return ops.im2col_3d(b.input(tk, ne_k), x, ic, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], td)

    return Case(Op.IM2COL_3D, params, build)


def conv_2d_case(ne_in: Sequence[int], ne_k: Sequence[int], tk: GGMLType, s0: int, s1: int, p0: int, p1: int,
                 d0: int, d1: int, cwhn: bool = False, kernel_offset: int = 0, ti: GGMLType = F32) -> Case:
    """ti: the input's type (and the result's); ggml's CPU kernel reads F32 only, pyggml takes every float type."""
    params = fmt_params(ne_input=ne_in, ne_kernel=ne_k, type_kernel=tk, stride0=s0, stride1=s1, padding0=p0,
                        padding1=p1, dilation0=d0, dilation1=d1, cwhn=cwhn, kernel_offset=kernel_offset)
    if ti != F32:
        params += f",type_input={ti}"

    def build(b: CaseBuilder) -> Tensor:
        x = b.permuted(ti, ne_in, CWHN_INPUT) if cwhn else b.input(ti, ne_in)
        return ops.conv_2d_direct(_kernel(b, tk, ne_k, cwhn, kernel_offset), x, s0, s1, p0, p1, d0, d1)

    return Case(Op.CONV_2D, params, build, threshold=REDUCING)


def conv_2d_dw_case(ne_in: Sequence[int], ne_k: Sequence[int], tk: GGMLType, s: int, p: int, d: int,
                    cwhn: bool) -> Case:
    params = fmt_params(ne_input=ne_in, ne_kernel=ne_k, type_kernel=tk, stride=s, padding=p, dilation=d, cwhn=cwhn)

    def build(b: CaseBuilder) -> Tensor:
        x = b.permuted(F32, ne_in, CWHN_INPUT) if cwhn else b.input(F32, ne_in)
        return ops.conv_2d_dw_direct(_kernel(b, tk, ne_k, cwhn), x, s, s, p, p, d, d)

    return Case(Op.CONV_2D_DW, params, build)


def conv_3d_case(n: int, ic: int, id_: int, ih: int, iw: int, oc: int, kd: int, kh: int, kw: int,
                 s: Sequence[int], p: Sequence[int], d: Sequence[int], tk: GGMLType, kernel_offset: int = 0) -> Case:
    params = fmt_params(N=n, IC=ic, ID=id_, IH=ih, IW=iw, OC=oc, KD=kd, KH=kh, KW=kw, s=s, p=p, d=d, type_kernel=tk,
                        kernel_offset=kernel_offset)

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(F32, (iw, ih, id_, ic * n))
        k = _kernel(b, tk, (kw, kh, kd, ic * oc), offset=kernel_offset)
        return ops.conv_3d_direct(k, x, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], ic, n, oc)

    return Case(Op.CONV_3D, params, build, threshold=REDUCING)


def conv_transpose_1d_case(ne_in: Sequence[int], ne_k: Sequence[int], s0: int, tk: GGMLType = F32) -> Case:
    params = fmt_params(ne_input=ne_in, ne_kernel=ne_k, s0=s0, p0=0, d0=1, type_kernel=tk)

    def build(b: CaseBuilder) -> Tensor:
        return ops.conv_transpose_1d(b.input(tk, ne_k), b.input(F32, ne_in), s0, 0, 1)

    return Case(Op.CONV_TRANSPOSE_1D, params, build, threshold=REDUCING if tk == F16 else None)


def conv_transpose_2d_case(ne_in: Sequence[int], ne_k: Sequence[int], stride: int, tk: GGMLType) -> Case:
    params = fmt_params(kernel_type=tk, ne_input=ne_in, ne_kernel=ne_k, stride=stride)

    def build(b: CaseBuilder) -> Tensor:
        return ops.conv_transpose_2d_p0(b.input(tk, ne_k), b.input(F32, ne_in), stride)

    return Case(Op.CONV_TRANSPOSE_2D, params, build, threshold=REDUCING)


def col2im_1d_case(t: GGMLType, k: int, oc: int, t_in: int, s0: int, p0: int) -> Case:
    params = fmt_params(type=t, K=k, OC=oc, T_in=t_in, s0=s0, p0=p0)

    def build(b: CaseBuilder) -> Tensor:
        return ops.col2im_1d(b.input(t, (k * oc, t_in)), s0, oc, p0)

    return Case(Op.COL2IM_1D, params, build, threshold=None if t == F32 else REDUCING)


def _with_im2col(out: Tensor) -> list[Tensor]:
    """A composite's IM2COL node (the op a case is listed under comes first among its outputs) and its result."""
    todo, seen = [out], set()
    while todo:
        t = todo.pop()
        if t.op is Op.IM2COL:
            return [t, out]
        if id(t) not in seen:
            seen.add(id(t))
            todo.extend(s for s in t.src if s is not None)
    raise AssertionError(f"no IM2COL under {out.name}")


def conv_1d_dw_case(ne_in: Sequence[int], ne_k: Sequence[int], tk: GGMLType, s: int, p: int, d: int) -> Case:
    """ggml's composite depthwise 1-D conv (IM2COL + MUL_MAT), listed under IM2COL (both outputs compared)."""
    params = fmt_params(composite="conv_1d_dw", ne_input=ne_in, ne_kernel=ne_k, type_kernel=tk, stride=s, padding=p,
                        dilation=d)

    def build(b: CaseBuilder) -> list[Tensor]:
        return _with_im2col(ops.conv_1d_dw(b.input(tk, ne_k), b.input(F32, ne_in), s, p, d))

    return Case(Op.IM2COL, params, build, threshold=REDUCING)


def conv_2d_composite_case(ne_in: Sequence[int], ne_k: Sequence[int], tk: GGMLType, s: int, p: int, d: int) -> Case:
    """ggml_conv_2d (IM2COL to F16 patches + MUL_MAT + CONT), listed under IM2COL."""
    params = fmt_params(composite="conv_2d", ne_input=ne_in, ne_kernel=ne_k, type_kernel=tk, stride=s, padding=p,
                        dilation=d)

    def build(b: CaseBuilder) -> list[Tensor]:
        return _with_im2col(ops.conv_2d(b.input(tk, ne_k), b.input(F32, ne_in), s, s, p, p, d, d))

    return Case(Op.IM2COL, params, build, threshold=REDUCING)


def _im2col_cases() -> list[Case]:
    out: list[Case] = []
    for ti, tk, td in ((F32, F32, F32), (F32, F32, F16), (F32, F16, F32), (F32, F16, F16), (F16, F16, F16)):
        out.append(im2col_case(ti, tk, td, (10, 10, 3, 1), (3, 3, 3, 1), 1, 1, 1, 1, 1, 1, True))
    out.append(im2col_case(F32, F32, F32, (300, 16, 1, 1), (3, 16, 64, 1), 1, 0, 1, 0, 1, 0, False))  # whisper
    out.append(im2col_case(F32, F16, F16, (300, 24, 2, 1), (3, 24, 24, 1), 2, 0, 1, 0, 1, 0, False))
    for s0, s1, p0, p1, d0, d1 in product((1, 3), (1, 3), (0, 3), (0, 3), (1, 3), (1, 3)):
        out.append(im2col_case(F32, F16, F32, (20, 20, 2, 2), (3, 3, 2, 2), s0, s1, p0, p1, d0, d1, True))
    for s0, p0, d0 in product((1, 3), (0, 3), (1, 3)):
        out.append(im2col_case(F32, F32, F16, (20, 2, 2, 1), (3, 2, 2, 1), s0, 0, p0, 0, d0, 0, False))
    out.append(im2col_case(F32, F16, F16, (12, 12, 1, 32), (3, 3, 1, 32), 1, 1, 1, 1, 1, 1, True))
    out.append(im2col_case(F32, F16, F16, (12, 12, 2, 64), (3, 3, 2, 64), 1, 1, 1, 1, 1, 1, True))
    out.append(im2col_case(F32, F16, F16, (5, 5, 1, 32), (3, 4, 1, 32), 1, 1, 0, 0, 1, 1, True))
    out.append(im2col_case(F32, F16, F16, (64, 64, 1, 2), (16, 17, 1, 2), 1, 1, 1, 1, 1, 1, True))
    out.append(im2col_case(F32, F32, F32, (2, 2, 96, 73), (2, 2, 96, 8), 1, 1, 0, 0, 1, 1, True))
    for td in (F32, F16):
        out.append(im2col_case(F32, F16, td, (11, 9, 3, 2), (3, 2, 3, 4), 2, 1, 1, 2, 2, 1, True, v=1))
        out.append(im2col_case(F32, F16, td, (30, 5, 2, 1), (4, 5, 3, 1), 2, 0, 2, 0, 1, 0, False, v=1))
    return out


def _im2col_3d_cases() -> list[Case]:
    out: list[Case] = []
    for ti, tk, td in ((F32, F32, F32), (F32, F16, F32), (F32, F16, F16)):
        out.append(im2col_3d_case(ti, tk, td, (10, 10, 10, 9), (3, 3, 3, 3), 3, (1, 1, 1), (1, 1, 1), (1, 1, 1)))
    for s, p, d, v in product(((1, 1, 1), (2, 1, 3)), ((0, 0, 0), (1, 2, 1)), ((1, 1, 1), (2, 1, 2)), (False, True)):
        out.append(im2col_3d_case(F32, F16, F32, (12, 11, 10, 4), (3, 2, 3, 6), 2, s, p, d, v))
    return out


def _conv_2d_cases() -> list[Case]:
    out: list[Case] = []
    for tk in (F32, F16):
        for s, p, d in product((1, 3), (0, 3), (1, 3)):
            out.append(conv_2d_case((21, 17, 5, 2), (3, 4, 5, 7), tk, s, s, p, p, d, d))
        out.append(conv_2d_case((64, 64, 16, 1), (3, 3, 16, 16), tk, 1, 1, 0, 0, 1, 1))
        out.append(conv_2d_case((24, 20, 16, 1), (3, 3, 16, 24), tk, 1, 1, 1, 1, 1, 1, cwhn=True))
    out.append(conv_2d_case((19, 17, 8, 2), (3, 3, 8, 65), F16, 1, 1, 1, 1, 1, 1))
    out.append(conv_2d_case((19, 17, 16, 3), (3, 3, 16, 33), F16, 2, 3, 4, 2, 2, 1))
    out.append(conv_2d_case((13, 11, 16, 3), (1, 1, 16, 33), F16, 1, 1, 0, 0, 1, 1))
    out.append(conv_2d_case((19, 17, 8, 2), (3, 3, 8, 17), F16, 1, 1, 1, 1, 1, 1, kernel_offset=1))
    out.append(conv_2d_case((19, 17, 8, 2), (3, 3, 8, 17), F32, 1, 1, 1, 1, 1, 1, kernel_offset=1))
    out.append(conv_2d_case((9, 7, 3, 2), (9, 7, 3, 5), F32, 1, 1, 0, 0, 1, 1))  # kernel as large as the input
    out.append(conv_2d_case((11, 9, 6, 2), (3, 3, 6, 20), BF16, 2, 1, 1, 1, 1, 2))  # beyond ggml's CPU types
    out.append(conv_2d_case((11, 9, 6, 2), (3, 3, 6, 20), F16, 1, 2, 2, 0, 2, 1, cwhn=True, ti=F16))
    return out


def _conv_3d_cases() -> list[Case]:
    out: list[Case] = []
    for tk in (F32, F16):
        out.append(conv_3d_case(1, 4, 8, 8, 8, 8, 1, 1, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1), tk))
        out.append(conv_3d_case(2, 8, 5, 11, 9, 65, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), tk))
        out.append(conv_3d_case(2, 5, 7, 9, 13, 17, 2, 3, 4, (2, 1, 3), (3, 2, 2), (2, 1, 2), tk))
        out.append(conv_3d_case(3, 16, 3, 7, 9, 33, 1, 1, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1), tk))
        out.append(conv_3d_case(2, 8, 7, 5, 9, 33, 3, 1, 1, (1, 1, 2), (0, 0, 2), (1, 1, 2), tk))
        out.append(conv_3d_case(2, 3, 1, 2, 1, 7, 1, 1, 1, (1, 1, 1), (3, 4, 2), (1, 1, 1), tk))
        out.append(conv_3d_case(2, 8, 5, 7, 9, 17, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), tk, kernel_offset=1))
    return out


def _misc_cases() -> list[Case]:
    out: list[Case] = []
    dw_geoms = (((17, 34, 9, 1), (3, 3, 1, 9)), ((32, 8, 64, 2), (3, 3, 1, 64)))
    for (ne_in, ne_k), s, p, d, cwhn, tk in product(dw_geoms, (1, 2), (0, 1), (1, 2), (False, True), (F32, F16)):
        out.append(conv_2d_dw_case(ne_in, ne_k, tk, s, p, d, cwhn))
    for length, cin, cout, k, s0 in product((1, 2, 7), (1, 3), (1, 4), (1, 3), (1, 2, 3)):
        out.append(conv_transpose_1d_case((length, cin, 1, 1), (k, cout, cin, 1), s0))
    out.append(conv_transpose_1d_case((197, 32, 1, 1), (16, 32, 32, 1), 1))
    out.append(conv_transpose_1d_case((3, 2, 1, 1), (3, 2, 2, 1), 2))
    out.append(conv_transpose_1d_case((37, 8, 1, 1), (5, 6, 8, 1), 3, F16))
    for tk in (F32, F16):
        out.append(conv_transpose_2d_case((3, 2, 3, 1), (2, 3, 2, 3), 1, tk))
        out.append(conv_transpose_2d_case((10, 10, 9, 1), (3, 3, 1, 9), 2, tk))
        out.append(conv_transpose_2d_case((9, 7, 4, 2), (3, 4, 5, 4), 3, tk))
    for t in (F32, F16):
        for k, oc, t_in, s0, p0 in ((4, 3, 7, 2, 0), (4, 3, 7, 2, 1), (16, 1, 20, 8, 4), (3, 8, 11, 1, 0),
                                    (5, 2, 9, 3, 2), (2, 6, 1, 5, 0)):
            out.append(col2im_1d_case(t, k, oc, t_in, s0, p0))
    for tk in (F32, F16):
        out.append(conv_1d_dw_case((64, 16, 1, 1), (3, 1, 16, 1), tk, 1, 0, 1))
        out.append(conv_1d_dw_case((64, 16, 1, 1), (7, 1, 16, 1), tk, 1, 3, 1))
        out.append(conv_1d_dw_case((97, 33, 1, 1), (5, 1, 33, 1), tk, 2, 2, 2))
        out.append(conv_2d_composite_case((20, 18, 6, 2), (3, 3, 6, 10), tk, 1, 1, 1))
        out.append(conv_2d_composite_case((20, 18, 6, 1), (3, 5, 6, 4), tk, 2, 2, 2))
    return out


def eval_cases() -> list[Case]:
    return unique([*_im2col_cases(), *_im2col_3d_cases(), *_conv_2d_cases(), *_conv_3d_cases(), *_misc_cases()])


def perf_cases() -> list[Case]:
    return [conv_2d_case((64, 64, 64, 1), (3, 3, 64, 64), F32, 1, 1, 1, 1, 1, 1),
            conv_2d_case((64, 64, 64, 1), (3, 3, 64, 64), F16, 1, 1, 1, 1, 1, 1),
            im2col_case(F32, F16, F16, (300, 128, 1, 1), (3, 128, 128, 1), 1, 0, 1, 0, 1, 0, False),
            conv_3d_case(1, 16, 16, 32, 32, 32, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), F32)]
