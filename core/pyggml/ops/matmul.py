"""Matrix products: MUL_MAT, MUL_MAT_ID (mixture of experts), OUT_PROD."""

from __future__ import annotations

from pyggml.ops.base import Op, define, fail, need, record, tiles
from pyggml.tensor import Ne, Tensor
from pyggml.types import FLOAT_TYPES, GGMLType

Srcs = tuple[Tensor | None, ...]
WEIGHT_TYPES = FLOAT_TYPES | frozenset(t for t in GGMLType if t.traits.is_quantized)
"""What src0 of MUL_MAT / MUL_MAT_ID / OUT_PROD may hold: float and block types (not integers, as ggml)."""


def _mul_mat(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.MUL_MAT, "src0", WEIGHT_TYPES)
    b = need(srcs[1], Op.MUL_MAT, "src1", FLOAT_TYPES)
    if a.ne[0] != b.ne[0]:
        raise fail(Op.MUL_MAT, "src0 and src1 must have the same row length ne[0]", a, b)
    if not (tiles(b.ne[2], a.ne[2]) and tiles(b.ne[3], a.ne[3])):
        raise fail(Op.MUL_MAT, "src0's batch dims ne[2], ne[3] must divide src1's (broadcast)", a, b)
    if a.is_transposed():
        raise fail(Op.MUL_MAT, "src0 must not be transposed (nb[0] > nb[1])", a)
    if a.type.traits.is_quantized and not a.is_contiguous_rows():
        raise fail(Op.MUL_MAT, "quantized src0 needs contiguous rows", a)
    return GGMLType.F32, (a.ne[1], b.ne[1], b.ne[2], b.ne[3])


define(Op.MUL_MAT, (2, 2), _mul_mat)


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    """result[i, j] = dot(a row i, b row j) per batch: a [k, m, A2, A3], b [k, n, B2, B3] -> f32 [m, n, B2, B3],
    a's batches broadcast over b's (B2 % A2 == 0, B3 % A3 == 0). In numpy terms: b @ a.T."""
    return record(Op.MUL_MAT, (a, b))


def _mul_mat_id(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    as_ = need(srcs[0], Op.MUL_MAT_ID, "src0 (experts)", WEIGHT_TYPES)
    b = need(srcs[1], Op.MUL_MAT_ID, "src1", FLOAT_TYPES)
    ids = need(srcs[2], Op.MUL_MAT_ID, "src2 (expert ids)", frozenset({GGMLType.I32}))
    if as_.ne[3] != 1 or b.ne[3] != 1 or ids.ne[2] != 1 or ids.ne[3] != 1:
        raise fail(Op.MUL_MAT_ID, "experts are [k, m, n_expert], src1 [k, n_b, n_tokens], ids [n_used, n_tokens]",
                   as_, b, ids)
    if ids.ne[1] != b.ne[2]:
        raise fail(Op.MUL_MAT_ID, "ids.ne[1] must equal src1.ne[2] (tokens)", b, ids)
    if as_.ne[0] != b.ne[0]:
        raise fail(Op.MUL_MAT_ID, "experts and src1 must have the same row length", as_, b)
    if not tiles(ids.ne[0], b.ne[1]):
        raise fail(Op.MUL_MAT_ID, "ids.ne[0] (experts used) must be a multiple of src1.ne[1]", b, ids)
    return GGMLType.F32, (as_.ne[1], ids.ne[0], b.ne[2], 1)


define(Op.MUL_MAT_ID, (3, 3), _mul_mat_id)


def mul_mat_id(as_: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    """Per token t and slot e: result[:, e, t] = as_[:, :, ids[e, t]] x b[:, e % b.ne[1], t]."""
    return record(Op.MUL_MAT_ID, (as_, b, ids))


def _out_prod(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.OUT_PROD, "src0", WEIGHT_TYPES)
    b = need(srcs[1], Op.OUT_PROD, "src1", FLOAT_TYPES)
    if a.ne[1] != b.ne[1] or not (tiles(b.ne[2], a.ne[2]) and tiles(b.ne[3], a.ne[3])):
        raise fail(Op.OUT_PROD, "src0 [m, k, ...] and src1 [n, k, ...] must share k and broadcast batches", a, b)
    return GGMLType.F32, (a.ne[0], b.ne[0], b.ne[2], b.ne[3])


define(Op.OUT_PROD, (2, 2), _out_prod)


def out_prod(a: Tensor, b: Tensor) -> Tensor:
    """result[i, j] = sum_k a[i, k] * b[j, k]: a [m, k], b [n, k] -> [m, n] (batched like mul_mat)."""
    return record(Op.OUT_PROD, (a, b))
