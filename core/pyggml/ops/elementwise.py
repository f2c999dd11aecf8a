"""Element-wise ops: binary with broadcasting, math functions, UNARY, GLU, SCALE, CLAMP, LEAKY_RELU, FILL."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

import numpy as np

from pyggml.ops.base import Op, ShapeRule, can_repeat, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import FLOAT_TYPES, GGMLType


class UnaryOp(Enum):
    ABS = auto()
    SGN = auto()
    NEG = auto()
    STEP = auto()
    TANH = auto()
    ELU = auto()
    RELU = auto()
    SIGMOID = auto()
    GELU = auto()
    GELU_QUICK = auto()
    GELU_ERF = auto()
    SILU = auto()
    HARDSWISH = auto()
    HARDSIGMOID = auto()
    EXP = auto()
    SOFTPLUS = auto()
    FLOOR = auto()
    CEIL = auto()
    ROUND = auto()
    TRUNC = auto()
    EXPM1 = auto()
    XIELU = auto()
    """Needs XieluParams (`xielu`)."""


class GluOp(Enum):
    REGLU = auto()
    GEGLU = auto()
    SWIGLU = auto()
    GEGLU_ERF = auto()
    GEGLU_QUICK = auto()
    SWIGLU_OAI = auto()
    """Needs SwigluOaiParams (`swiglu_oai`)."""
    SWIGLU_CLAMP = auto()
    """Needs SwigluClampParams (`swiglu_clamp`)."""


@dataclass(frozen=True, slots=True)
class UnaryParams:
    op: UnaryOp


@dataclass(frozen=True, slots=True)
class XieluParams(UnaryParams):
    """UNARY XIELU's coefficients as ggml keeps them in op_params (already constrained by `xielu`):
    x > 0: alpha_p x^2 + beta x; else (expm1(min(x, eps)) - x) alpha_n + beta x."""

    alpha_n: float = 0.0
    alpha_p: float = 0.0
    beta: float = 0.0
    eps: float = 0.0


@dataclass(frozen=True, slots=True)
class GluParams:
    op: GluOp
    swapped: bool = False


@dataclass(frozen=True, slots=True)
class SwigluOaiParams(GluParams):
    """GLU SWIGLU_OAI (gpt-oss): x = min(x, limit), g = clamp(g, -limit, limit), x * sigmoid(alpha x) * (g + 1)."""

    alpha: float = 1.702
    limit: float = 7.0


@dataclass(frozen=True, slots=True)
class SwigluClampParams(GluParams):
    """GLU SWIGLU_CLAMP: x = min(x, limit), g = clamp(g, -limit, limit), silu(x) * g."""

    limit: float = 7.0


PARAMS_OF_UNARY: dict[UnaryOp, type[UnaryParams]] = {UnaryOp.XIELU: XieluParams}
"""UNARY sub-ops whose node carries a params subclass (all others carry plain UnaryParams)."""
PARAMS_OF_GLU: dict[GluOp, type[GluParams]] = {GluOp.SWIGLU_OAI: SwigluOaiParams,
                                              GluOp.SWIGLU_CLAMP: SwigluClampParams}
"""GLU sub-ops whose node carries a params subclass (all others carry plain GluParams)."""


Srcs = tuple[Tensor | None, ...]


def _same(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        a = need(srcs[0], op, "src0", FLOAT_TYPES)
        return a.type, a.ne

    return infer


def _binary(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        a = need(srcs[0], op, "src0", FLOAT_TYPES)
        b = need(srcs[1], op, "src1", FLOAT_TYPES)
        if not can_repeat(b, a):
            raise fail(op, "src1 must broadcast into src0 (each dim of src0 a multiple of src1's)", a, b)
        return a.type, a.ne

    return infer


for _op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
    define(_op, (2, 2), _binary(_op), can_inplace=True)


def _add1(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ADD1, "src0", FLOAT_TYPES)
    b = need(srcs[1], Op.ADD1, "src1")
    if b.nelements() != 1:
        raise fail(Op.ADD1, "src1 must be a scalar", a, b)
    return a.type, a.ne


define(Op.ADD1, (2, 2), _add1, can_inplace=True)
for _op in (Op.SQR, Op.SQRT, Op.LOG):
    define(_op, (1, 1), _same(_op), can_inplace=True)
for _op in (Op.SIN, Op.COS):
    define(_op, (1, 1), _same(_op))
def _check_sub_params(op: Op, params: object, base: type, table: dict[Any, type]) -> None:
    """The params of a UNARY / GLU node are exactly the class its sub-op needs (XIELU: XieluParams, ...)."""
    if not isinstance(params, base):
        raise fail(op, f"params must be {base.__name__}, got {type(params).__name__}")
    sub = params.op  # type: ignore[attr-defined]
    want = table.get(sub, base)
    if type(params) is not want:
        how = f" (use ops.{sub.name.lower()})" if want is not base else ""
        raise fail(op, f"{sub.name} needs {want.__name__}, got {type(params).__name__}{how}")


def _unary(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    _check_sub_params(Op.UNARY, params, UnaryParams, PARAMS_OF_UNARY)
    a = need(srcs[0], Op.UNARY, "src0", FLOAT_TYPES)
    return a.type, a.ne


define(Op.UNARY, (1, 1), _unary, UnaryParams, can_inplace=True)


def _glu(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    _check_sub_params(Op.GLU, params, GluParams, PARAMS_OF_GLU)
    a = need(srcs[0], Op.GLU, "src0", FLOAT_TYPES)
    b = srcs[1] if len(srcs) > 1 else None
    if b is None:
        if a.ne[0] % 2:
            raise fail(Op.GLU, "a fused GLU input needs an even ne[0] (gate and value halves)", a)
        return a.type, (a.ne[0] // 2, a.ne[1], a.ne[2], a.ne[3])
    if b.type != a.type or b.ne != a.ne:
        raise fail(Op.GLU, "split GLU inputs must have the same type and shape", a, b)
    return a.type, a.ne


define(Op.GLU, (1, 2), _glu, GluParams)


# ---- constructors -------------------------------------------------------------------------------------------


def add(a: Tensor, b: Tensor, *, inplace: bool = False) -> Tensor:
    """a + b, b broadcast (repeated) over a; result has a's type and shape."""
    return record(Op.ADD, (a, b), inplace=inplace)


