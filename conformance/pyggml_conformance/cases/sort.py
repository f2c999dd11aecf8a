"""ARGSORT (both orders, rows around powers of two, many rows, non-contiguous rows) and TOP_K (k from 1 to
the row length, rows around powers of two), on rows of distinct values so the result is unique."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F32, unique
from pyggml_conformance.inputs import distinct

MAX_LOG2 = 16
"""ARGSORT rows up to 2^16 + 1 elements in the eval cases."""
TOP_K_MAX_LOG2 = 14
"""TOP_K rows up to 2^14 + 11 elements."""


def _src(b: CaseBuilder, ne: Sequence[int], v: int) -> Tensor:
    init = distinct(100.0)
    if v == 1:
        return b.strided(F32, ne, pad=(7, 1, 0, 0), init=init)
    if v == 2:
        return b.permuted(F32, ne, (0, 2, 1, 3), init)
    return b.input(F32, ne, init)


def argsort_case(ne: Sequence[int], order: SortOrder = SortOrder.ASC, v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.argsort(_src(b, ne, v), order)

    return Case(Op.ARGSORT, fmt_params(type=F32, ne=ne, order=order, v=v), build)


def top_k_case(ne: Sequence[int], k: int, v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.top_k(_src(b, ne, v), k)

    return Case(Op.TOP_K, fmt_params(type=F32, ne=ne, k=k, v=v), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for order in SortOrder:
        for i in range(2, MAX_LOG2 + 1):
            n = 1 << i
            out += [argsort_case((n - 1, 1, 1, 1), order), argsort_case((n, 1, 1, 1), order),
                    argsort_case((n + 1, 1, 1, 1), order)]
        for ne in ((16, 10, 10, 10), (60, 10, 10, 10), (1023, 2, 1, 3), (1024, 2, 1, 3), (1025, 2, 1, 3),
                   (1025, 64, 1, 1), (2047, 2, 1, 3), (2048, 2, 1, 3), (2049, 2, 1, 3), (2, 8, 1024, 1),
                   (2048, 32, 1, 1), (1, 5, 1, 1)):
            out.append(argsort_case(ne, order))
        for ne, v in product(((16, 10, 3, 2), (1025, 3, 2, 1)), (1, 2)):
            out.append(argsort_case(ne, order, v))
    for n in range(1, 5):
        out += [top_k_case((n, 2, 1, 3), k) for k in range(1, n + 1)]
    for i in range(TOP_K_MAX_LOG2 + 1):
        for k in (1, 2, 3, 7, 15, 100, 500, 1023, 9999):
            if k <= 1 << i:
                out += [top_k_case((1 << i, 1, 1, 1), k), top_k_case(((1 << i) + 11, 1, 2, 1), k),
                        top_k_case(((1 << i) + 11, 1, 2, 1), k, v=1)]
    for k in (1, 2, 3, 7, 15):
        for ne in ((16, 10, 10, 10), (60, 10, 10, 10), (1023, 2, 1, 3), (1024, 2, 1, 3), (1025, 2, 1, 3),
                   (16384, 1, 1, 1), (2047, 2, 1, 3), (2048, 2, 1, 3), (2049, 2, 1, 3)):
            out.append(top_k_case(ne, k))
        out.append(top_k_case((60, 10, 3, 2), k, v=2))
    return unique(out)


def perf_cases() -> list[Case]:
    return [argsort_case((32000, 16, 1, 1)), argsort_case((128, 4096, 1, 1), SortOrder.DESC),
            top_k_case((32000, 16, 1, 1), 40), top_k_case((256, 512, 1, 1), 8)]
