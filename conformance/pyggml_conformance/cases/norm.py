"""NORM, RMS_NORM, L2_NORM (eps from 0 to 10, rows not a multiple of 32, strided rows, in place) and
GROUP_NORM (groups dividing the channels or not)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F32

ROW_NORMS: dict[Op, Callable[..., Tensor]] = {Op.NORM: ops.norm, Op.RMS_NORM: ops.rms_norm,
                                              Op.L2_NORM: ops.l2_norm}
EPS = (0.0, 1e-6, 1e-4, 1e-1, 10.0)
ROWS = (64, 1025, 33, 132, 260)


def norm_case(op: Op, ne: Sequence[int], eps: float, v: int = 0, inplace: bool = False) -> Case:
    params = fmt_params(type=F32, ne=ne, v=v, eps=eps, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        if v == 1:
            a = b.strided(F32, ne, pad=(3, 1, 0, 0))
        elif v == 2:
            a = b.permuted(F32, ne, (0, 2, 1, 3))
        else:
            a = b.input(F32, ne)
        return ROW_NORMS[op](a, eps, inplace=inplace)

    return Case(op, params, build)


def group_norm_case(ne: Sequence[int], n_groups: int, eps: float = 1e-6) -> Case:
    params = fmt_params(type=F32, ne=ne, n_groups=n_groups, eps=eps)

    def build(b: CaseBuilder) -> Tensor:
        return ops.group_norm(b.input(F32, ne), n_groups, eps)

    return Case(Op.GROUP_NORM, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for op in ROW_NORMS:
        for eps, n, v in product(EPS, ROWS, (0, 1)):
            out.append(norm_case(op, (n, 5, 4, 3), eps, v))
        for eps, n in product(EPS, (64, 33)):
            out.append(norm_case(op, (n, 5, 4, 3), eps, v=2))
        for v in (0, 1, 2):
            out.append(norm_case(op, (64, 5, 4, 3), 1e-6, v, inplace=True))
    for ne, groups in (((8, 8, 32, 1), 8), ((8, 8, 32, 1), 32), ((9, 9, 20, 1), 3), ((9, 9, 20, 1), 7),
                       ((5, 7, 12, 2), 4), ((5, 7, 12, 2), 5), ((16, 16, 8, 1), 1), ((3, 3, 64, 1), 32)):
        out.append(group_norm_case(ne, groups))
    out.append(group_norm_case((8, 8, 32, 1), 8, eps=1e-1))
    return out


def perf_cases() -> list[Case]:
    out = [norm_case(op, (4096, 512, 1, 1), 1e-6) for op in ROW_NORMS]
    out.append(group_norm_case((64, 64, 320, 1), 32))
    return out