def sub(a: Tensor, b: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.SUB, (a, b), inplace=inplace)


def mul(a: Tensor, b: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.MUL, (a, b), inplace=inplace)


def div(a: Tensor, b: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.DIV, (a, b), inplace=inplace)


def add1(a: Tensor, b: Tensor, *, inplace: bool = False) -> Tensor:
    """a + b where b is a one-element tensor."""
    return record(Op.ADD1, (a, b), inplace=inplace)


def sqr(a: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.SQR, (a,), inplace=inplace)


def sqrt(a: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.SQRT, (a,), inplace=inplace)


def log(a: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.LOG, (a,), inplace=inplace)


def sin(a: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.SIN, (a,), inplace=inplace)


def cos(a: Tensor, *, inplace: bool = False) -> Tensor:
    return record(Op.COS, (a,), inplace=inplace)


def unary(a: Tensor, op: UnaryOp, *, inplace: bool = False) -> Tensor:
    return record(Op.UNARY, (a,), UnaryParams(op), inplace=inplace)


def _unary_fn(op: UnaryOp) -> Callable[..., Tensor]:
    def fn(a: Tensor, *, inplace: bool = False) -> Tensor:
        return unary(a, op, inplace=inplace)

    fn.__name__ = op.name.lower()
    fn.__doc__ = f"UNARY {op.name}, element-wise."
    return fn


abs_ = _unary_fn(UnaryOp.ABS)
sgn = _unary_fn(UnaryOp.SGN)
neg = _unary_fn(UnaryOp.NEG)
step = _unary_fn(UnaryOp.STEP)
tanh = _unary_fn(UnaryOp.TANH)
elu = _unary_fn(UnaryOp.ELU)
relu = _unary_fn(UnaryOp.RELU)
sigmoid = _unary_fn(UnaryOp.SIGMOID)
gelu = _unary_fn(UnaryOp.GELU)
gelu_quick = _unary_fn(UnaryOp.GELU_QUICK)
gelu_erf = _unary_fn(UnaryOp.GELU_ERF)
silu = _unary_fn(UnaryOp.SILU)
hardswish = _unary_fn(UnaryOp.HARDSWISH)
hardsigmoid = _unary_fn(UnaryOp.HARDSIGMOID)
exp = _unary_fn(UnaryOp.EXP)
softplus = _unary_fn(UnaryOp.SOFTPLUS)
floor = _unary_fn(UnaryOp.FLOOR)
ceil = _unary_fn(UnaryOp.CEIL)
round_ = _unary_fn(UnaryOp.ROUND)
trunc = _unary_fn(UnaryOp.TRUNC)
expm1 = _unary_fn(UnaryOp.EXPM1)


def softplus_f32(x: float) -> float:
    """ggml_compute_softplus_f32: x above 20, else log(1 + exp(x)), in float32 (how ggml_xielu constrains its
    alphas before storing them)."""
    v = np.float32(x)
    if v > np.float32(20.0):
        return float(v)
    with np.errstate(over="ignore"):
        return float(np.log(np.float32(1.0) + np.exp(v)))


