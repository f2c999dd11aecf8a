"""SOFT_MAX (mask F32/F16 with -inf entries and broadcast over dims 2 and 3, padded mask rows, scale, ALiBi
max_bias, per-head sinks, in place, long rows) and DIAG_MASK_INF / DIAG_MASK_ZERO."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, mul
from pyggml_conformance.inputs import kq_mask


def soft_max_case(ne: Sequence[int], mask: bool, sinks: bool, m_prec: GGMLType = F32,
                  nr23: Sequence[int] = (1, 1), scale: float = 1.0, max_bias: float = 0.0,
                  inplace: bool = False, mask_pad: int = 0, v: int = 0) -> Case:
    """a [ne0, ne1, ne2*nr0, ne3*nr1]; mask [ne0, ne1 + mask_pad, ne2, ne3] broadcast over the repeats;
    sinks [ne2*nr0]; v=1: a's rows strided."""
    params = fmt_params(type=F32, ne=ne, mask=mask, sinks=sinks, m_prec=m_prec, nr23=nr23, scale=scale,
                        max_bias=max_bias, inplace=inplace, mask_pad=mask_pad, v=v)

    def build(b: CaseBuilder) -> Tensor:
        dims = mul(ne, (1, 1, nr23[0], nr23[1]))
        a = b.strided(F32, dims, pad=(3, 1, 0, 0)) if v else b.input(F32, dims)
        m = b.input(m_prec, (ne[0], ne[1] + mask_pad, ne[2], ne[3]), kq_mask()) if mask else None
        s = b.input(F32, (dims[2],)) if sinks else None
        return ops.soft_max(a, m, scale, max_bias, s, inplace=inplace)

    return Case(Op.SOFT_MAX, params, build)


def diag_mask_case(op: Op, ne: Sequence[int], n_past: int, inplace: bool = False) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        fn = ops.diag_mask_inf if op is Op.DIAG_MASK_INF else ops.diag_mask_zero
        return fn(b.input(F32, ne), n_past, inplace=inplace)

    return Case(op, fmt_params(type=F32, ne=ne, n_past=n_past, inplace=inplace), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for mask, sinks, max_bias, scale, ne0, ne1 in product((False, True), (False, True), (0.0, 8.0), (1.0, 0.1),
                                                          (16, 1024), (16, 64)):
        if not mask and max_bias > 0:
            continue
        small = ne0 <= 32 and ne1 <= 32
        for m_prec in (F32, F16) if mask else (F32,):
            shapes: list[tuple[tuple[int, ...], tuple[int, int]]] = [((ne0, ne1, 1, 1), (1, 1)),
                                                                     ((ne0 - 1, ne1 - 1, 1, 1), (1, 1))]
            if mask and small:
                shapes += [((ne0, ne1, 1, 3), (3, 1)), ((ne0 - 1, ne1 - 1, 1, 1), (2, 3))]
            out += [soft_max_case(ne, mask, sinks, m_prec, nr23, scale, max_bias) for ne, nr23 in shapes]
    for mask, sinks, m_prec in product((False, True), (False, True), (F32, F16)):
        out.append(soft_max_case((16, 2, 32, 1), mask, sinks, m_prec, scale=0.1, inplace=True))
    out += [
        soft_max_case((16, 2, 32, 1), True, True, F32, scale=0.1),
        soft_max_case((16, 2, 32, 1), True, False, F16, scale=0.1),
        soft_max_case((16, 2, 32, 1), False, True, F32, scale=0.1),
        soft_max_case((32, 2, 32, 1), True, True, F32, scale=0.1, max_bias=8.0),
        soft_max_case((32, 2, 32, 1), True, True, F16, scale=0.1, max_bias=8.0),
        soft_max_case((32, 7, 4, 2), True, False, F16, scale=0.5, mask_pad=9),
        soft_max_case((33, 5, 4, 1), True, True, F32, scale=0.25, max_bias=8.0, v=1),
        soft_max_case((65537, 2, 3, 1), True, True, F32, scale=0.1, max_bias=8.0),
        soft_max_case((65537, 2, 3, 1), True, True, F16, scale=0.1, max_bias=8.0),
        soft_max_case((65536, 1, 1, 1), False, False),
        soft_max_case((65536, 4, 1, 1), False, False),
        soft_max_case((100003, 3, 1, 1), False, False),
    ]
    for op, ne, n_past, inplace in product((Op.DIAG_MASK_INF, Op.DIAG_MASK_ZERO),
                                           ((10, 10, 1, 1), (10, 10, 3, 1), (10, 10, 3, 2), (33, 17, 2, 1)),
                                           (0, 5), (False, True)):
        out.append(diag_mask_case(op, ne, n_past, inplace))
    return out


def perf_cases() -> list[Case]:
    return [soft_max_case((4096, 512, 1, 1), False, False),
            soft_max_case((512, 512, 32, 1), True, False, F16, scale=0.125),
            soft_max_case((512, 512, 32, 1), True, True, F16, scale=0.125, max_bias=8.0),
            diag_mask_case(Op.DIAG_MASK_INF, (512, 512, 32, 1), 0)]
