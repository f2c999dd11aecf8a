"""CPY (type conversions to and from every type, quantising, permuted srcs and dsts, strided dsts, reshaping
copies), DUP and CONT (permuted, sliced, reshaped)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import INT_TYPES, GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import (
    ALL_TYPES,
    BF16,
    F16,
    F32,
    FLOATS,
    I32,
    K_QUANTS,
    QUANTS,
    T,
    quant_threshold,
    unique,
)
from pyggml_conformance.inputs import Init, integers, uniform

IDENTITY = (0, 1, 2, 3)


def _src_init(ts: GGMLType, td: GGMLType) -> Init:
    if ts in INT_TYPES:
        return integers(-64, 64)
    return uniform(-100.0, 100.0) if td in INT_TYPES else uniform(-1.0, 1.0)


def cpy_case(ts: GGMLType, td: GGMLType, ne: Sequence[int], ne_dst: Sequence[int] | None = None,
             perm_src: Sequence[int] = IDENTITY, perm_dst: Sequence[int] = IDENTITY, dst_pad: int = 0) -> Case:
    """Copy src (shape ne, memory laid out permuted by perm_src) into dst (shape ne_dst, default ne; permuted
    by perm_dst; or a view into a leaf with dst_pad extra rows per plane)."""
    parts: dict[str, object] = {"type_src": ts, "type_dst": td, "ne": ne}
    if ne_dst is not None:
        parts["ne_dst"] = ne_dst
    parts.update(perm_src=perm_src, perm_dst=perm_dst)
    if dst_pad:
        parts["dst_pad"] = dst_pad
    shape_dst = tuple(ne_dst) if ne_dst is not None else tuple(ne)
    n = 1
    for x in ne:
        n *= x
    thr = 0.0 if ts == td else quant_threshold(td, n, ts)

    def build(b: CaseBuilder) -> Tensor:
        src = b.permuted(ts, ne, perm_src, _src_init(ts, td))
        if dst_pad:
            dst = b.strided(td, shape_dst, pad=(0, dst_pad, 0, 0))
        else:
            dst = b.permuted(td, shape_dst, perm_dst)
        return ops.cpy(src, dst)

    return Case(Op.CPY, fmt_params(**parts), build, threshold=thr)


def dup_case(t: GGMLType, ne: Sequence[int], perm: Sequence[int] = IDENTITY) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.dup(b.permuted(t, ne, perm))

    return Case(Op.DUP, fmt_params(type=t, ne=ne, perm=perm), build)


def cont_case(t: GGMLType, ne: Sequence[int], slice_: bool = False, perm: Sequence[int] = IDENTITY,
              ne_out: Sequence[int] | None = None) -> Case:
    parts: dict[str, object] = {"type": t, "ne": ne, "slice": slice_, "perm": perm}
    if ne_out is not None:
        parts["ne_out"] = ne_out

    def build(b: CaseBuilder) -> Tensor:
        src = b.strided(t, ne, pad=(1, 1, 1, 0)) if slice_ else b.permuted(t, ne, perm)
        return ops.cont(src, *ne_out) if ne_out is not None else ops.cont(src)

    return Case(Op.CONT, fmt_params(**parts), build)


def _cpy_cases() -> list[Case]:
    out: list[Case] = []
    plain = (*FLOATS, I32)
    for t in (*ALL_TYPES, I32):
        nk = t.traits.blck_size
        for k in (1, 2, 3):
            out.append(cpy_case(t, t, (k * nk, 2, 3, 4)))
            if t in plain:
                out.append(cpy_case(t, t, (k * nk, 2, 3, 4), perm_src=(0, 2, 1, 3)))
                out.append(cpy_case(t, t, (k * nk, 2, 3, 4), perm_src=(0, 3, 1, 2), perm_dst=(0, 2, 1, 3)))
    for ts, td in product(FLOATS, (*ALL_TYPES, I32)):
        # k-quants quantise slowly in the reference: fewer rows
        shapes = ((256, 2, 2, 1), (256, 1, 3, 2)) if td in K_QUANTS else ((256, 4, 4, 4), (256, 2, 3, 4))
        for ne in shapes:
            out.append(cpy_case(ts, td, ne))
            out.append(cpy_case(ts, td, ne, perm_src=(0, 2, 1, 3)))
    for ts in (*QUANTS, *FLOATS, I32):
        out.append(cpy_case(ts, F32, (256, 4, 4, 4)))
        out.append(cpy_case(ts, F32, (256, 2, 3, 4)))
    for ts, td in product(FLOATS, FLOATS):
        out.append(cpy_case(ts, td, (256, 2, 3, 4), perm_src=(1, 0, 2, 3)))
    for ts, td in product(FLOATS, (*FLOATS, I32)):
        for perm in ((0, 2, 1, 3), (1, 0, 2, 3)):
            out.append(cpy_case(ts, td, (33, 5, 3, 2), perm_dst=perm))
        for ne in ((33, 7, 3, 1), (1, 1025, 1, 1), (2, 3, 5, 7)):
            out.append(cpy_case(ts, td, ne))
    for ts, td in product(FLOATS, QUANTS):
        nk = td.traits.blck_size
        out.extend(cpy_case(ts, td, (k * nk, 1, 2, 1) if td in K_QUANTS else (k * nk, 3, 2, 1)) for k in (1, 2, 3))
    for td in FLOATS:
        out += [cpy_case(I32, td, (256, 2, 3, 4)), cpy_case(I32, td, (33, 5, 3, 1), perm_src=(1, 0, 2, 3))]
        out.append(cpy_case(td, I32, (33, 5, 3, 1), perm_src=(1, 0, 2, 3)))
    out += [cpy_case(F32, T.Q4_0, (96, 1, 1, 1)), cpy_case(T.Q4_0, F32, (96, 1, 1, 1))]
    out += [cpy_case(I32, I32, (256, 1, 4, 1), perm_src=(1, 2, 0, 3)),
            cpy_case(F32, F32, (256, 1, 4, 1), perm_src=(1, 2, 0, 3)),
            cpy_case(F32, F32, (2, 2049, 1, 1), perm_src=(1, 0, 2, 3)),
            cpy_case(F32, F32, (2, 2, 1025, 1), perm_src=(1, 0, 2, 3))]
    for t in (*FLOATS, I32):
        out.append(cpy_case(t, t, (128, 2, 3, 1), dst_pad=2))
        out.append(cpy_case(F32, t, (33, 5, 2, 2), dst_pad=1))
    canonical, reverse = (3, 5, 7, 32), (32, 7, 5, 3)
    for t in FLOATS:
        for cur in itertools.permutations(canonical):
            if cur != canonical:
                out.append(cpy_case(t, t, cur, canonical))
            if cur != reverse:
                out.append(cpy_case(t, t, cur, reverse))
            if cur[0] == 32 and t == F32:
                out.append(cpy_case(T.Q4_0, T.Q4_0, cur, reverse))
    return out


def eval_cases() -> list[Case]:
    out = _cpy_cases()
    for t in (F32, F16, BF16, I32, T.I16):
        out.append(dup_case(t, (10, 10, 5, 1)))
        for perm in ((0, 2, 1, 3), (1, 0, 2, 3), (1, 2, 0, 3)):
            out.append(dup_case(t, (10, 8, 5, 2), perm))
    for t, ne, slice_ in product((F32, F16, BF16, I32), ((2, 1, 1, 1), (2, 1, 3, 5), (2, 3, 5, 7), (1, 4, 4, 1),
                                                         (1, 8, 17, 1), (10, 10, 10, 1)), (False, True)):
        out.append(cont_case(t, ne, slice_))
    for t, ne, perm in product((F32, F16), ((10, 10, 10, 1), (33, 5, 7, 1), (64, 3, 65, 1), (2, 3, 5, 7)),
                               ((2, 1, 0, 3), (1, 2, 0, 3), (0, 2, 1, 3))):
        out.append(cont_case(t, ne, perm=perm))
    for t in (F32, F16, BF16):
        out.append(cont_case(t, (10, 6, 4, 1), perm=(1, 0, 2, 3), ne_out=(60, 4)))
        out.append(cont_case(t, (8, 6, 4, 3), perm=(0, 2, 1, 3), ne_out=(48, 12)))
        # destination rows that end inside a source row, longer and shorter than it
        out.append(cont_case(t, (12, 5, 2, 1), perm=(0, 2, 1, 3), ne_out=(20, 6)))
        out.append(cont_case(t, (12, 5, 2, 1), perm=(0, 2, 1, 3), ne_out=(5, 24)))
        out.append(cont_case(t, (12, 5, 2, 1), perm=(1, 0, 2, 3), ne_out=(8, 15)))  # strided source rows
    return unique(out)


def perf_cases() -> list[Case]:
    out = [cpy_case(F32, t, (4096, 512, 1, 1)) for t in (F32, F16, BF16, T.Q8_0, T.Q4_0)]
    out += [cpy_case(F16, F32, (4096, 512, 1, 1)), cpy_case(F32, F32, (128, 512, 32, 1), perm_src=(0, 2, 1, 3))]
    out += [cont_case(F32, (1024, 64, 64, 1), perm=(2, 1, 0, 3)), dup_case(F16, (4096, 512, 1, 1))]
    # attention's heads merged: [d, n, heads] permuted to [d, heads, n], made [d x heads, n]
    out.append(cont_case(F32, (128, 128, 24, 1), perm=(0, 2, 1, 3), ne_out=(128 * 24, 128)))
    return out