def xielu(a: Tensor, alpha_n: float, alpha_p: float, beta: float, eps: float, *, inplace: bool = False) -> Tensor:
    """UNARY XIELU with ggml_xielu's raw parameters; the node keeps ggml's constrained coefficients
    (XieluParams.alpha_n = beta + softplus(alpha_n), alpha_p = softplus(alpha_p), in float32 as ggml)."""
    vals = (alpha_n, alpha_p, beta, eps)
    if not all(math.isfinite(float(v)) for v in vals):
        raise fail(Op.UNARY, f"XIELU parameters must be finite, got alpha_n={alpha_n}, alpha_p={alpha_p}, "
                             f"beta={beta}, eps={eps}", a)
    b32 = float(np.float32(beta))
    p = XieluParams(UnaryOp.XIELU, float(np.float32(b32 + softplus_f32(alpha_n))), softplus_f32(alpha_p), b32,
                    float(np.float32(eps)))
    return record(Op.UNARY, (a,), p, inplace=inplace)


def glu(a: Tensor, op: GluOp, b: Tensor | None = None, *, swapped: bool = False) -> Tensor:
    """Gated linear unit. Fused (b None): a's first half of each row goes through the activation and multiplies
    the second half (halves exchanged when swapped). Split: act(a) * b (act(b) * a when swapped)."""
    return record(Op.GLU, (a, b), GluParams(op, swapped))


def swiglu(a: Tensor, b: Tensor | None = None, *, swapped: bool = False) -> Tensor:
    return glu(a, GluOp.SWIGLU, b, swapped=swapped)


def geglu(a: Tensor, b: Tensor | None = None, *, swapped: bool = False) -> Tensor:
    return glu(a, GluOp.GEGLU, b, swapped=swapped)


def reglu(a: Tensor, b: Tensor | None = None, *, swapped: bool = False) -> Tensor:
    return glu(a, GluOp.REGLU, b, swapped=swapped)


def swiglu_oai(a: Tensor, b: Tensor | None = None, alpha: float = 1.702, limit: float = 7.0, *,
               swapped: bool = False) -> Tensor:
    """gpt-oss's gated unit (ggml_swiglu_oai): x = min(x, limit), g = clamp(g, -limit, limit),
    x * sigmoid(alpha x) * (g + 1); x and g as in `glu` (fused halves or split inputs)."""
    return record(Op.GLU, (a, b), SwigluOaiParams(GluOp.SWIGLU_OAI, swapped, float(alpha), float(limit)))


def swiglu_clamp(a: Tensor, b: Tensor | None = None, limit: float = 7.0, *, swapped: bool = False) -> Tensor:
    """ggml_swiglu_clamp: x = min(x, limit), g = clamp(g, -limit, limit), silu(x) * g."""
    return record(Op.GLU, (a, b), SwigluClampParams(GluOp.SWIGLU_CLAMP, swapped, float(limit)))


@dataclass(frozen=True, slots=True)
class ScaleParams:
    s: float
    b: float = 0.0


define(Op.SCALE, (1, 1), _same(Op.SCALE), ScaleParams, can_inplace=True)


def scale(a: Tensor, s: float, b: float = 0.0, *, inplace: bool = False) -> Tensor:
    """a * s + b."""
    return record(Op.SCALE, (a,), ScaleParams(float(s), float(b)), inplace=inplace)


@dataclass(frozen=True, slots=True)
class ClampParams:
    min: float
    max: float


define(Op.CLAMP, (1, 1), _same(Op.CLAMP), ClampParams, can_inplace=True)


def clamp(a: Tensor, min: float, max: float, *, inplace: bool = False) -> Tensor:
    if min > max:
        raise fail(Op.CLAMP, f"min {min} > max {max}", a)
    return record(Op.CLAMP, (a,), ClampParams(float(min), float(max)), inplace=inplace)


@dataclass(frozen=True, slots=True)
class LeakyReluParams:
    negative_slope: float


define(Op.LEAKY_RELU, (1, 1), _same(Op.LEAKY_RELU), LeakyReluParams)


def leaky_relu(a: Tensor, negative_slope: float, *, inplace: bool = False) -> Tensor:
    return record(Op.LEAKY_RELU, (a,), LeakyReluParams(float(negative_slope)), inplace=inplace)


@dataclass(frozen=True, slots=True)
class FillParams:
    value: float


define(Op.FILL, (1, 1), _same(Op.FILL), FillParams, can_inplace=True)


def fill(a: Tensor, value: float, *, inplace: bool = False) -> Tensor:
    """A tensor of a's shape with every element `value`."""
    return record(Op.FILL, (a,), FillParams(float(value)), inplace=inplace)
