"""Reference kernels: UNARY activations and GLU (fused and split gated linear units).

Formulas are ggml's scalar definitions evaluated in float64. Where ggml's CPU backend reads a float16 lookup
table (GELU, GELU_QUICK and their GLU forms) the reference uses the exact formula instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pyggml.ops.base import Op
from pyggml.ops.elementwise import GluOp, SwigluClampParams, SwigluOaiParams, UnaryOp, XieluParams
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, opt_src, src
from pyggml.tensor import Tensor

rules = KernelRules()

GELU_COEF_A = 0.044715
GELU_QUICK_COEF = 1.702
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
SOFTPLUS_THRESHOLD = 20.0
"""softplus(x) is x itself above this (ggml's cut-off)."""

_erf = np.frompyfunc(math.erf, 1, 1)


def zero_at_neg_inf(x: Array, y: Array) -> Array:
    """y with 0 where x is -inf: the limit of the gated activations (GELU*, SILU, HARDSWISH) there, where their
    formulas are -inf * 0 = NaN under IEEE (docs/op-semantics.md)."""
    return np.where(np.isneginf(x), 0.0, y)


def gelu(x: Array) -> Array:
    """tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))."""
    return zero_at_neg_inf(x, 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x))))


def gelu_erf(x: Array) -> Array:
    """0.5 x (1 + erf(x / sqrt 2))."""
    erf = np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)
    return zero_at_neg_inf(x, 0.5 * x * (1.0 + erf))


def sigmoid(x: Array) -> Array:
    return 1.0 / (1.0 + np.exp(-x))


def gelu_quick(x: Array) -> Array:
    """x * sigmoid(1.702 x)."""
    return zero_at_neg_inf(x, x * sigmoid(GELU_QUICK_COEF * x))


def silu(x: Array) -> Array:
    return zero_at_neg_inf(x, x * sigmoid(x))


def relu(x: Array) -> Array:
    return np.where(x > 0, x, 0.0)


def hardsigmoid(x: Array) -> Array:
    """min(1, max(0, (x + 3) / 6)) with C's fminf / fmaxf, as ggml: a NaN input gives 0."""
    return np.fmin(1.0, np.fmax(0.0, (x + 3.0) / 6.0))


def sgn(x: Array) -> Array:
    """1 for x > 0, -1 for x < 0, else 0 (a NaN input gives 0, as ggml's comparisons)."""
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.0))


def round_half_away(x: Array) -> Array:
    """C's roundf: halves go away from zero (numpy's round goes to even)."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


UNARY: dict[UnaryOp, Callable[[Array], Array]] = {
    UnaryOp.ABS: np.abs,
    UnaryOp.SGN: sgn,
    UnaryOp.NEG: np.negative,
    UnaryOp.STEP: lambda x: np.where(x > 0, 1.0, 0.0),
    UnaryOp.TANH: np.tanh,
    UnaryOp.ELU: lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    UnaryOp.RELU: relu,
    UnaryOp.SIGMOID: sigmoid,
    UnaryOp.GELU: gelu,
    UnaryOp.GELU_QUICK: gelu_quick,
    UnaryOp.GELU_ERF: gelu_erf,
    UnaryOp.SILU: silu,
    UnaryOp.HARDSWISH: lambda x: zero_at_neg_inf(x, x * hardsigmoid(x)),
    UnaryOp.HARDSIGMOID: hardsigmoid,
    UnaryOp.EXP: np.exp,
    UnaryOp.SOFTPLUS: lambda x: np.where(x > SOFTPLUS_THRESHOLD, x,
                                         np.log1p(np.exp(np.minimum(x, SOFTPLUS_THRESHOLD)))),
    UnaryOp.FLOOR: np.floor,
    UnaryOp.CEIL: np.ceil,
    UnaryOp.ROUND: round_half_away,
    UnaryOp.TRUNC: np.trunc,
    UnaryOp.EXPM1: np.expm1,
}


def xielu(x: Array, p: XieluParams) -> Array:
    """ggml's xIELU with its stored coefficients: x > 0: alpha_p x^2 + beta x; else
    (expm1(min(x, eps)) - x) alpha_n + beta x (C's fminf: a NaN x takes eps, and stays NaN through - x).
    At x = -inf the formula is inf - inf; the limit is +-inf by the sign of alpha_n - beta (-alpha_n if 0)."""
    neg = (np.expm1(np.fmin(x, p.eps)) - x) * p.alpha_n + p.beta * x
    y = np.where(x > 0, p.alpha_p * x * x + p.beta * x, neg)
    d = p.alpha_n - p.beta
    limit = np.inf if d > 0 else (-np.inf if d < 0 else -p.alpha_n)
    return np.where(np.isneginf(x), limit, y)


@rules.kernel(Op.UNARY)
def unary(dst: Tensor) -> None:
    p = dst.params
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = load(src(dst, 0))
        store(dst, xielu(x, p) if isinstance(p, XieluParams) else UNARY[p.op](x))


GLU_ACT: dict[GluOp, Callable[[Array], Array]] = {
    GluOp.REGLU: relu,
    GluOp.GEGLU: gelu,
    GluOp.SWIGLU: silu,
    GluOp.GEGLU_ERF: gelu_erf,
    GluOp.GEGLU_QUICK: gelu_quick,
}


def c_min(x: Array, hi: float) -> Array:
    """std::min(x, hi): hi only where hi < x (a NaN x stays NaN; a NaN hi clamps nothing)."""
    return np.where(hi < x, hi, x)


def c_clamp(x: Array, lim: float) -> Array:
    """std::clamp(x, -lim, lim) with C comparisons (NaN passes through)."""
    return np.where(x < -lim, -lim, np.where(lim < x, lim, x))


def swiglu_oai(x: Array, g: Array, p: SwigluOaiParams) -> Array:
    """gpt-oss: x' = min(x, limit), g' = clamp(g, -limit, limit); x' sigmoid(alpha x') (g' + 1). x' = -inf
    gives the gate's limit 0 when alpha > 0 (the formula is -inf / inf there)."""
    xc = c_min(x, p.limit)
    act = xc / (1.0 + np.exp(-p.alpha * xc))
    if p.alpha > 0:
        act = zero_at_neg_inf(xc, act)
    return act * (c_clamp(g, p.limit) + 1.0)


def swiglu_clamp(x: Array, g: Array, p: SwigluClampParams) -> Array:
    """silu(min(x, limit)) * clamp(g, -limit, limit)."""
    return silu(c_min(x, p.limit)) * c_clamp(g, p.limit)


@rules.kernel(Op.GLU)
def glu(dst: Tensor) -> None:
    """act(x) * g. Fused (no src1): x is the first half of each row of src0, g the second (swapped exchanges
    them). Split: x = src0, g = src1 (swapped exchanges them)."""
    a = load(src(dst, 0))
    b_t = opt_src(dst, 1)
    if b_t is None:
        half = a.shape[-1] // 2
        x, g = a[..., :half], a[..., half:]
    else:
        x, g = a, load(b_t)
    p = dst.params
    if p.swapped:
        x, g = g, x
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(p, SwigluOaiParams):
            store(dst, swiglu_oai(x, g, p))
        elif isinstance(p, SwigluClampParams):
            store(dst, swiglu_clamp(x, g, p))
        else:
            store(dst, GLU_ACT[p.op](x) * g)
