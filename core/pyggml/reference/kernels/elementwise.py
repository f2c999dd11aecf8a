"""Reference kernels: element-wise ops (binary with broadcasting, ADD1, math functions, SCALE, CLAMP, LEAKY_RELU,
FILL). UNARY and GLU are in `unary`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, src, tiled
from pyggml.tensor import Tensor

rules = KernelRules()

_BINARY = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide}


@rules.kernel(Op.ADD, Op.SUB, Op.MUL, Op.DIV)
def binary(dst: Tensor) -> None:
    x = load(src(dst, 0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        store(dst, _BINARY[dst.op](x, tiled(load(src(dst, 1)), x.shape)))


@rules.kernel(Op.ADD1)
def add1(dst: Tensor) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        store(dst, load(src(dst, 0)) + load(src(dst, 1)).reshape(-1)[0])


_MATH: dict[Op, Callable[[Array], Array]] = {
    Op.SQR: np.square,
    Op.SQRT: np.sqrt,
    Op.LOG: np.log,
    Op.SIN: np.sin,
    Op.COS: np.cos,
}


@rules.kernel(*_MATH)
def math_fn(dst: Tensor) -> None:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        store(dst, _MATH[dst.op](load(src(dst, 0))))


@rules.kernel(Op.SCALE)
def scale(dst: Tensor) -> None:
    """x * s + b."""
    p = dst.params
    with np.errstate(over="ignore", invalid="ignore"):
        store(dst, load(src(dst, 0)) * p.s + p.b)


@rules.kernel(Op.CLAMP)
def clamp(dst: Tensor) -> None:
    """max(min(x, hi), lo) with C's comparison semantics (a NaN input comes out as `max`, as in ggml)."""
    p = dst.params
    x = load(src(dst, 0))
    upper = np.where(x < p.max, x, p.max)
    store(dst, np.where(upper > p.min, upper, p.min))


@rules.kernel(Op.LEAKY_RELU)
def leaky_relu(dst: Tensor) -> None:
    """max(x, 0) + slope * min(x, 0)."""
    x = load(src(dst, 0))
    store(dst, np.where(x > 0, x, 0.0) + dst.params.negative_slope * np.where(x < 0, x, 0.0))


@rules.kernel(Op.FILL)
def fill(dst: Tensor) -> None:
    store(dst, np.float64(dst.params.value))
