"""UNARY (every sub-op) and the math ops SQR, SQRT, LOG, SIN, COS: types, odd shapes, strided and permuted
inputs, in place, and a wide value range (overflow to infinity, NaN-free large arguments)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.elementwise import PARAMS_OF_UNARY, UnaryOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, FLOATS, HALF, varied_input

SHAPES = ((128, 2, 2, 2), (5, 7, 11, 13), (1025, 3, 1, 1))
MATH: dict[Op, Callable[..., Tensor]] = {Op.SQR: ops.sqr, Op.SQRT: ops.sqrt, Op.LOG: ops.log, Op.SIN: ops.sin,
                                         Op.COS: ops.cos}
MATH_INPLACE = frozenset({Op.SQR, Op.SQRT, Op.LOG})
POSITIVE = frozenset({Op.SQRT, Op.LOG})
ROUNDING = frozenset({UnaryOp.FLOOR, UnaryOp.CEIL, UnaryOp.ROUND, UnaryOp.TRUNC})


def _range(lo: float, hi: float) -> str:
    return f"[{lo:g},{hi:g}]"


def unary_case(uop: UnaryOp, t: GGMLType, ne: Sequence[int], v: int = 0, inplace: bool = False,
               lo: float = -5.0, hi: float = 5.0) -> Case:
    params = fmt_params(op=uop, type=t, ne=ne, v=v, inplace=inplace) + f",range={_range(lo, hi)}"

    def build(b: CaseBuilder) -> Tensor:
        return ops.unary(varied_input(b, t, ne, v, lo, hi), uop, inplace=inplace)

    return Case(Op.UNARY, params, build, sub=uop.name)


def math_case(op: Op, t: GGMLType, ne: Sequence[int], v: int = 0, inplace: bool = False,
              lo: float | None = None, hi: float | None = None) -> Case:
    if lo is None or hi is None:
        lo, hi = (0.1, 10.0) if op in POSITIVE else (-10.0, 10.0)
    params = fmt_params(type=t, ne=ne, v=v, inplace=inplace) + f",range={_range(lo, hi)}"
    lo_, hi_ = lo, hi

    def build(b: CaseBuilder) -> Tensor:
        a = varied_input(b, t, ne, v, lo_, hi_)
        return MATH[op](a, inplace=inplace)

    return Case(op, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for uop in (u for u in UnaryOp if u not in PARAMS_OF_UNARY):  # XIELU (params): the moe family
        lo, hi = (-10.0, 10.0) if uop in ROUNDING else (-5.0, 5.0)
        for t, ne, v in product(FLOATS, SHAPES, (0, 1, 2)):
            out.append(unary_case(uop, t, ne, v, lo=lo, hi=hi))
        for t, v in product(HALF, (0, 1)):
            out.append(unary_case(uop, t, SHAPES[0], v, inplace=True, lo=lo, hi=hi))
        for t in FLOATS:
            out.append(unary_case(uop, t, SHAPES[0], lo=-150.0, hi=150.0))
        if uop in ROUNDING:  # halves are exact in F16: round-half-away-from-zero must hold
            for t in HALF:
                out.append(unary_case(uop, t, (1024, 4, 1, 1), lo=-64.0, hi=64.0))
    for op in MATH:
        for t, ne, v in product(FLOATS, SHAPES, (0, 1, 2)):
            out.append(math_case(op, t, ne, v))
        if op in MATH_INPLACE:
            for t, v in product(HALF, (0, 1)):
                out.append(math_case(op, t, SHAPES[0], v, inplace=True))
        wide = (1.0, 1e4) if op in POSITIVE else (-100.0, 100.0)
        for t in HALF:
            out.append(math_case(op, t, (1024, 16, 1, 1), lo=wide[0], hi=wide[1]))
    return out


def perf_cases() -> list[Case]:
    out: list[Case] = []
    for uop in (UnaryOp.SILU, UnaryOp.GELU, UnaryOp.EXP, UnaryOp.RELU):
        out.extend(unary_case(uop, t, (4096, 512, 1, 1)) for t in (F32, F16))
    out.extend(math_case(op, F32, (4096, 512, 1, 1)) for op in MATH)
    return out
