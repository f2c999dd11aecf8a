"""GET_ROWS (every type, batches, strided ids and srcs) and SET_ROWS (every destination type, I32/I64 ids,
broadcast ids over dims 2 and 3, viewed and strided rows, strided destinations)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import (
    ALL_TYPES,
    F16,
    F32,
    FLOATS,
    I32,
    K_QUANTS,
    LEGACY_QUANTS,
    QUANTS,
    T,
    quant_threshold,
)
from pyggml_conformance.inputs import distinct_ids, integers


def get_rows_case(t: GGMLType, n_cols: int, n_rows: int, n_ids: int, b: int = 1, ne3: int = 1,
                  v: int = 0) -> Case:
    """src [n_cols, n_rows, b, ne3], ids [n_ids, b, ne3] in [0, n_rows). v bits: 1 ids strided, 2 src rows
    strided."""
    params = fmt_params(type=t, n=n_cols, m=n_rows, r=n_ids, b=b, ne3=ne3, v=v)

    def build(cb: CaseBuilder) -> Tensor:
        ne = (n_cols, n_rows, b, ne3)
        src = cb.strided(t, ne, pad=(t.traits.blck_size, 0, 0, 0)) if v & 2 else cb.input(t, ne)
        init = integers(0, n_rows)
        ids = cb.strided(I32, (n_ids, b, ne3), pad=(3, 1, 0, 0), init=init) if v & 1 else \
            cb.input(I32, (n_ids, b, ne3), init)
        return ops.get_rows(src, ids)

    return Case(Op.GET_ROWS, params, build)


def set_rows_case(td: GGMLType, ti: GGMLType, ne: Sequence[int], nr23: Sequence[int], r: int,
                  v: int = 0) -> Case:
    """dst [ne0, ne1, ne2*nr0, ne3*nr1] <- F32 rows [ne0, r, ...] at ids [r, ne2, ne3] (distinct per batch).
    v: 1 rows and ids are views of their first max(r/2, 1) entries, 2 rows strided, 3 dst rows strided."""
    params = fmt_params(type_dst=td, type_idx=ti, ne=ne, nr23=nr23, r=r, v=v)
    rows = max(r // 2, 1) if v == 1 else r
    dims = (ne[0], ne[1], ne[2] * nr23[0], ne[3] * nr23[1])
    thr = quant_threshold(td, ne[0] * rows * dims[2] * dims[3])

    def build(b: CaseBuilder) -> Tensor:
        if v == 3:
            dst = b.strided(td, dims, pad=(td.traits.blck_size, 0, 0, 0))
        else:
            dst = b.input(td, dims)
        ne_src = (ne[0], r, dims[2], dims[3])
        src = b.strided(F32, ne_src, pad=(5, 0, 0, 0)) if v == 2 else b.input(F32, ne_src)
        ids = b.input(ti, (r, ne[2], ne[3]), distinct_ids(ne[1]))
        if v == 1:
            src = b.sub_view(src, (ne[0], rows, dims[2], dims[3]))
            ids = b.sub_view(ids, (rows, ne[2], ne[3]))
        return ops.set_rows(dst, src, ids)

    return Case(Op.SET_ROWS, params, build, threshold=thr)


def eval_cases() -> list[Case]:
    out: list[Case] = [get_rows_case(F32, 1, 8, 2), get_rows_case(F32, 256, 500, 400),
                       get_rows_case(T.Q4_0, 256, 500, 400), get_rows_case(F16, 256, 5, 4, 70, 10)]
    out += [get_rows_case(t, 1025, 7, 12, 2) for t in FLOATS]
    for t, b, ne3, v in product((*ALL_TYPES, I32), (1, 7), (1, 2), (0, 1, 2, 3)):
        out.append(get_rows_case(t, 256 if t.traits.blck_size > 1 else 65, 5, 4, b, ne3, v))
    for ti, td, b, v in product((T.I64, I32), (*FLOATS, *LEGACY_QUANTS), (1, 7), (0, 1, 2, 3)):
        nk = td.traits.blck_size
        out.append(set_rows_case(td, ti, (256, 5, b, 3), (1, 1), 1, v))
        out.append(set_rows_case(td, ti, (256, 11, 1, b), (2, 3), 7, v))
        out.append(set_rows_case(td, ti, (3 * nk, 3, b, 1), (2, 3), 2, v))
        out.append(set_rows_case(td, ti, (2 * nk, 4, 2, b), (1, 2), 3, v))
        if nk == 1:
            out.append(set_rows_case(td, ti, (31, 3, b, 1), (2, 3), 2, v))
            out.append(set_rows_case(td, ti, (33, 5, 1, b), (2, 3), 1, v))
    for ti, td, v in product((T.I64, I32), K_QUANTS, (0, 1, 2, 3)):
        # k-quants quantise slowly in the reference: few rows written per case
        out.append(set_rows_case(td, ti, (256, 5, 1, 1), (1, 1), 1, v))
        out.append(set_rows_case(td, ti, (256, 11, 1, 1), (2, 1), 3, v))
        out.append(set_rows_case(td, ti, (768, 3, 2, 1), (1, 1), 1, v))
    for ti, td in product((T.I64, I32), (F32, F16)):
        out.append(set_rows_case(td, ti, (1, 8, 1, 3), (1, 1), 2))
        out.append(set_rows_case(td, ti, (1, 8, 1, 3), (1, 1), 2, v=1))
    return out


def perf_cases() -> list[Case]:
    out = [get_rows_case(t, 4096, 32000, 512) for t in (F32, F16, T.Q4_0, T.Q4_K)]
    out += [set_rows_case(t, T.I64, (4096, 4096, 1, 1), (1, 1), 512) for t in (F32, F16, T.Q8_0)]
    out += [set_rows_case(t, T.I64, (128, 4096, 8, 1), (1, 1), 32) for t in (*FLOATS, *QUANTS[:2])]
    return out
