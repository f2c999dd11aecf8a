"""Mixture-of-experts helpers beyond MUL_MAT_ID: ADD_ID, the per-expert bias add of gpt-oss."""

from __future__ import annotations

from pyggml.ops.base import Op, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import FLOAT_TYPES, GGMLType

Srcs = tuple[Tensor | None, ...]


def _add_id(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.ADD_ID, "src0", FLOAT_TYPES)
    b = need(srcs[1], Op.ADD_ID, "src1", FLOAT_TYPES)
    ids = need(srcs[2] if len(srcs) > 2 else None, Op.ADD_ID, "src2 (ids)", frozenset({GGMLType.I32}))
    if b.ne[0] != a.ne[0]:
        raise fail(Op.ADD_ID, "src1's rows must be as long as src0's (ne[0])", a, b)
    if b.ne[2] != 1 or b.ne[3] != 1:
        raise fail(Op.ADD_ID, "src1 must be a matrix [ne0, n_rows] (ggml reads its rows from plane 0 only)", b)
    if ids.ne[0] != a.ne[1] or ids.ne[1] != a.ne[2] or ids.ne[2] != 1 or ids.ne[3] != 1:
        raise fail(Op.ADD_ID, "ids must be [src0 ne[1], src0 ne[2]] (one row id of src1 per row of src0)", a, ids)
    return a.type, a.ne


define(Op.ADD_ID, (3, 3), _add_id, can_inplace=True)


def add_id(a: Tensor, b: Tensor, ids: Tensor, *, inplace: bool = False) -> Tensor:
    """dst[i0, i1, i2, i3] = a[i0, i1, i2, i3] + b[i0, ids[i1, i2]] (ggml_add_id): a is [n_embd, n_used,
    n_tokens], b [n_embd, n_experts] (one bias row per expert), ids I32 [n_used, n_tokens] (the experts chosen,
    MUL_MAT_ID's ids). An id outside [0, b.ne[1]) is an error at compute time."""
    return record(Op.ADD_ID, (a, b, ids), inplace=inplace)
