"""Attention pieces: SOFT_MAX (mask, scale, ALiBi, sinks), DIAG_MASK_INF / DIAG_MASK_ZERO, FLASH_ATTN_EXT."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pyggml.ops.base import Op, ShapeRule, check_types, define, fail, need, record, tiles
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]
MASK_TYPES = frozenset({GGMLType.F16, GGMLType.F32})
KV_TYPES = frozenset({GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0,
                      GGMLType.Q5_1, GGMLType.Q8_0})


class Alibi(NamedTuple):
    """ALiBi's slopes of SOFT_MAX and FLASH_ATTN_EXT (max_bias): head h < n_head_log2 multiplies its mask by
    m0^(h + 1), the others by m1^(2 (h - n_head_log2) + 1). Backends pass these three to their kernels, which raise
    m0 or m1 to the head's power in float; the cpu plugin's C (norm.c) computes the same three values itself."""

    n_head_log2: int
    m0: float
    m1: float

    def slope(self, h: int) -> float:
        """Head h's slope in float64 (the reference's precision)."""
        return self.m0 ** (h + 1) if h < self.n_head_log2 else self.m1 ** (2 * (h - self.n_head_log2) + 1)


def alibi(n_head: int, max_bias: float) -> Alibi:
    """ALiBi's parameters for n_head heads, as ggml defines them: n_head_log2 = 2^floor(log2(n_head)),
    m0 = 2^(-max_bias / n_head_log2), m1 = 2^(-(max_bias / 2) / n_head_log2), with max_bias a float32 (ggml keeps op
    parameters as float) and m0, m1 rounded to float32. The exponents are exact (a power-of-two divisor), so m0 and
    m1 are the correctly rounded powers; ggml's powf (and the cpu plugin's C, which follows it) gives the same bits
    but for about 1 case in 700, where libm's powf is one ulp off. Without ALiBi (max_bias <= 0) m0 = m1 = 1: every
    slope is 1 by the same formula, so a kernel needs no separate case."""
    if max_bias <= 0.0 or n_head <= 0:
        return Alibi(1, 1.0, 1.0)
    n = 1 << (n_head.bit_length() - 1)
    mb = float(np.float32(max_bias))
    return Alibi(n, float(np.float32(2.0 ** (-mb / n))), float(np.float32(2.0 ** (-(mb / 2.0) / n))))


KEY_SPLIT_GROUPS = 512
"""Work groups a device kernel's key splits aim at where (query row, head, batch) triples are fewer."""
KEY_SPLIT_MIN_BLOCKS = 4
"""Blocks of keys a split takes at least, so that its work outweighs its record and the join."""
KEY_SPLIT_MAX = 64
"""Most splits of one (query row, head, batch): bounds the records the join reads."""


