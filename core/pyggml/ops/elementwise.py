"""Element-wise ops: binary with broadcasting, math functions, UNARY, GLU, SCALE, CLAMP, LEAKY_RELU, FILL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto

from pyggml.ops.base import Op, ShapeRule, can_repeat, check_types, define, fail, need, record
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


class GluOp(Enum):
    REGLU = auto()
    GEGLU = auto()
    SWIGLU = auto()
    GEGLU_ERF = auto()
    GEGLU_QUICK = auto()


@dataclass(frozen=True, slots=True)
class UnaryParams:
    op: UnaryOp


@dataclass(frozen=True, slots=True)
class GluParams:
    op: GluOp
    swapped: bool = False


@dataclass(frozen=True, slots=True)
class ScaleParams:
    s: float
    b: float = 0.0


@dataclass(frozen=True, slots=True)
class ClampParams:
    min: float
    max: float


@dataclass(frozen=True, slots=True)
class LeakyReluParams:
    negative_slope: float


@dataclass(frozen=True, slots=True)
class FillParams:
    value: float


Srcs = tuple[Tensor | None, ...]


def _float_src0(op: Op, srcs: Srcs) -> Tensor:
    a = need(srcs[0], op, "src0")
    check_types(op, a, FLOAT_TYPES, "src0")
    return a


def _same(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        a = _float_src0(op, srcs)
        return a.type, a.ne

    return infer


def _binary(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        a = _float_src0(op, srcs)
        b = need(srcs[1], op, "src1")
        check_types(op, b, FLOAT_TYPES, "src1")
        if not can_repeat(b, a):
            raise fail(op, "src1 must broadcast into src0 (each dim of src0 a multiple of src1's)", a, b)
        return a.type, a.ne

    return infer


for _op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
    define(_op, (2, 2), _binary(_op), can_inplace=True)


def _add1(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = _float_src0(Op.ADD1, srcs)
    b = need(srcs[1], Op.ADD1, "src1")
    if b.nelements() != 1:
        raise fail(Op.ADD1, "src1 must be a scalar", a, b)
    return a.type, a.ne


define(Op.ADD1, (2, 2), _add1, can_inplace=True)
for _op in (Op.SQR, Op.SQRT, Op.LOG):
    define(_op, (1, 1), _same(_op), can_inplace=True)
for _op in (Op.SIN, Op.COS):
    define(_op, (1, 1), _same(_op))
define(Op.UNARY, (1, 1), _same(Op.UNARY), UnaryParams, can_inplace=True)
define(Op.SCALE, (1, 1), _same(Op.SCALE), ScaleParams, can_inplace=True)
define(Op.CLAMP, (1, 1), _same(Op.CLAMP), ClampParams)
define(Op.LEAKY_RELU, (1, 1), _same(Op.LEAKY_RELU), LeakyReluParams)
define(Op.FILL, (1, 1), _same(Op.FILL), FillParams, can_inplace=True)


def _glu(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = _float_src0(Op.GLU, srcs)
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


def scale(a: Tensor, s: float, b: float = 0.0, *, inplace: bool = False) -> Tensor:
    """a * s + b."""
    return record(Op.SCALE, (a,), ScaleParams(float(s), float(b)), inplace=inplace)


def clamp(a: Tensor, min: float, max: float, *, inplace: bool = False) -> Tensor:
    if min > max:
        raise fail(Op.CLAMP, f"min {min} > max {max}", a)
    return record(Op.CLAMP, (a,), ClampParams(float(min), float(max)), inplace=inplace)


def leaky_relu(a: Tensor, negative_slope: float, *, inplace: bool = False) -> Tensor:
    return record(Op.LEAKY_RELU, (a,), LeakyReluParams(float(negative_slope)), inplace=inplace)


def fill(a: Tensor, value: float, *, inplace: bool = False) -> Tensor:
    """A tensor of a's shape with every element `value`."""
    return record(Op.FILL, (a,), FillParams(float(value)), inplace=inplace)
