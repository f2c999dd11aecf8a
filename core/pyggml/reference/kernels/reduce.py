"""Reference kernels: reductions and orderings (SUM, SUM_ROWS, MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT,
TOP_K). Sums accumulate in float64."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.ops.reduce import SortOrder
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, src
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.SUM)
def sum_all(dst: Tensor) -> None:
    store(dst, load(src(dst, 0)).sum())


@rules.kernel(Op.SUM_ROWS)
def sum_rows(dst: Tensor) -> None:
    store(dst, load(src(dst, 0)).sum(axis=-1, keepdims=True))


@rules.kernel(Op.MEAN)
def mean(dst: Tensor) -> None:
    x = load(src(dst, 0))
    store(dst, x.sum(axis=-1, keepdims=True) / x.shape[-1])  # an empty row: 0 / 0 = NaN, as the C kernels


@rules.kernel(Op.CUMSUM)
def cumsum(dst: Tensor) -> None:
    store(dst, np.cumsum(load(src(dst, 0)), axis=-1))


@rules.kernel(Op.ARGMAX)
def argmax(dst: Tensor) -> None:
    """Per row of a matrix, the index of its largest element; the first one on ties (ggml's CPU loop keeps the
    last, its GPU kernels vary: callers must not depend on ties)."""
    x = load(src(dst, 0))[0, 0]
    store(dst, np.argmax(x, axis=-1).reshape(1, 1, 1, -1))


@rules.kernel(Op.COUNT_EQUAL)
def count_equal(dst: Tensor) -> None:
    a = load(src(dst, 0), None)
    b = load(src(dst, 1), None)
    store(dst, np.int64(np.count_nonzero(a == b)))


def stable_order(x: Array, descending: bool) -> Array:
    """Per row, the indices that sort it; equal values keep their index order in either direction."""
    n = x.shape[-1]
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    # reverse, sort ascending stably, reverse again: largest first, ties by ascending index
    rev = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    order: Array = (n - 1) - rev
    return order


@rules.kernel(Op.ARGSORT)
def argsort(dst: Tensor) -> None:
    x = load(src(dst, 0))
    store(dst, stable_order(x, dst.params.order is SortOrder.DESC))


@rules.kernel(Op.TOP_K)
def top_k(dst: Tensor) -> None:
    """Indices of the k largest of each row. ggml leaves their order unspecified; the reference gives them
    largest first (ties: lower index first)."""
    x = load(src(dst, 0))
    store(dst, stable_order(x, True)[..., : dst.params.k])
