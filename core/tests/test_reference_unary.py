"""Reference kernels, UNARY and GLU: every activation against a scalar formula from the math module, F16 in and
out, in place, fused (with swapped halves) and split GLU."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from pyggml import ops
from pyggml.ops import GluOp, UnaryOp
from pyggml.ops.elementwise import PARAMS_OF_GLU, PARAMS_OF_UNARY
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _round(x: float) -> float:
    return float(math.floor(x + 0.5)) if x >= 0 else -float(math.floor(-x + 0.5))


SCALAR: dict[UnaryOp, Callable[[float], float]] = {
    UnaryOp.ABS: abs,
    UnaryOp.SGN: lambda x: (x > 0) - (x < 0),
    UnaryOp.NEG: lambda x: -x,
    UnaryOp.STEP: lambda x: 1.0 if x > 0 else 0.0,
    UnaryOp.TANH: math.tanh,
    UnaryOp.ELU: lambda x: x if x > 0 else math.exp(x) - 1.0,
    UnaryOp.RELU: lambda x: max(x, 0.0),
    UnaryOp.SIGMOID: _sig,
    UnaryOp.GELU: _gelu,
    UnaryOp.GELU_QUICK: lambda x: x * _sig(1.702 * x),
    UnaryOp.GELU_ERF: lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    UnaryOp.SILU: lambda x: x * _sig(x),
    UnaryOp.HARDSWISH: lambda x: x * min(1.0, max(0.0, (x + 3.0) / 6.0)),
    UnaryOp.HARDSIGMOID: lambda x: min(1.0, max(0.0, (x + 3.0) / 6.0)),
    UnaryOp.EXP: math.exp,
    UnaryOp.SOFTPLUS: lambda x: x if x > 20.0 else math.log(1.0 + math.exp(x)),
    UnaryOp.FLOOR: math.floor,
    UnaryOp.CEIL: math.ceil,
    UnaryOp.ROUND: _round,
    UnaryOp.TRUNC: math.trunc,
    UnaryOp.EXPM1: math.expm1,
}
PLAIN_UNARY = [u for u in UnaryOp if u not in PARAMS_OF_UNARY]
"""Sub-ops without params of their own (XIELU: tests/test_reference_moe.py)."""
PLAIN_GLU = [g for g in GluOp if g not in PARAMS_OF_GLU]

# special points: zero, halves (ROUND), both sides of the SOFTPLUS cut-off, hardswish knees
EDGES = [0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 19.5, 21.0, -3.0, 3.0, -7.25, 0.25]


def _inputs() -> np.ndarray:
    return np.concatenate([EDGES, rand(28, seed=20, scale=3.0)]).reshape(2, 20)


@pytest.mark.parametrize("uop", PLAIN_UNARY, ids=lambda u: u.name)
def test_unary_matches_scalar_formula(uop: UnaryOp) -> None:
    ctx = new_ctx()
    x = _inputs()
    expected = f32([[SCALAR[uop](float(v)) for v in row] for row in x])
    np.testing.assert_allclose(result(ops.unary(tensor(ctx, x), uop)), expected, rtol=2e-7, atol=1e-30)


def test_unary_constructors_and_in_place() -> None:
    ctx = new_ctx()
    x = rand(3, 4, seed=21)
    tx = tensor(ctx, x)
    out = ops.silu(tx, inplace=True)
    got = result(out)
    np.testing.assert_allclose(got, f32(x / (1 + np.exp(-x))), rtol=2e-7)
    np.testing.assert_array_equal(tx.numpy(), got)


def test_unary_f16_rounds_once() -> None:
    ctx = new_ctx()
    x = f16(rand(4, 8, seed=22))
    out = ops.gelu(tensor(ctx, x, T.F16))
    assert out.type == T.F16
    expected = f16(f32([[_gelu(float(v)) for v in row] for row in x]))
    np.testing.assert_array_equal(result(out), expected)


GLU_ACT: dict[GluOp, Callable[[float], float]] = {
    GluOp.REGLU: lambda x: max(x, 0.0),
    GluOp.GEGLU: _gelu,
    GluOp.SWIGLU: lambda x: x * _sig(x),
    GluOp.GEGLU_ERF: SCALAR[UnaryOp.GELU_ERF],
    GluOp.GEGLU_QUICK: SCALAR[UnaryOp.GELU_QUICK],
}


@pytest.mark.parametrize("gop", PLAIN_GLU, ids=lambda g: g.name)
@pytest.mark.parametrize("swapped", [False, True])
def test_glu_fused(gop: GluOp, swapped: bool) -> None:
    ctx = new_ctx()
    x = rand(3, 10, seed=23)
    out = ops.glu(tensor(ctx, x), gop, swapped=swapped)
    assert out.ne[:2] == (5, 3)
    act = GLU_ACT[gop]
    expected = [[act(row[i + 5] if swapped else row[i]) * (row[i] if swapped else row[i + 5]) for i in range(5)]
                for row in x]
    np.testing.assert_allclose(result(out), f32(expected), rtol=2e-7, atol=1e-30)


def test_glu_split_and_swapped_split() -> None:
    ctx = new_ctx()
    a = rand(2, 6, seed=24)
    b = rand(2, 6, seed=25)
    silu = GLU_ACT[GluOp.SWIGLU]
    got = result(ops.swiglu(tensor(ctx, a), tensor(ctx, b)))
    np.testing.assert_allclose(got, f32([[silu(u) * v for u, v in zip(ra, rb, strict=True)]
                                         for ra, rb in zip(a, b, strict=True)]), rtol=2e-7)
    got = result(ops.geglu(tensor(ctx, a), tensor(ctx, b), swapped=True))
    np.testing.assert_allclose(got, f32([[_gelu(v) * u for u, v in zip(ra, rb, strict=True)]
                                         for ra, rb in zip(a, b, strict=True)]), rtol=2e-7)


def test_glu_f16() -> None:
    ctx = new_ctx()
    x = f16(rand(2, 8, seed=26))
    out = ops.reglu(tensor(ctx, x, T.F16))
    assert out.type == T.F16
    expected = f16([[max(row[i], 0.0) * row[i + 4] for i in range(4)] for row in x])
    np.testing.assert_array_equal(result(out), expected)
