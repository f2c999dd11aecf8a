"""NORM, RMS_NORM, L2_NORM (eps from 0 to 10, rows not a multiple of 32, strided rows, in place), NORM and RMS_NORM
followed by the MUL by a weight (which backends may fuse: weights broadcast over rows, channels and batches, the
norm's result also an output or read by the MUL as its src1, where they must not), and GROUP_NORM (groups dividing
the channels or not)."""

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


MUL_WEIGHTS = ((1, 1, 1), (5, 1, 1), (1, 4, 1), (5, 4, 3))
"""ne[1..3] of the weight of norm_mul_case (ne[0] is the row's)."""


def norm_mul_case(op: Op, ne: Sequence[int], w_ne: Sequence[int], v: int = 0, keep: str = "") -> Case:
    """MUL(norm(a), w); keep 'norm': the norm's result is an output too; 'src1': MUL(w, norm(a)), w full-size."""
    params = fmt_params(type=F32, ne=ne, v=v, eps=1e-5, mul=w_ne, **({"keep": keep} if keep else {}))

    def build(b: CaseBuilder) -> Tensor | list[Tensor]:
        a = b.strided(F32, ne, pad=(3, 1, 0, 0)) if v == 1 else b.input(F32, ne)
        y = ROW_NORMS[op](a, 1e-5)
        w = b.input(F32, (ne[0], *w_ne))
        if keep == "src1":
            return ops.mul(w, y)
        out = ops.mul(y, w)
        return [y, out] if keep == "norm" else out

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
    for op in (Op.NORM, Op.RMS_NORM):
        for n, w_ne, v in product((64, 33), MUL_WEIGHTS, (0, 1)):
            out.append(norm_mul_case(op, (n, 5, 4, 3), w_ne, v))
        out.append(norm_mul_case(op, (64, 5, 4, 3), (1, 1, 1), keep="norm"))
        out.append(norm_mul_case(op, (64, 5, 4, 3), (5, 4, 3), keep="src1"))
    for ne, groups in (((8, 8, 32, 1), 8), ((8, 8, 32, 1), 32), ((9, 9, 20, 1), 3), ((9, 9, 20, 1), 7),
                       ((5, 7, 12, 2), 4), ((5, 7, 12, 2), 5), ((16, 16, 8, 1), 1), ((3, 3, 64, 1), 32)):
        out.append(group_norm_case(ne, groups))
    out.append(group_norm_case((8, 8, 32, 1), 8, eps=1e-1))
    return out


def perf_cases() -> list[Case]:
    out = [norm_case(op, (4096, 512, 1, 1), 1e-6) for op in ROW_NORMS]
    out.append(group_norm_case((64, 64, 320, 1), 32))
    return out
