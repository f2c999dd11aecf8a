"""Reductions over rows longer than lavapipe's loop budget (65535 iterations per invocation, 8.39M elements over 128
threads) and than a float running sum holds: exact or within the conformance threshold (issue 19, defect 4)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml_glsl.ops.reduce import SPAN
from pyggml_testing.on_device import run_separately

N = (1 << 24) + 3


@pytest.mark.parametrize("op", ["sum", "sum_rows", "mean"])
def test_sums_of_long_rows(backend, op) -> None:  # type: ignore[no-untyped-def]
    x = (np.random.default_rng(0).random(N, dtype=np.float32) + 0.5).astype(np.float32)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", N, name="a")
    got = float(run_separately(backend, getattr(ops, op)(a), {a: x}).ravel()[0])
    ref = float(x.astype(np.float64).sum()) / (N if op == "mean" else 1)
    assert abs(got - ref) / ref < 1e-5, (got, ref)  # NMSE < 1e-10; was 50-99 % off


def test_sum_rows_of_several_long_rows(backend) -> None:  # type: ignore[no-untyped-def]
    n = (1 << 23) + 5
    x = np.ones((3, n), np.float32) * np.array([[1.0], [2.0], [0.5]], np.float32)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", n, 3, name="a")
    got = run_separately(backend, ops.sum_rows(a), {a: x}).ravel()
    assert np.array_equal(got, np.array([n, 2 * n, n / 2], np.float32))


def test_argmax_of_long_rows(backend) -> None:  # type: ignore[no-untyped-def]
    n = (1 << 23) + 5
    x = np.zeros((3, n), np.float32)
    x[0, n - 2] = 5.0
    x[1, 7] = x[1, n - 1] = 3.0  # ties: the first index
    x[2, SPAN + 1] = x[2, 3 * SPAN] = 2.0  # ties across work groups
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", n, 3, name="a")
    assert list(run_separately(backend, ops.argmax(a), {a: x}).ravel()) == [n - 2, 7, SPAN + 1]


def test_count_equal_beyond_float_precision(backend) -> None:  # type: ignore[no-untyped-def]
    x = np.zeros(N, np.int32)
    y = np.zeros(N, np.int32)
    y[:2] = 1
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("i32", N, name="a")
    b = ctx.new_tensor("i32", N, name="b")
    assert int(run_separately(backend, ops.count_equal(a, b), {a: x, b: y}).ravel()[0]) == N - 2


def test_long_cumsum_is_refused_not_wrong(backend) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", (1 << 21) + 1, name="a")
    assert not backend.device.supports_op(ops.cumsum(a))
    assert backend.device.supports_op(ops.cumsum(ctx.new_tensor("f32", 1 << 21)))


def test_long_norm_and_soft_max_rows_are_refused_not_wrong(backend) -> None:  # type: ignore[no-untyped-def]
    """rms_norm of a 6M row was 3.6M zeros on lavapipe: those rows go to another backend."""
    ctx = Context(no_alloc=True)
    long, ok = ctx.new_tensor("f32", 6_000_000, name="long"), ctx.new_tensor("f32", 1 << 21, name="ok")
    for op in (lambda t: ops.rms_norm(t, 1e-5), lambda t: ops.norm(t, 1e-5), lambda t: ops.soft_max(t)):
        assert not backend.device.supports_op(op(long))
        assert backend.device.supports_op(op(ok))
