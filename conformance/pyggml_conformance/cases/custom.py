"""MAP_CUSTOM1/2/3 and CUSTOM with Python callables: each task (ith of nth) computes its share of the rows, so a
backend that splits the node across threads must give the reference's result (nth 1); types, strided srcs, in
place, task counts. Device backends refuse these ops (they are host-only), so on them the cases are unsupported."""

from __future__ import annotations

from itertools import product
from typing import Any

import numpy as np

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.custom import N_TASKS_MAX
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, unique

SHAPES = ((33, 5, 3, 2), (128, 7, 1, 1))
"""ggml order; rows are split between tasks."""


def _each_row(dst: Any, ith: int, nth: int) -> list[tuple[int, ...]]:
    """The (i3, i2, i1) rows of task ith (round robin over the flattened rows, as many ggml kernels split)."""
    idx = list(np.ndindex(*dst.shape[:-1]))
    return idx[ith::nth]


def twice_plus(dst: Any, a: Any, ith: int, nth: int, userdata: Any) -> None:
    """MAP_CUSTOM1: dst = 2 a + userdata."""
    for r in _each_row(dst, ith, nth):
        dst[r] = a[r] * 2 + userdata


def add_rows(dst: Any, a: Any, b: Any, ith: int, nth: int, userdata: Any) -> None:
    """MAP_CUSTOM2: dst = a + b."""
    for r in _each_row(dst, ith, nth):
        dst[r] = a[r] + b[r]


def mul_add_rows(dst: Any, a: Any, b: Any, c: Any, ith: int, nth: int, userdata: Any) -> None:
    """MAP_CUSTOM3: dst = a * b + c."""
    for r in _each_row(dst, ith, nth):
        dst[r] = a[r] * b[r] + c[r]


def row_max_plus_sum(dst: Any, args: tuple[Any, ...], ith: int, nth: int, userdata: Any) -> None:
    """CUSTOM into [1, ne1, ne2, ne3]: max of each row of args[0] plus the sum of the same row of args[1]."""
    for r in _each_row(dst, ith, nth):
        dst[r] = args[0][r].max() + args[1][r].sum(dtype=np.float32)


def negate_in_place(dst: Any, args: tuple[Any, ...], ith: int, nth: int, userdata: Any) -> None:
    """CUSTOM in place over args[0] (== dst's memory): dst = -dst * args[1]."""
    for r in _each_row(dst, ith, nth):
        dst[r] = -dst[r] * args[1][r]


def _src(b: CaseBuilder, t: GGMLType, ne: tuple[int, ...], v: int) -> Tensor:
    return b.strided(t, ne, pad=(3, 1, 1, 0)) if v else b.input(t, ne)


def custom_case(op: Op, t: GGMLType, ne: tuple[int, int, int, int], v: int = 0, n_tasks: int = N_TASKS_MAX,
                inplace: bool = False) -> Case:
    params = fmt_params(type=t, ne=ne, v=v, n_tasks=n_tasks, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(t, ne) if inplace else _src(b, t, ne, v)
        if op is Op.MAP_CUSTOM1:
            return ops.map_custom1(a, twice_plus, n_tasks, 0.5, inplace=inplace)
        if op is Op.MAP_CUSTOM2:
            return ops.map_custom2(a, _src(b, t, ne, v), add_rows, n_tasks, inplace=inplace)
        if op is Op.MAP_CUSTOM3:
            return ops.map_custom3(a, _src(b, t, ne, v), _src(b, t, ne, 0), mul_add_rows, n_tasks, inplace=inplace)
        if inplace:
            return ops.custom_inplace(a, [_src(b, t, ne, v)], negate_in_place, n_tasks)
        return ops.custom([a, _src(b, t, ne, v)], row_max_plus_sum, F32, (1, *ne[1:]), n_tasks)

    return Case(op, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for op, t, ne, v in product((Op.MAP_CUSTOM1, Op.MAP_CUSTOM2, Op.MAP_CUSTOM3, Op.CUSTOM), (F32, F16), SHAPES,
                                (0, 1)):
        out.append(custom_case(op, t, ne, v))
        out.append(custom_case(op, t, ne, v, n_tasks=3))
        out.append(custom_case(op, t, ne, v, n_tasks=1, inplace=True))
    return unique(out)


def perf_cases() -> list[Case]:
    return []
