"""Reference kernels, element-wise family: binary ops with ggml broadcasting, ADD1, math functions, SCALE, CLAMP,
LEAKY_RELU, FILL; non-contiguous inputs, in-place results, F16/BF16 results."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.types import GGMLType as T
from pyggml.types import bf16_to_f32, f32_to_bf16
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor

PY_BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
             "div": lambda x, y: x / y}


def loop_binary(a: np.ndarray, b: np.ndarray, fn) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = np.empty_like(a)
    for idx in itertools.product(*(range(n) for n in a.shape)):
        bidx = tuple(i % n for i, n in zip(idx, b.shape, strict=True))
        out[idx] = fn(float(a[idx]), float(b[bidx]))
    return out


@pytest.mark.parametrize("name", sorted(PY_BINARY))
def test_binary_broadcast(name: str) -> None:
    ctx = new_ctx()
    a = rand(2, 3, 4, 6, seed=1)
    b = f32(rand(1, 3, 2, 3, seed=2) + 3.0)  # tiles 2x over dims 0, 1 and 3 of a (ggml order)
    out = getattr(ops, name)(tensor(ctx, a), tensor(ctx, b))
    np.testing.assert_array_equal(result(out), f32(loop_binary(a, b, PY_BINARY[name])))


def test_binary_non_contiguous_srcs() -> None:
    ctx = new_ctx()
    a = rand(5, 4, seed=3)
    b = rand(4, 7, seed=4)
    at = ops.transpose(tensor(ctx, a))  # ne (5, 4): numpy (4, 5) = a.T
    bv = ops.view(tensor(ctx, b), (5, 4), (7 * 4,), 2 * 4)  # 4 rows of 5, starting at column 2
    expected = np.array([[a[j, i] * b[i, 2 + j] for j in range(5)] for i in range(4)])
    np.testing.assert_array_equal(result(ops.mul(at, bv)), f32(expected))


def test_binary_in_place_writes_src0() -> None:
    ctx = new_ctx()
    a = rand(3, 4, seed=5)
    b = rand(1, 4, seed=6)
    ta = tensor(ctx, a)
    out = ops.sub(ta, tensor(ctx, b), inplace=True)
    assert out.view_src is ta
    got = result(out)
    np.testing.assert_allclose(got, a - b, rtol=1e-6)
    np.testing.assert_array_equal(ta.numpy(), got)


def test_binary_f16_and_bf16_results() -> None:
    ctx = new_ctx()
    a = rand(2, 8, seed=7)
    b = rand(2, 8, seed=8)
    out16 = ops.add(tensor(ctx, a, T.F16), tensor(ctx, b, T.F16))
    assert out16.type == T.F16
    np.testing.assert_array_equal(result(out16), f16(f16(a) + f16(b)))
    bf = lambda x: bf16_to_f32(f32_to_bf16(x)).astype(np.float64)  # noqa: E731
    out_bf = ops.mul(tensor(ctx, a, T.BF16), tensor(ctx, b, T.F32))
    np.testing.assert_array_equal(result(out_bf), bf(bf(a) * b))


def test_add1() -> None:
    ctx = new_ctx()
    a = rand(3, 5, seed=9)
    out = ops.add1(tensor(ctx, a), tensor(ctx, [2.5]))
    np.testing.assert_allclose(result(out), [[v + 2.5 for v in row] for row in a], rtol=1e-6)


MATH = {"sqr": lambda v: v * v, "sqrt": math.sqrt, "log": math.log, "sin": math.sin, "cos": math.cos}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_functions(name: str) -> None:
    ctx = new_ctx()
    a = np.abs(rand(2, 7, seed=10)) + 0.1
    expected = np.vectorize(MATH[name])(a)
    np.testing.assert_allclose(result(getattr(ops, name)(tensor(ctx, a))), expected, rtol=1e-6)


def test_math_in_place_and_domain_errors_are_nan() -> None:
    ctx = new_ctx()
    ta = tensor(ctx, [-1.0, 4.0, 0.0])
    got = result(ops.sqrt(ta, inplace=True))
    assert math.isnan(got[0]) and got[1] == 2.0 and got[2] == 0.0
    assert result(ops.log(tensor(ctx, [0.0])))[0] == -math.inf


def test_scale_with_bias() -> None:
    ctx = new_ctx()
    a = rand(4, 3, seed=11)
    np.testing.assert_allclose(result(ops.scale(tensor(ctx, a), 0.5, -1.0)), a / 2 - 1, rtol=1e-6)
    np.testing.assert_allclose(result(ops.scale(tensor(ctx, a), 3.0)), 3 * a, rtol=1e-6)


def test_clamp() -> None:
    ctx = new_ctx()
    a = [-3.0, -0.5, 0.0, 0.7, 2.0, math.nan]
    got = result(ops.clamp(tensor(ctx, a), -1.0, 1.0))
    np.testing.assert_array_equal(got, [-1.0, -0.5, 0.0, float(np.float32(0.7)), 1.0, 1.0])


def test_leaky_relu() -> None:
    ctx = new_ctx()
    a = rand(3, 6, seed=12)
    expected = [[v if v > 0 else 0.1 * v for v in row] for row in a]
    np.testing.assert_allclose(result(ops.leaky_relu(tensor(ctx, a), 0.1)), expected, rtol=1e-6)


def test_fill_including_a_strided_view_in_place() -> None:
    ctx = new_ctx()
    ta = tensor(ctx, np.zeros((3, 4)))
    np.testing.assert_array_equal(result(ops.fill(ta, 1.5)), np.full((3, 4), 1.5))
    col = ops.view(ta, (1, 3), (16,), 4)  # column 1
    compute_out = ops.fill(col, -2.0, inplace=True)
    result(compute_out)
    expected = np.zeros((3, 4))
    expected[:, 1] = -2.0
    np.testing.assert_array_equal(ta.numpy(), expected)
