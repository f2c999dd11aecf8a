"""GLU (every sub-op): fused (one input, halves) and split (two inputs), swapped, strided inputs, types."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.elementwise import PARAMS_OF_GLU, GluOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, FLOATS
from pyggml_conformance.inputs import uniform

PLAIN = tuple(g for g in GluOp if g not in PARAMS_OF_GLU)
"""The sub-ops without params of their own (SWIGLU_OAI / SWIGLU_CLAMP: the moe family)."""
SHAPES = ((128, 2, 2, 2), (5, 7, 11, 13), (1025, 3, 1, 1), (1027, 1, 1, 1))
"""Result shapes: a fused input has twice ne[0]. The last is one row, as a decode step's (a backend may share it out
across threads), of a length no multiple of a vector's."""


def glu_case(gop: GluOp, t: GGMLType, ne: Sequence[int], v: int = 0, swapped: bool = False,
             split: bool = False) -> Case:
    params = fmt_params(op=gop, type=t, ne=ne, v=v, swapped=swapped, split=split)

    def build(b: CaseBuilder) -> Tensor:
        init = uniform(-3.0, 3.0)
        ne_in = list(ne) if split else [2 * ne[0], *ne[1:]]
        if v:
            a = b.strided(t, ne_in, pad=(4, 1, 0, 0), init=init)
        else:
            a = b.input(t, ne_in, init)
        other = None
        if split:
            other = b.strided(t, ne, pad=(2, 0, 1, 0), init=init) if v else b.input(t, ne, init)
        return ops.glu(a, gop, other, swapped=swapped)

    return Case(Op.GLU, params, build, sub=gop.name)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for gop, t, ne, v, swapped, split in product(PLAIN, FLOATS, SHAPES[:2], (0, 1), (False, True),
                                                  (False, True)):
        out.append(glu_case(gop, t, ne, v, swapped, split))
    for gop, t, split in product(PLAIN, (F32, F16), (False, True)):
        out.append(glu_case(gop, t, SHAPES[2], split=split))
    for gop, t, v, swapped, split in product(PLAIN, (F32, F16), (0, 1), (False, True), (False, True)):
        out.append(glu_case(gop, t, SHAPES[3], v, swapped, split))
    return out


def perf_cases() -> list[Case]:
    return [glu_case(g, t, (11008, 512, 1, 1)) for g in (GluOp.SWIGLU, GluOp.GEGLU) for t in (F32, F16)]
