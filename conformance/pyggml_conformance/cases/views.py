"""The view ops VIEW, RESHAPE, PERMUTE, TRANSPOSE: no work, but a backend must accept them in a graph, leave
their memory alone and let the result be read through the view's strides."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, I32, T


def view_case(t: GGMLType, ne: Sequence[int], ne_v: Sequence[int], offset_rows: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.input(t, ne)
        return ops.view(a, tuple(ne_v), a.nb[1 : len(ne_v)], offset_rows * a.nb[1])

    return Case(Op.VIEW, fmt_params(type=t, ne=ne, ne_view=ne_v, offset_rows=offset_rows), build)


def reshape_case(t: GGMLType, ne: Sequence[int], ne_r: Sequence[int]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.reshape(b.input(t, ne), *ne_r)

    return Case(Op.RESHAPE, fmt_params(type=t, ne=ne, ne_out=ne_r), build)


def permute_case(t: GGMLType, ne: Sequence[int], axes: Sequence[int]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.permute(b.input(t, ne), axes[0], axes[1], axes[2], axes[3])

    return Case(Op.PERMUTE, fmt_params(type=t, ne=ne, axes=axes), build)


def transpose_case(t: GGMLType, ne: Sequence[int]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.transpose(b.input(t, ne))

    return Case(Op.TRANSPOSE, fmt_params(type=t, ne=ne), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for t in (F32, F16, BF16, I32, T.Q4_0):
        n0 = 64 if t.traits.blck_size > 1 else 10
        out += [view_case(t, (n0, 6, 4, 1), (n0, 3, 2), 1), view_case(t, (n0, 6, 4, 1), (n0, 5), 0),
                reshape_case(t, (n0, 6, 4, 1), (n0, 24)), reshape_case(t, (n0, 6, 4, 1), (n0, 2, 3, 4))]
        if t.traits.blck_size == 1:
            out += [transpose_case(t, (n0, 6, 4, 1)), transpose_case(t, (n0, 1, 5, 2))]
        out += [permute_case(t, (n0, 6, 4, 3), axes) for axes in ((0, 2, 1, 3), (0, 3, 1, 2))]
    for t, axes in product((F32, F16), ((1, 0, 2, 3), (2, 1, 0, 3), (3, 2, 1, 0))):
        out.append(permute_case(t, (10, 6, 4, 3), axes))
    return out


def perf_cases() -> list[Case]:
    return []
