"""ggml's 32-element block types (Q4_0 ... Q8_1), IQ4_NL and MXFP4."""

from __future__ import annotations

import numpy as np

from pyggml.quants.common import (
    F32,
    GROUP_MAX_EPS,
    KVALUES_IQ4NL,
    KVALUES_MXFP4,
    U8,
    absmax_signed,
    best_index_iq4nl,
    f16_at,
    f16_bytes,
    f32,
    first_max,
    first_min,
    pack_nibbles,
    roundf,
    seqsum,
    trunc_to_u8,
    unpack_nibbles,
)

# ---------------------------------------------------------------------------------------------------------------
# 32-element legacy types
# ---------------------------------------------------------------------------------------------------------------


def inverse(d: F32) -> F32:
    """ggml's `id = d ? 1.0f/d : 0.0f`, per block."""
    with np.errstate(divide="ignore"):
        return np.where(d != 0, f32(1) / d, f32(0)).astype(np.float32, copy=False)


def levels(v: F32, top: int) -> U8:
    """ggml's `MIN(top, (int8_t)(v))` of the 4/5-bit quantisers: truncate to int8, clamp at `top`."""
    return np.minimum(trunc_to_u8(v).astype(np.int8), top).astype(np.uint8)


def q4_0_quant(x: F32) -> U8:
    mx, _ = absmax_signed(x)
    d = mx / f32(-8)
    idv = inverse(d)
    q = levels(x * idv[:, None] + f32(8.5), 15)
    return np.concatenate([f16_bytes(d), pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def q4_0_dequant(b: U8) -> F32:
    d = f16_at(b, 0)
    q = unpack_nibbles(b[:, 2:18]).astype(np.int8) - np.int8(8)
    return (q.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def q4_1_quant(x: F32) -> U8:
    mn, mx = first_min(x), first_max(x)
    d = (mx - mn) / f32(15)
    idv = inverse(d)
    q = levels((x - mn[:, None]) * idv[:, None] + f32(0.5), 15)
    return np.concatenate([f16_bytes(d), f16_bytes(mn), pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def q4_1_dequant(b: U8) -> F32:
    d, m = f16_at(b, 0), f16_at(b, 2)
    q = unpack_nibbles(b[:, 4:20]).astype(np.float32, copy=False)
    return (q * d[:, None] + m[:, None]).astype(np.float32, copy=False)


def qh_bits(q: U8) -> U8:
    """Bit 4 of each of 32 quants -> a little-endian uint32 (element j -> bit j), as 4 bytes."""
    return np.packbits((q >> 4) & 1, axis=1, bitorder="little")


def qh_unbits(qh: U8) -> U8:
    return np.unpackbits(qh, axis=1, bitorder="little")


def q5_0_quant(x: F32) -> U8:
    mx, _ = absmax_signed(x)
    d = mx / f32(-16)
    idv = inverse(d)
    q = levels(x * idv[:, None] + f32(16.5), 31)
    return np.concatenate([f16_bytes(d), qh_bits(q), pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def q5_0_dequant(b: U8) -> F32:
    d = f16_at(b, 0)
    q = unpack_nibbles(b[:, 6:22]) | (qh_unbits(b[:, 2:6]) << 4)
    return ((q.astype(np.int8) - np.int8(16)).astype(np.float32, copy=False) * d[:, None]).astype(
        np.float32, copy=False
    )


def q5_1_quant(x: F32) -> U8:
    mn, mx = first_min(x), first_max(x)
    d = (mx - mn) / f32(31)
    idv = inverse(d)
    q = trunc_to_u8((x - mn[:, None]) * idv[:, None] + f32(0.5))  # no clamp in ggml
    return np.concatenate([f16_bytes(d), f16_bytes(mn), qh_bits(q), pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def q5_1_dequant(b: U8) -> F32:
    d, m = f16_at(b, 0), f16_at(b, 2)
    q = (unpack_nibbles(b[:, 8:24]) | (qh_unbits(b[:, 4:8]) << 4)).astype(np.float32, copy=False)
    return (q * d[:, None] + m[:, None]).astype(np.float32, copy=False)


def q8_scale(x: F32) -> tuple[F32, F32]:
    amax = np.abs(x).max(axis=1)
    d = amax / f32(127)
    idv = inverse(d)
    return d.astype(np.float32, copy=False), roundf(x * idv[:, None])


def q8_0_quant(x: F32) -> U8:
    d, q = q8_scale(x)
    return np.concatenate([f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)


def q8_0_dequant(b: U8) -> F32:
    d = f16_at(b, 0)
    return (b[:, 2:34].view(np.int8).astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def q8_1_quant(x: F32) -> U8:
    d, q = q8_scale(x)
    qi = q.astype(np.int8)
    s = qi.astype(np.int32).sum(axis=1).astype(np.float32, copy=False) * d
    return np.concatenate([f16_bytes(d), f16_bytes(s), qi.view(np.uint8)], axis=1)


def q8_1_dequant(b: U8) -> F32:
    d = f16_at(b, 0)  # the stored s = d*sum(q) is a by-product for dot products, not needed here
    return (b[:, 4:36].view(np.int8).astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def iq4_nl_quant(x: F32) -> U8:
    # quantize_row_iq4_nl_ref: ntry = -1, weights x^2, one pass at d = max/values[0], no refinement.
    mx, amax = absmax_signed(x)
    zero = amax < GROUP_MAX_EPS
    with np.errstate(all="ignore"):
        d = mx / KVALUES_IQ4NL[0]
        idv = f32(1) / d
        L = best_index_iq4nl(idv[:, None] * x)
        q = KVALUES_IQ4NL[L]
        wq = (x * x) * q
        sumqx = seqsum(wq * x)
        sumq2 = seqsum(wq * q)
        scale = np.where(sumq2 > 0, sumqx / sumq2, f32(0)).astype(np.float32, copy=False)
    scale = np.where(zero, f32(0), scale).astype(np.float32, copy=False)
    # ggml skips an all-zero block without writing its L, so the nibbles of the previous block (in the same
    # call) are packed again; before any non-zero block the C buffer is uninitialised, here zero.
    n = x.shape[0]
    src = np.maximum.accumulate(np.where(zero, -1, np.arange(n)))
    L = np.where((src >= 0)[:, None], L[np.maximum(src, 0)], 0)
    return np.concatenate([f16_bytes(scale), pack_nibbles(L[:, :16], L[:, 16:])], axis=1)


def iq4_nl_dequant(b: U8) -> F32:
    d = f16_at(b, 0)
    return (d[:, None] * KVALUES_IQ4NL[unpack_nibbles(b[:, 2:18])]).astype(np.float32, copy=False)


def e8m0_half(e: U8) -> F32:
    e32 = e.astype(np.uint32)
    bits = np.where(e32 < 2, np.uint32(0x00200000) << e32, (e32 - 1) << np.uint32(23)).astype(np.uint32)
    return bits.view(np.float32)


def mxfp4_quant(x: F32) -> U8:
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ex = np.floor(np.log2(amax)) - f32(2) + f32(127)
        e = np.where(amax > 0, np.trunc(ex).astype(np.int64) & 0xFF, 0).astype(np.uint8)
    d = e8m0_half(e)
    errs = np.abs(KVALUES_MXFP4[None, None, :] * d[:, None, None] - x[:, :, None])
    q = np.argmin(errs, axis=-1)  # first minimum, as the strict `<` scan
    return np.concatenate([e[:, None], pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def mxfp4_dequant(b: U8) -> F32:
    d = e8m0_half(b[:, 0])
    return (KVALUES_MXFP4[unpack_nibbles(b[:, 1:17])] * d[:, None]).astype(np.float32, copy=False)


