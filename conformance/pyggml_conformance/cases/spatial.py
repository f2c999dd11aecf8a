"""Spatial ops as test-backend-ops grids them: POOL_1D / POOL_2D (avg and max over kernel, stride and padding,
F32 and F16 input, windows wholly in the padding), UPSCALE (nearest, bilinear, bicubic, antialiased bilinear,
align corners, up and down in every dim, ggml's odd shapes), PAD_REFLECT_1D, ROLL (permuted input),
TIMESTEP_EMBEDDING (odd and even dims), WIN_PART / WIN_UNPART (padding windows), GET_REL_POS and ADD_REL_POS
(SAM's layouts, in place). Strided inputs check that no kernel assumes contiguous rows."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops import PoolOp, ScaleMode
from pyggml.ops.base import Op
from pyggml.ops.spatial import SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, unique
from pyggml_conformance.cases.common import varied_input as _input  # v: 0 contiguous, 1 strided, 2 permuted
from pyggml_conformance.inputs import uniform

Ne = Sequence[int]


def pool1d_case(op: PoolOp, t: GGMLType, ne: Ne, k0: int, s0: int, p0: int, v: int = 0) -> Case:
    params = fmt_params(pool_type=op, type_input=t, ne_input=ne, k0=k0, s0=s0, p0=p0, v=v)
    return Case(Op.POOL_1D, params, lambda b: ops.pool_1d(_input(b, t, ne, v), op, k0, s0, p0))


def pool2d_case(op: PoolOp, t: GGMLType, ne: Ne, k0: int, k1: int, s0: int, s1: int, p0: int, p1: int,
                v: int = 0) -> Case:
    params = fmt_params(pool_type=op, type_input=t, ne_input=ne, k0=k0, k1=k1, s0=s0, s1=s1, p0=p0, p1=p1, v=v)
    return Case(Op.POOL_2D, params, lambda b: ops.pool_2d(_input(b, t, ne, v), op, k0, k1, s0, s1, p0, p1))


def interpolate_case(ne: Ne, ne_dst: Ne, mode: int, v: int = 0) -> Case:
    params = fmt_params(type=F32, ne=ne, ne_tgt=ne_dst, mode=f"{mode:#x}", v=v)
    return Case(Op.UPSCALE, params, lambda b: ops.interpolate(_input(b, F32, ne, v), ne_dst[0], ne_dst[1], ne_dst[2],
                                                                 ne_dst[3], mode))


def pad_reflect_case(ne: Ne, p0: int, p1: int, v: int = 0) -> Case:
    params = fmt_params(type=F32, ne_a=ne, pad_0=p0, pad_1=p1, v=v)
    return Case(Op.PAD_REFLECT_1D, params, lambda b: ops.pad_reflect_1d(_input(b, F32, ne, v), p0, p1))


def roll_case(ne: Ne, shifts: tuple[int, int, int, int], v: int = 0) -> Case:
    params = fmt_params(ne=ne, shift=shifts, v=v)
    return Case(Op.ROLL, params, lambda b: ops.roll(_input(b, F32, ne, v), *shifts))


def timestep_case(n: int, dim: int, max_period: int, hi: float, v: int = 0) -> Case:
    params = fmt_params(type=F32, n=n, dim=dim, max_period=max_period, v=v) + f",range=[0,{hi:g}]"

    def build(b: CaseBuilder) -> Tensor:
        t = b.strided(F32, (n,), pad=(2,), offset=1, init=uniform(0.0, hi)) if v else b.input(F32, (n,),
                                                                                              uniform(0.0, hi))
        return ops.timestep_embedding(t, dim, max_period)

    return Case(Op.TIMESTEP_EMBEDDING, params, build)


def win_case(ne: Ne, w: int, v: int = 0, unpart: bool = False) -> Case:
    """WIN_PART of an image ne [C, W, H]; with unpart, WIN_UNPART of windows made as win_part would."""
    params = fmt_params(ne=ne, w=w, v=v)
    if not unpart:
        return Case(Op.WIN_PART, params, lambda b: ops.win_part(_input(b, F32, ne, v), w))
    n = -(-ne[1] // w) * -(-ne[2] // w)
    return Case(Op.WIN_UNPART, params,
                lambda b: ops.win_unpart(_input(b, F32, (ne[0], w, w, n), v), ne[1], ne[2], w))


def get_rel_pos_case(c: int, size: int, v: int = 0) -> Case:
    params = fmt_params(type=F16, c=c, size=size, v=v)
    return Case(Op.GET_REL_POS, params, lambda b: ops.get_rel_pos(_input(b, F16, (c, 2 * size - 1), v), size, size))


def add_rel_pos_case(k: int, qw: int, qh: int, n: int, v: int = 0, inplace: bool = False) -> Case:
    params = fmt_params(type=F32, k=k, qw=qw, qh=qh, n=n, v=v, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        a = _input(b, F32, (k * k, qw * qh, n), 1 if v else 0)
        pw = _input(b, F32, (k, qw, qh, n), 2 if v else 0)
        ph = _input(b, F32, (k, qw, qh, n), 1 if v else 0)
        return ops.add_rel_pos(a, pw, ph, inplace=inplace)

    return Case(Op.ADD_REL_POS, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for op, k0, k1, s0, s1, p0, p1 in product(PoolOp, (1, 3), (1, 3), (1, 2), (1, 2), (0, 1), (0, 1)):
        out.append(pool2d_case(op, F32, (10, 10, 3, 1), k0, k1, s0, s1, p0, p1))
    for op, k0, s0, p0 in product(PoolOp, (1, 2, 3), (1, 2, 3), (0, 1, 2, 3)):
        for ne in ((10, 3, 2, 1), (11, 1, 3, 2), (128, 2, 1, 3)):
            out.append(pool1d_case(op, F32, ne, k0, s0, p0))
    for op, t, v in product(PoolOp, (F32, F16), (0, 1, 2)):
        out.append(pool1d_case(op, t, (33, 5, 4, 2), 4, 3, 1, v))
        out.append(pool2d_case(op, t, (17, 13, 4, 2), 3, 2, 2, 3, 1, 1, v))
    for op in PoolOp:
        out.append(pool2d_case(op, F32, (64, 64, 8, 1), 2, 2, 2, 2, 0, 0))  # a CNN's 2x2 max pool
    ac = SCALE_FLAG_ALIGN_CORNERS
    for mode in (ScaleMode.NEAREST, ScaleMode.BILINEAR, ScaleMode.BICUBIC, ScaleMode.BILINEAR | SCALE_FLAG_ANTIALIAS):
        out.append(interpolate_case((64, 48, 3, 2), (128, 96, 3, 2), mode))
        out.append(interpolate_case((2, 5, 7, 11), (5, 7, 11, 13), mode))
        out.append(interpolate_case((5, 7, 11, 13), (2, 5, 7, 11), mode))
        for v in (1, 2):
            out.append(interpolate_case((9, 6, 4, 2), (20, 13, 4, 2), mode, v))
    for flags in (ScaleMode.NEAREST | ac, ScaleMode.BILINEAR | ac, ScaleMode.BICUBIC | ac,
                  ScaleMode.BILINEAR | ac | SCALE_FLAG_ANTIALIAS):
        out.append(interpolate_case((2, 5, 7, 11), (5, 7, 11, 13), flags))
        out.append(interpolate_case((1, 4, 3, 2), (2, 8, 3, 2), flags))
        out.append(interpolate_case((4, 1, 3, 2), (1, 1, 3, 2), flags))
        out.append(interpolate_case((16, 12, 3, 1), (31, 23, 3, 1), flags, 1))
    for mode in (ScaleMode.BILINEAR | SCALE_FLAG_ANTIALIAS, ScaleMode.BICUBIC):  # strong downscales
        out.append(interpolate_case((96, 80, 2, 1), (13, 9, 2, 1), mode))
    for ne, p0, p1 in (((512, 34, 2, 1), 10, 9), ((3000, 8, 4, 1), 256, 255), ((7, 3, 2, 2), 6, 0),
                       ((7, 3, 2, 2), 0, 6), ((2, 5, 1, 1), 1, 1)):
        out.append(pad_reflect_case(ne, p0, p1))
    for v in (1, 2):
        out.append(pad_reflect_case((40, 6, 3, 2), 5, 7, v))
    for shifts, v in product(((3, -2, 1, -1), (0, 0, 0, 0), (-9, 4, -3, 2)), (0, 1, 2)):
        out.append(roll_case((10, 5, 4, 3), shifts, v))
    for n, dim, mp, hi in ((2, 320, 10000, 1.0), (2, 320, 10000, 1000.0), (7, 255, 10000, 100.0),
                           (5, 1, 100, 10.0), (3, 6, 2, 50.0), (64, 256, 10000, 1000.0)):
        out.append(timestep_case(n, dim, mp, hi))
    out.append(timestep_case(9, 64, 10000, 1000.0, 1))
    for ne, w in (((8, 14, 14, 1), 7), ((8, 15, 13, 1), 7), ((3, 5, 9, 1), 4), ((4, 3, 2, 1), 5)):
        for v in (0, 1):
            out.append(win_case(ne, w, v))
            out.append(win_case(ne, w, v, unpart=True))
    out.append(win_case((16, 15, 15, 1), 7, 2))
    for c, size, v in ((4, 5, 0), (64, 14, 0), (8, 7, 1), (16, 3, 2)):
        out.append(get_rel_pos_case(c, size, v))
    for k, qw, qh, n, v, inplace in ((3, 3, 3, 2, 0, False), (14, 14, 14, 2, 0, False), (5, 4, 3, 3, 1, False),
                                     (7, 7, 7, 1, 0, True), (4, 2, 5, 2, 1, True)):
        out.append(add_rel_pos_case(k, qw, qh, n, v, inplace))
    return unique(out)


def perf_cases() -> list[Case]:
    return [pool2d_case(PoolOp.MAX, F32, (112, 112, 64, 1), 3, 3, 2, 2, 1, 1),
            interpolate_case((64, 64, 256, 1), (128, 128, 256, 1), ScaleMode.BILINEAR),
            pad_reflect_case((3000, 384, 4, 1), 200, 200),
            add_rel_pos_case(14, 14, 14, 12)]
