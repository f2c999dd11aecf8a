"""REPEAT, CONCAT (every dim, every plain type, block types, non-contiguous srcs), PAD (end and both-side
padding), SET and ACC (sub-views at offsets, in place), DIAG, ARANGE."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, FLOATS, I32, K_QUANTS, LEGACY_QUANTS, T, mul, ne4, unique


def repeat_case(t: GGMLType, ne: Sequence[int], nr: Sequence[int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.permuted(t, ne, (0, 2, 1, 3)) if v else b.input(t, ne)
        return ops.repeat(a, b.input(t, mul(ne, nr)))

    return Case(Op.REPEAT, fmt_params(type=t, ne=ne, nr=nr, v=v), build)


def concat_case(t: GGMLType, ne: Sequence[int], ne_b_d: int, dim: int, v: int = 0) -> Case:
    """a [ne] ++ b (ne with ne[dim] = ne_b_d) along dim. v bits: 1 a strided, 2 b strided."""

    def build(b: CaseBuilder) -> Tensor:
        ne_b = list(ne4(ne))
        ne_b[dim] = ne_b_d
        a = b.strided(t, ne, pad=(0, 1, 1, 0)) if v & 1 else b.input(t, ne)
        other = b.strided(t, ne_b, pad=(0, 2, 0, 1)) if v & 2 else b.input(t, ne_b)
        return ops.concat(a, other, dim)

    return Case(Op.CONCAT, fmt_params(type=t, ne_a=ne, ne_b_d=ne_b_d, dim=dim, v=v), build)


def pad_case(ne: Sequence[int], lp: Sequence[int], rp: Sequence[int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.strided(F32, ne, pad=(2, 1, 0, 0)) if v else b.input(F32, ne)
        return ops.pad_ext(a, ne4(lp), ne4(rp))

    return Case(Op.PAD, fmt_params(type=F32, ne=ne, lp=lp, rp=rp, v=v), build)


def set_acc_case(op: Op, t: GGMLType, ne: Sequence[int], ne_b: Sequence[int], at: Sequence[int],
                 inplace: bool = False) -> Case:
    """Write (SET) or add (ACC) b [ne_b] into a [ne] at element position `at`, with a's strides."""
    params = fmt_params(type=t, ne=ne, ne_b=ne_b, at=at, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(t, ne)
        src = b.input(t, ne_b)
        nb = a.nb
        pos = ne4(at)
        offset = sum(pos[i] * nb[i] for i in range(4))
        fn = ops.set_ if op is Op.SET else ops.acc
        return fn(a, src, nb[1], nb[2], nb[3], offset, inplace=inplace)

    return Case(op, params, build)


def diag_case(ne: Sequence[int]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.diag(b.input(F32, ne))

    return Case(Op.DIAG, fmt_params(type=F32, ne=ne), build)


def arange_case(start: float, stop: float, step: float) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.arange(b.ctx, start, stop, step)

    return Case(Op.ARANGE, fmt_params(type=F32, start=start, stop=stop, step=step), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    nrs = ((1, 1, 1, 1), (2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2), (2, 3, 2, 2))
    for t, ne3, nr in product((F32, F16, BF16, I32, T.I16), (1, 3), nrs):
        out.append(repeat_case(t, (10, 5, 4, ne3), nr))
    out += [repeat_case(t, (10, 5, 4, 3), (2, 1, 2, 1), v=1) for t in (F32, F16)]
    for v, dim, t in product((0, 1, 2, 3), (0, 1, 2, 3), (F32, F16, BF16, T.I8, T.I16, I32, T.I64)):
        out.append(concat_case(t, (11, 12, 5, 3), 7, dim, v))
    for t, v, dim in product(LEGACY_QUANTS, (0, 1, 2, 3), (0, 1, 2, 3)):
        out.append(concat_case(t, (64, 6, 5, 3), 32 if dim == 0 else 7, dim, v))
    for t, dim in product(K_QUANTS, (0, 1, 2, 3)):  # k-quants quantise slowly in the reference: small
        out.append(concat_case(t, (256, 2, 1, 2), 256 if dim == 0 else 1, dim))
    zero = (0, 0, 0, 0)
    for ne, lp, rp in (((33, 17, 2, 1), zero, (4, 3, 0, 0)), ((512, 3, 1, 1), zero, (1, 1, 0, 0)),
                       ((11, 22, 3, 4), (1, 2, 3, 4), (5, 6, 7, 8)), ((11, 22, 3, 4), (1, 0, 0, 0), zero),
                       ((11, 22, 3, 4), zero, (0, 0, 0, 2)), ((100, 1, 1, 1), (100, 0, 0, 0), zero),
                       ((100, 1, 1, 1), zero, (100, 0, 0, 0)), ((100, 10, 1, 1), (50, 5, 0, 0), (50, 5, 0, 0))):
        out += [pad_case(ne, lp, rp, v) for v in (0, 1)]
    for n, ne1 in product((1023, 1024, 1025, 2048, 2049), (1, 8)):
        out.append(pad_case((n, ne1, 1, 1), zero, (1, 0, 0, 0)))
    out += [pad_case((1024, 16, 1, 1), zero, (0, 1, 0, 0)), pad_case((7, 5, 3, 2), (1, 1, 1, 1), (1, 1, 1, 1))]
    ne = (6, 5, 4, 3)
    for op, t, inplace in product((Op.SET, Op.ACC), FLOATS, (False, True)):
        for dim in (1, 2, 3):
            ne_b = list(ne)
            ne_b[dim] = ne[dim] - 2
            out.append(set_acc_case(op, t, ne, ne_b, [0] * 4))
            at = [0, 0, 0, 0]
            at[dim] = 1
            out.append(set_acc_case(op, t, ne, ne_b, at, inplace))
        out.append(set_acc_case(op, t, (256, 17, 2, 3), (128, 16, 2, 3), (64, 1, 0, 0), inplace))
    for ne_d in ((4, 1, 1, 1), (79, 1, 5, 3), (256, 1, 2, 1), (10, 1, 3, 1)):
        out.append(diag_case(ne_d))
    out += [arange_case(0.0, 3.0, 1.0), arange_case(-2.5, 1000.0, 0.37), arange_case(10.0, -10.0, -0.5),
            arange_case(0.0, 65537.0, 1.0)]
    return unique(out)


def perf_cases() -> list[Case]:
    return [repeat_case(F32, (4096, 1, 1, 1), (1, 512, 1, 1)), concat_case(F32, (4096, 512, 1, 1), 512, 1),
            concat_case(F16, (128, 512, 32, 1), 512, 1), pad_case((4096, 512, 1, 1), (0, 0, 0, 0), (64, 1, 0, 0)),
            set_acc_case(Op.ACC, F32, (4096, 512, 1, 1), (4096, 256, 1, 1), (0, 128, 0, 0)),
            arange_case(0.0, 4 * 1024 * 1024, 1.0), diag_case((2048, 1, 1, 1))]
