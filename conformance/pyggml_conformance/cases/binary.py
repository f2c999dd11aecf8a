"""ADD, SUB, MUL, DIV (broadcast in every dim, permuted / transposed / strided srcs, in place, mixed types), ADD1."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, FLOATS, HALF, mul
from pyggml_conformance.inputs import Init, away_from_zero

FN: dict[Op, Callable[..., Tensor]] = {Op.ADD: ops.add, Op.SUB: ops.sub, Op.MUL: ops.mul, Op.DIV: ops.div}

# (src1 shape ne, repeats nr): src0 = ne * nr, so src1 broadcasts along every dim where nr > 1
ONCE = (1, 1, 1, 1)
SHAPES: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1, 1, 8, 1), ONCE), ((1, 1, 1, 1), (32, 1, 1, 1)), ((1, 1, 24, 20), ONCE), ((10, 5, 1, 1), ONCE),
    ((10, 5, 4, 1), ONCE),
    *(((10, 5, 4, 3), nr) for nr in (ONCE, (2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2), (1, 1, 2, 2),
                                     (1, 2, 2, 2), (2, 2, 2, 2))),
)
ODD_SHAPES = (((1025, 3, 1, 1), ONCE), ((67, 1, 1, 1), (1, 33, 5, 1)), ((1, 1, 67, 1), (13, 3, 1, 1)),
              ((129, 1, 1, 1), ONCE), ((16, 16, 1, 1), (1, 1, 3, 5)))
PERMS = {1: (0, 2, 1, 3), 2: (1, 0, 2, 3)}
"""v=1: src1 rows permuted across dims 1 and 2; v=2: src1 transposed; v=3: src0 rows strided."""


def _src1_init(op: Op) -> Init | None:
    return away_from_zero() if op is Op.DIV else None


def binary_case(op: Op, ta: GGMLType, tb: GGMLType, ne: Sequence[int], nr: Sequence[int], v: int = 0,
                inplace: bool = False) -> Case:
    params = fmt_params(type_a=ta, type_b=tb, ne=ne, nr=nr, v=v, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        ne_a = mul(ne, nr)
        a = b.strided(ta, ne_a, pad=(3, 1, 0, 0)) if v == 3 else b.input(ta, ne_a)
        init = _src1_init(op)
        src1 = b.permuted(tb, ne, PERMS[v], init) if v in PERMS else b.input(tb, ne, init)
        return FN[op](a, src1, inplace=inplace)

    return Case(op, params, build)


def overlap_case(op: Op, t: GGMLType, ne: Sequence[int]) -> Case:
    """src1 is a row of src0's own memory (the srcs overlap)."""
    params = fmt_params(type=t, ne=ne, overlap=1)

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(t, ne, away_from_zero() if op is Op.DIV else None)
        row = ops.view(a, (ne[0],), offset=0)
        return FN[op](a, row)

    return Case(op, params, build)


def add1_case(t: GGMLType, ne: Sequence[int], inplace: bool, v: int = 0) -> Case:
    params = fmt_params(type=t, ne=ne, v=v, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        a = b.strided(t, ne, pad=(2, 1, 0, 0)) if v else b.input(t, ne)
        return ops.add1(a, b.input(t, (1,)), inplace=inplace)

    return Case(Op.ADD1, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for op in FN:
        for t, (ne, nr), v in product(FLOATS, SHAPES, (0, 1, 2, 3)):
            out.append(binary_case(op, t, t, ne, nr, v))
        for t, (ne, nr) in product(HALF, ODD_SHAPES):
            out.append(binary_case(op, t, t, ne, nr))
        for (ta, tb), (ne, nr) in product(((F32, F16), (F16, F32)), SHAPES[5:9]):
            out.append(binary_case(op, ta, tb, ne, nr))
        for t, (ne, nr), v in product(FLOATS, ((((16, 5, 4, 3), (1, 1, 1, 1))), ((10, 5, 4, 3), (2, 2, 2, 2))),
                                      (0, 1, 3)):
            out.append(binary_case(op, t, t, ne, nr, v, inplace=True))
        for t, ne in product(HALF, ((10, 5, 4, 6), (1, 1, 12, 12))):
            out.append(overlap_case(op, t, ne))
    for t, ne, inplace, v in product(FLOATS, ((10, 5, 4, 3), (1, 1, 1, 1), (33, 7, 1, 1)), (False, True), (0, 1)):
        out.append(add1_case(t, ne, inplace, v))
    return out


def perf_cases() -> list[Case]:
    out: list[Case] = []
    for op in FN:
        out.append(binary_case(op, F32, F32, (4096, 512, 1, 1), (1, 1, 1, 1)))
        out.append(binary_case(op, F32, F32, (4096, 1, 1, 1), (1, 512, 1, 1)))
        out.append(binary_case(op, F16, F16, (4096, 512, 1, 1), (1, 1, 1, 1)))
    out.append(add1_case(F32, (4096, 512, 1, 1), False))
    return out
