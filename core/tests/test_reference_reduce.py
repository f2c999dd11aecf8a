"""Reference kernels, reductions and orderings: SUM, SUM_ROWS, MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT,
TOP_K, against plain Python loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.ops import SortOrder
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor


def test_sum_all_f32_and_f16() -> None:
    ctx = new_ctx()
    x = rand(2, 3, 4, 5, seed=30)
    out = ops.sum(tensor(ctx, x))
    assert out.ne == (1, 1, 1, 1)
    assert result(out)[0] == f32(math.fsum(x.ravel()))
    h = f16(x)
    out16 = ops.sum(tensor(ctx, h, T.F16))
    assert out16.type == T.F16
    assert result(out16)[0] == f16(math.fsum(h.ravel()))


def test_sum_rows_mean_cumsum() -> None:
    ctx = new_ctx()
    x = rand(2, 3, 7, seed=31)
    rows = [[math.fsum(r) for r in m] for m in x]
    np.testing.assert_array_equal(result(ops.sum_rows(tensor(ctx, x))), f32(rows)[..., None])
    np.testing.assert_array_equal(result(ops.mean(tensor(ctx, x))), f32(np.array(rows) / 7)[..., None])
    expected = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        acc = 0.0
        for i in range(x.shape[-1]):
            acc += x[idx][i]
            expected[(*idx, i)] = acc
    np.testing.assert_allclose(result(ops.cumsum(tensor(ctx, x))), expected, rtol=1e-6)


def test_sum_rows_of_a_transposed_view() -> None:
    ctx = new_ctx()
    x = rand(5, 3, seed=32)
    got = result(ops.sum_rows(ops.cont(ops.transpose(tensor(ctx, x)))))
    np.testing.assert_allclose(got.ravel(), x.sum(axis=0), rtol=1e-6)
    got = result(ops.sum_rows(ops.transpose(tensor(ctx, x))))  # non-contiguous src read directly
    np.testing.assert_allclose(got.ravel(), x.sum(axis=0), rtol=1e-6)


def test_argmax_first_of_ties() -> None:
    ctx = new_ctx()
    x = np.array([[1.0, 5.0, 5.0, 2.0], [-3.0, -1.0, -2.0, -1.0], [0.0, 0.0, 0.0, 0.0]])
    out = ops.argmax(tensor(ctx, x))
    assert out.type == T.I32
    np.testing.assert_array_equal(result(out), [1, 1, 0])


def test_count_equal() -> None:
    ctx = new_ctx()
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 5
    b = np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 3
    expected = sum(1 for u, v in zip(a.ravel(), b.ravel(), strict=True) if u == v)
    out = ops.count_equal(tensor(ctx, a, T.I32), tensor(ctx, b, T.I32))
    assert out.type == T.I64
    assert result(out).ravel()[0] == expected


def _sorted_indices(row: list[float], descending: bool) -> list[int]:
    # insertion sort, stable: an element moves only past strictly worse ones
    order: list[int] = []
    for i, v in enumerate(row):
        pos = len(order)
        while pos > 0 and ((row[order[pos - 1]] < v) if descending else (row[order[pos - 1]] > v)):
            pos -= 1
        order.insert(pos, i)
    return order


@pytest.mark.parametrize("order", list(SortOrder), ids=lambda o: o.name)
def test_argsort_stable(order: SortOrder) -> None:
    ctx = new_ctx()
    x = np.round(rand(3, 2, 9, seed=33, scale=2.0))  # many ties
    out = ops.argsort(tensor(ctx, x), order)
    assert out.type == T.I32 and out.ne == (9, 2, 3, 1)
    expected = [[_sorted_indices(list(r), order is SortOrder.DESC) for r in m] for m in x]
    np.testing.assert_array_equal(result(out), expected)


def test_top_k_indices_of_largest() -> None:
    ctx = new_ctx()
    x = rand(4, 11, seed=34)
    x[0, 3] = x[0, 7] = 10.0  # a tie at the top
    out = ops.top_k(tensor(ctx, x), 3)
    assert out.ne == (3, 4, 1, 1) and out.type == T.I32
    got = result(out)
    for r in range(4):
        expected = sorted(range(11), key=lambda i, r=r: -x[r, i])[:3]
        assert sorted(got[r].tolist()) == sorted(expected)
        assert [x[r, i] for i in got[r]] == sorted((x[r, i] for i in got[r]), reverse=True)
    assert got[0, :2].tolist() == [3, 7]
