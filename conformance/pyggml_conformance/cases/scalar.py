"""Ops with scalar params: SCALE (s, b), CLAMP, LEAKY_RELU, FILL; in place and strided."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, FLOATS
from pyggml_conformance.inputs import uniform

SHAPES = ((10, 10, 10, 10), (7, 1, 5, 3), (1025, 4, 1, 1))


def _scalar_case(op: Op, t: GGMLType, ne: Sequence[int], v: int, inplace: bool, values: dict[str, float],
                 make: Callable[[Tensor], Tensor]) -> Case:
    params = fmt_params(type=t, ne=ne, v=v, inplace=inplace, **values)

    def build(b: CaseBuilder) -> Tensor:
        init = uniform(-10.0, 10.0)
        a = b.strided(t, ne, pad=(1, 2, 0, 0), init=init) if v else b.input(t, ne, init)
        return make(a)

    return Case(op, params, build)


def scale_case(t: GGMLType, ne: Sequence[int], s: float, bias: float, v: int = 0, inplace: bool = False) -> Case:
    return _scalar_case(Op.SCALE, t, ne, v, inplace, {"s": s, "b": bias},
                        lambda a: ops.scale(a, s, bias, inplace=inplace))


def clamp_case(t: GGMLType, ne: Sequence[int], lo: float, hi: float, v: int = 0, inplace: bool = False) -> Case:
    return _scalar_case(Op.CLAMP, t, ne, v, inplace, {"min": lo, "max": hi},
                        lambda a: ops.clamp(a, lo, hi, inplace=inplace))


def leaky_case(t: GGMLType, ne: Sequence[int], slope: float, v: int = 0, inplace: bool = False) -> Case:
    return _scalar_case(Op.LEAKY_RELU, t, ne, v, inplace, {"negative_slope": slope},
                        lambda a: ops.leaky_relu(a, slope, inplace=inplace))


def fill_case(t: GGMLType, ne: Sequence[int], value: float, v: int = 0, inplace: bool = False) -> Case:
    return _scalar_case(Op.FILL, t, ne, v, inplace, {"value": value},
                        lambda a: ops.fill(a, value, inplace=inplace))


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for t, ne in product(FLOATS, SHAPES):
        out.append(scale_case(t, ne, 2.0, 0.0))
        out.append(scale_case(t, ne, 0.25, 1.0, v=1))
        out.append(scale_case(t, ne, -1.5, 0.5, inplace=True))
        out.append(clamp_case(t, ne, -0.5, 0.5))
        out.append(clamp_case(t, ne, -3.0, 7.0, v=1))
        out.append(clamp_case(t, ne, 2.0, 2.0))
        out.append(leaky_case(t, ne, 0.1))
        out.append(leaky_case(t, ne, 0.01, v=1))
        out.append(leaky_case(t, ne, -0.5))
        out.append(fill_case(t, ne, 0.0))
        out.append(fill_case(t, ne, -152.0, v=1))
    for t, v in product((F32, F16), (0, 1)):
        out.append(scale_case(t, SHAPES[0], 2.0, 1.0, v, inplace=True))
        out.append(clamp_case(t, SHAPES[0], -1.0, 1.0, v, inplace=True))
        out.append(leaky_case(t, SHAPES[0], 0.2, v, inplace=True))
        out.append(fill_case(t, SHAPES[0], 3.5, v, inplace=True))
    return out


def perf_cases() -> list[Case]:
    ne = (4096, 512, 1, 1)
    return [scale_case(F32, ne, 2.0, 1.0), scale_case(F16, ne, 2.0, 1.0), clamp_case(F32, ne, -1.0, 1.0),
            leaky_case(F32, ne, 0.1), fill_case(F32, ne, 1.0)]
