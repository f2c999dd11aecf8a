"""MUL_MAT_ID (mixture of experts: expert counts, experts used per token, src1 broadcast or per slot, token
counts, every src0 type, strided srcs) and OUT_PROD (every src0 type, batch broadcast, transposed src1)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import ALL_TYPES, F16, F32, FLOATS, I32, QUANTS, T, unique
from pyggml_conformance.inputs import distinct_ids

MOE_M = 16
"""Expert rows in the eval cases: small, since every quantised expert is quantised per case."""


def mul_mat_id_case(ta: GGMLType, tb: GGMLType, n_mats: int, n_used: int, bcast: bool, m: int, n: int, k: int,
                    v: int = 0) -> Case:
    """experts [k, m, n_mats] x src1 [k, 1 or n_used, n tokens] with ids [n_used, n] (distinct per token).
    v bits: 1 src1 rows strided, 2 ids a strided view."""
    params = fmt_params(type_a=ta, type_b=tb, n_mats=n_mats, n_used=n_used, b=bcast, m=m, n=n, k=k, v=v)

    def build(b: CaseBuilder) -> Tensor:
        experts = b.input(ta, (k, m, n_mats))
        ne_b = (k, 1 if bcast else n_used, n)
        src1 = b.strided(tb, ne_b, pad=(4, 1, 0, 0)) if v & 1 else b.input(tb, ne_b)
        init = distinct_ids(n_mats)
        ids = b.strided(I32, (n_used, n), pad=(2, 0, 0, 0), init=init) if v & 2 else \
            b.input(I32, (n_used, n), init)
        return ops.mul_mat_id(experts, src1, ids)

    return Case(Op.MUL_MAT_ID, params, build)


def out_prod_case(ta: GGMLType, tb: GGMLType, m: int, n: int, k: int, bs: Sequence[int] = (1, 1),
                  nr: Sequence[int] = (1, 1), trans_b: bool = False) -> Case:
    """src0 [m, k, bs0, bs1], src1 [n, k, bs0*nr0, bs1*nr1] -> [m, n, ...]; trans_b: src1 stored as [k, n]."""
    params = fmt_params(type_a=ta, type_b=tb, m=m, n=n, k=k, bs=bs, nr=nr, trans_b=trans_b)

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(ta, (m, k, bs[0], bs[1]))
        ne_b = (n, k, bs[0] * nr[0], bs[1] * nr[1])
        src1 = b.permuted(tb, ne_b, (1, 0, 2, 3)) if trans_b else b.input(tb, ne_b)
        return ops.out_prod(a, src1)

    return Case(Op.OUT_PROD, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for ta, n_mats, n_used, bcast, n in product(ALL_TYPES, (4, 8), (1, 2, 4), (False, True), (1, 4, 5, 17, 33)):
        out.append(mul_mat_id_case(ta, F32, n_mats, n_used, bcast, MOE_M, n, 256))
    for ta, n_mats, n_used, bcast, n in product(FLOATS, (4, 8), (1, 2, 4), (False, True), (1, 17)):
        out.append(mul_mat_id_case(ta, F16, n_mats, n_used, bcast, MOE_M, n, 256))
    for ta in ALL_TYPES:
        out.append(mul_mat_id_case(ta, F32, 4, 2, False, 33, 16, 3 * ta.traits.blck_size))
        out.extend(mul_mat_id_case(ta, F32, 4, 2, False, MOE_M, 5, 256, v) for v in (1, 2, 3))
    out.append(mul_mat_id_case(F16, F32, 1, 1, False, 8, 16, 1))
    for ta, tb, n, k, bs2, bs3, nr2, nr3 in product(ALL_TYPES, (F32, F16), (1, 16), (1, 16), (1, 3), (1, 3),
                                                    (1, 2), (1, 2)):
        out.append(out_prod_case(ta, tb, 256, n, k, (bs2, bs3), (nr2, nr3)))
    out += [out_prod_case(F32, F32, 256, 16, 16, (ne2, 1)) for ne2 in (1, 8, 16, 32)]
    out += [out_prod_case(F32, F32, 256, 16, 16, (1, 1), (nr2, 1)) for nr2 in (8, 16, 32)]
    for ta, n in product(FLOATS, (1, 16)):
        out.append(out_prod_case(ta, F32, 67, n, 33, trans_b=True))
    return unique(out)


def perf_cases() -> list[Case]:
    out = [mul_mat_id_case(t, F32, 32, 4, False, 1792, n, 4096) for t in (F16, T.Q4_0, T.Q4_K) for n in (1, 32)]
    out += [mul_mat_id_case(t, F32, 8, 2, False, 14336, 8, 4096) for t in (T.Q8_0, *QUANTS[5:7])]
    out += [out_prod_case(F32, F32, 4096, 512, 512)]
    return out
