"""Reductions and orderings: SUM, SUM_ROWS, MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT, TOP_K."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from pyggml.ops.base import Op, ShapeRule, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import FLOAT_TYPES, GGMLType

Srcs = tuple[Tensor | None, ...]
F32_ONLY = frozenset({GGMLType.F32})


class SortOrder(Enum):
    ASC = 0
    DESC = 1


def _sum(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.SUM, "src0", FLOAT_TYPES)
    return a.type, (1, 1, 1, 1)


def _rows(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        a = need(srcs[0], op, "src0", F32_ONLY)
        return GGMLType.F32, (1, a.ne[1], a.ne[2], a.ne[3])

    return infer


def _cumsum(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.CUMSUM, "src0", F32_ONLY)
    return GGMLType.F32, a.ne


def _argmax(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ARGMAX, "src0", F32_ONLY)
    if a.ne[2] != 1 or a.ne[3] != 1:
        raise fail(Op.ARGMAX, "src0 must be a matrix", a)
    if a.ne[0] == 0 and a.ne[1] > 0:
        raise fail(Op.ARGMAX, "rows of zero elements have no largest element", a)
    return GGMLType.I32, (a.ne[1], 1, 1, 1)


def _count_equal(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.COUNT_EQUAL, "src0", frozenset({GGMLType.I32}))
    b = need(srcs[1], Op.COUNT_EQUAL, "src1")
    if b.type != a.type or b.ne != a.ne:
        raise fail(Op.COUNT_EQUAL, "srcs must have the same type and shape", a, b)
    return GGMLType.I64, (1, 1, 1, 1)


@dataclass(frozen=True, slots=True)
class ArgsortParams:
    order: SortOrder


def _argsort(srcs: Srcs, params: ArgsortParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ARGSORT, "src0", F32_ONLY)
    if not isinstance(params.order, SortOrder):
        raise fail(Op.ARGSORT, f"order must be SortOrder.ASC or SortOrder.DESC, got {params.order!r}", a)
    return GGMLType.I32, a.ne


@dataclass(frozen=True, slots=True)
class TopKParams:
    k: int


def _top_k(srcs: Srcs, params: TopKParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.TOP_K, "src0", F32_ONLY)
    if not 0 < params.k <= a.ne[0]:
        raise fail(Op.TOP_K, f"k={params.k} must be in 1..ne[0]", a)
    return GGMLType.I32, (params.k, a.ne[1], a.ne[2], a.ne[3])


define(Op.SUM, (1, 1), _sum)
define(Op.SUM_ROWS, (1, 1), _rows(Op.SUM_ROWS))
define(Op.MEAN, (1, 1), _rows(Op.MEAN))
define(Op.CUMSUM, (1, 1), _cumsum)
define(Op.ARGMAX, (1, 1), _argmax)
define(Op.COUNT_EQUAL, (2, 2), _count_equal)
define(Op.ARGSORT, (1, 1), _argsort, ArgsortParams)
define(Op.TOP_K, (1, 1), _top_k, TopKParams)


def sum(a: Tensor) -> Tensor:
    """Sum of all elements, shape [1]."""
    return record(Op.SUM, (a,))


def sum_rows(a: Tensor) -> Tensor:
    """Sum of each row: [1, ne1, ne2, ne3]."""
    return record(Op.SUM_ROWS, (a,))


def mean(a: Tensor) -> Tensor:
    """Mean of each row: [1, ne1, ne2, ne3]."""
    return record(Op.MEAN, (a,))


def cumsum(a: Tensor) -> Tensor:
    """Inclusive prefix sum along each row."""
    return record(Op.CUMSUM, (a,))


def argmax(a: Tensor) -> Tensor:
    """Index of the largest element of each row (first on ties): i32 [ne1]."""
    return record(Op.ARGMAX, (a,))


def count_equal(a: Tensor, b: Tensor) -> Tensor:
    """Number of equal elements, i64 [1]."""
    return record(Op.COUNT_EQUAL, (a, b))


def argsort(a: Tensor, order: SortOrder = SortOrder.ASC) -> Tensor:
    """Per row, the indices that sort it (i32)."""
    return record(Op.ARGSORT, (a,), ArgsortParams(order))


def top_k(a: Tensor, k: int) -> Tensor:
    """Per row, the indices of the k largest elements (i32 [k, ...], in no particular order)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise fail(Op.TOP_K, f"k must be an integer, got {k!r}", a)
    return record(Op.TOP_K, (a,), TopKParams(int(k)))
