"""Reductions: SUM, SUM_ROWS, MEAN, CUMSUM (long rows), ARGMAX (distinct values), COUNT_EQUAL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F32, FLOATS, I32
from pyggml_conformance.inputs import distinct, integers

IDENTITY = (0, 1, 2, 3)
REDUCE: dict[Op, Callable[[Tensor], Tensor]] = {Op.SUM: ops.sum, Op.SUM_ROWS: ops.sum_rows, Op.MEAN: ops.mean,
                                                Op.CUMSUM: ops.cumsum}


def reduce_case(op: Op, t: GGMLType, ne: Sequence[int], perm: Sequence[int] = IDENTITY, v: int = 0) -> Case:
    """perm: src laid out permuted; v=1: src rows strided."""
    params = fmt_params(type=t, ne=ne, perm=perm, v=v)

    def build(b: CaseBuilder) -> Tensor:
        a = b.strided(t, ne, pad=(3, 1, 0, 0)) if v else b.permuted(t, ne, perm)
        return REDUCE[op](a)

    return Case(op, params, build)


def argmax_case(ne: Sequence[int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        init = distinct(10.0)
        a = b.strided(F32, ne, pad=(5, 0, 0, 0), init=init) if v else b.input(F32, ne, init)
        return ops.argmax(a)

    return Case(Op.ARGMAX, fmt_params(type=F32, ne=ne, v=v), build)


def count_equal_case(ne: Sequence[int], hi: int = 4, v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        init = integers(0, hi)
        a = b.strided(I32, ne, pad=(1, 0, 0, 0), init=init) if v else b.input(I32, ne, init)
        return ops.count_equal(a, b.input(I32, ne, init))

    return Case(Op.COUNT_EQUAL, fmt_params(type=I32, ne=ne, values=hi, v=v), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for t in FLOATS:
        out.append(reduce_case(Op.SUM, t, (10, 5, 4, 3)))
        out.append(reduce_case(Op.SUM, t, (33, 256, 1, 1)))
    for perm in ((0, 2, 1, 3), (0, 3, 2, 1), (0, 1, 3, 2), (1, 0, 2, 3)):
        out.append(reduce_case(Op.SUM, F32, (11, 5, 6, 3), perm))
    out += [reduce_case(Op.SUM, F32, ne) for ne in ((33, 1, 1, 1), (33, 1024, 1, 1), (65537, 1, 1, 1))]
    out.append(reduce_case(Op.SUM, F32, (33, 7, 3, 1), v=1))
    for op in (Op.SUM_ROWS, Op.MEAN):
        for ne in ((10, 5, 4, 3), (11, 5, 6, 3), (16, 5, 6, 3), (33, 1, 1, 1), (33, 1024, 1, 1), (33, 256, 1, 1),
                   (32, 256, 1, 1), (32769, 1, 1, 1)):
            out.append(reduce_case(op, F32, ne))
        for ne, perm in product(((11, 5, 6, 3), (16, 5, 6, 3)), ((0, 2, 1, 3), (0, 1, 3, 2), (1, 0, 2, 3))):
            out.append(reduce_case(op, F32, ne, perm))
        out.append(reduce_case(op, F32, (33, 7, 3, 1), v=1))
    for n in (10, 127, 128, 255, 256, 511, 512, 1023, 1024, 2047, 2048):
        out.append(reduce_case(Op.CUMSUM, F32, (n, 5, 4, 3)))
    out += [reduce_case(Op.CUMSUM, F32, ne) for ne in ((128, 128, 4, 4), (24001, 1, 1, 1), (20481, 4, 1, 1))]
    out += [reduce_case(Op.CUMSUM, F32, (33, 5, 4, 3), (0, 2, 1, 3)), reduce_case(Op.CUMSUM, F32, (65, 7, 3, 1), v=1)]
    for rows in ((32, 1), (32, 513), (100, 10), (1024, 10), (1024, 12), (2000, 10), (5438, 3), (1, 7), (33, 1)):
        out.append(argmax_case(rows))
    out += [argmax_case((100, 10), v=1), argmax_case((1025, 3), v=1)]
    out += [count_equal_case((4, 500)), count_equal_case((4, 5000)), count_equal_case((33, 7, 3, 2), 2),
            count_equal_case((1025, 3), 16), count_equal_case((17, 9), 3, v=1)]
    return out


def perf_cases() -> list[Case]:
    ne = (4096, 512, 1, 1)
    return [reduce_case(Op.SUM, F32, ne), reduce_case(Op.SUM_ROWS, F32, ne), reduce_case(Op.MEAN, F32, ne),
            reduce_case(Op.CUMSUM, F32, ne), argmax_case((32000, 512)), count_equal_case((4096, 512))]