def key_splits(rows: int, n_kv: int, block: int) -> int:
    """How many parts the OpenCL / CUDA and Vulkan / Metal FLASH_ATTN_EXT kernels split the keys into for `rows`
    (query row, head, batch) triples, one work group each, over n_kv keys walked `block` at a time: 1 where the rows
    fill KEY_SPLIT_GROUPS work groups (prompts) or the keys are few, else enough to fill them (decode at long
    contexts), each part of at least KEY_SPLIT_MIN_BLOCKS blocks and at most KEY_SPLIT_MAX parts."""
    blocks = -(-n_kv // block)
    return max(1, min(-(-KEY_SPLIT_GROUPS // rows), blocks // KEY_SPLIT_MIN_BLOCKS, KEY_SPLIT_MAX))


@dataclass(frozen=True, slots=True)
class SoftMaxParams:
    scale: float = 1.0
    max_bias: float = 0.0


def _soft_max(srcs: Srcs, p: SoftMaxParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.SOFT_MAX, "src0", frozenset({GGMLType.F32}))
    mask = srcs[1] if len(srcs) > 1 else None
    sinks = srcs[2] if len(srcs) > 2 else None
    if mask is not None:
        check_types(Op.SOFT_MAX, mask, MASK_TYPES, "src1 (mask)")
        if not mask.is_contiguous_rows() or mask.ne[0] != a.ne[0] or mask.ne[1] < a.ne[1]:
            raise fail(Op.SOFT_MAX, "mask rows must be contiguous, as long as src0's and cover its ne[1]", a, mask)
        if not (tiles(a.ne[2], mask.ne[2]) and tiles(a.ne[3], mask.ne[3])):
            raise fail(Op.SOFT_MAX, "mask dims 2 and 3 must broadcast into src0's", a, mask)
    if p.max_bias > 0 and mask is None:
        raise fail(Op.SOFT_MAX, "ALiBi (max_bias > 0) needs a mask", a)
    if sinks is not None:
        check_types(Op.SOFT_MAX, sinks, frozenset({GGMLType.F32}), "src2 (sinks)")
        if sinks.nelements() != a.ne[2]:
            raise fail(Op.SOFT_MAX, "sinks need one value per head (src0.ne[2])", a, sinks)
    return a.type, a.ne


define(Op.SOFT_MAX, (1, 3), _soft_max, SoftMaxParams, can_inplace=True)


def soft_max(a: Tensor, mask: Tensor | None = None, scale: float = 1.0, max_bias: float = 0.0,
             sinks: Tensor | None = None, *, inplace: bool = False) -> Tensor:
    """softmax(a * scale + slope_h * mask) over each row, with head h = dim 2; mask rows broadcast over dims 2, 3
    (ne[1] rows used); ALiBi slopes from max_bias; an optional per-head sink logit joins each row's denominator."""
    return record(Op.SOFT_MAX, (a, mask, sinks), SoftMaxParams(float(scale), float(max_bias)), inplace=inplace)


@dataclass(frozen=True, slots=True)
class DiagMaskParams:
    n_past: int


def _diag_mask(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, p: DiagMaskParams) -> tuple[GGMLType, Ne]:
        a = need(srcs[0], op, "src0", frozenset({GGMLType.F32}))
        if p.n_past < 0:
            raise fail(op, f"n_past={p.n_past} must not be negative", a)
        return a.type, a.ne

    return infer


define(Op.DIAG_MASK_INF, (1, 1), _diag_mask(Op.DIAG_MASK_INF), DiagMaskParams, can_inplace=True)
define(Op.DIAG_MASK_ZERO, (1, 1), _diag_mask(Op.DIAG_MASK_ZERO), DiagMaskParams, can_inplace=True)


def diag_mask_inf(a: Tensor, n_past: int, *, inplace: bool = False) -> Tensor:
    """Elements with column index > n_past + row index become -inf (causal mask)."""
    return record(Op.DIAG_MASK_INF, (a,), DiagMaskParams(int(n_past)), inplace=inplace)


def diag_mask_zero(a: Tensor, n_past: int, *, inplace: bool = False) -> Tensor:
    """Elements with column index > n_past + row index become 0."""
    return record(Op.DIAG_MASK_ZERO, (a,), DiagMaskParams(int(n_past)), inplace=inplace)


@dataclass(frozen=True, slots=True)
class FlashAttnParams:
    scale: float
    max_bias: float = 0.0
    logit_softcap: float = 0.0


def _flash_attn(srcs: Srcs, p: FlashAttnParams) -> tuple[GGMLType, Ne]:
    op = Op.FLASH_ATTN_EXT
    q = need(srcs[0], op, "q")
    k = need(srcs[1], op, "k")
    v = need(srcs[2], op, "v")
    mask = srcs[3] if len(srcs) > 3 else None
    sinks = srcs[4] if len(srcs) > 4 else None
    check_types(op, q, frozenset({GGMLType.F32}), "q")
    check_types(op, k, KV_TYPES, "k")
    check_types(op, v, KV_TYPES, "v")
    if k.ne[0] != q.ne[0]:
        raise fail(op, "q and k need the same head size ne[0]", q, k)
    if v.ne[1] != k.ne[1] or v.ne[2] != k.ne[2] or v.ne[3] != k.ne[3]:
        raise fail(op, "k and v need the same kv length, kv heads and batch", k, v)
    if not (tiles(q.ne[2], k.ne[2]) and tiles(q.ne[3], k.ne[3])):
        raise fail(op, "q heads must be a multiple of kv heads (GQA) and batches must broadcast", q, k)
    if mask is not None:
        check_types(op, mask, MASK_TYPES, "mask")
        if mask.ne[0] != k.ne[1] or mask.ne[1] < q.ne[1] or not (
                tiles(q.ne[2], mask.ne[2]) and tiles(q.ne[3], mask.ne[3])):
            raise fail(op, "mask must be [n_kv, >= n_q, heads | 1, batch | 1]", q, k, mask)
    if p.max_bias > 0 and mask is None:
        raise fail(op, "ALiBi (max_bias > 0) needs a mask", q)
    if sinks is not None:
        check_types(op, sinks, frozenset({GGMLType.F32}), "sinks")
        if sinks.nelements() != q.ne[2]:
            raise fail(op, "sinks need one value per q head", q, sinks)
    return GGMLType.F32, (v.ne[0], q.ne[2], q.ne[1], q.ne[3])


define(Op.FLASH_ATTN_EXT, (3, 5), _flash_attn, FlashAttnParams)


def flash_attn_ext(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float = 1.0,
                   max_bias: float = 0.0, logit_softcap: float = 0.0, sinks: Tensor | None = None) -> Tensor:
    """Fused attention. q [d_k, n_q, n_head, B], k [d_k, n_kv, n_head_kv, B'], v [d_v, n_kv, n_head_kv, B']
    -> f32 [d_v, n_head, n_q, B] (note the permuted result): softmax(softcap(q.k * scale) + slope*mask) . v,
    q head h reads kv head h // (n_head / n_head_kv); softcap(x) = c * tanh(x / c) when logit_softcap = c > 0. A key
    a query's mask sets to -inf is dropped for that query: its K and V are never read (NaN there reaches only the
    queries that see the key)."""
    p = FlashAttnParams(float(scale), float(max_bias), float(logit_softcap))
    return record(Op.FLASH_ATTN_EXT, (q, k, v, mask, sinks), p)
