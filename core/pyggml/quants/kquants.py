"""ggml's K-quants (super-blocks of 256: Q2_K ... Q8_K) and IQ4_XS."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyggml.quants.common import (
    F32,
    GROUP_MAX_EPS,
    KVALUES_IQ4NL,
    QK_K,
    U8,
    Arr,
    absmax_signed,
    best_index_iq4nl,
    f16_at,
    f16_bytes,
    f32,
    make_q3_quants,
    make_qkx2_quants,
    make_qx_quants_rmse1,
    nearest_int,
    pack_nibbles,
    seqsum,
    unpack_nibbles,
)

# ---------------------------------------------------------------------------------------------------------------
# K-quants (super-blocks of 256)
# ---------------------------------------------------------------------------------------------------------------


def pack_2bit(L: Arr) -> U8:
    """(nb, 256) values 0..3 -> (nb, 64): per 128 chunk, byte l holds elements l, l+32, l+64, l+96."""
    q = L.astype(np.uint8).reshape(-1, 2, 4, 32)
    out = q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)
    return out.reshape(-1, 64).astype(np.uint8)


def unpack_2bit(qs: U8) -> U8:
    q = qs.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return (q & 3).reshape(-1, QK_K).astype(np.uint8)


def q2_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    xg = x.reshape(nb * 16, 16)
    Ls, sc, mins = make_qkx2_quants(xg, np.abs(xg), 3, -0.5, 0.1, 15, True)
    sc, mins = sc.reshape(nb, 16), mins.reshape(nb, 16)
    max_scale = np.maximum(sc.max(axis=1), f32(0))
    max_min = np.maximum(mins.max(axis=1), f32(0))
    has_s, has_m = max_scale > 0, max_min > 0
    q4 = f32(15)
    with np.errstate(all="ignore"):
        ls = np.where(has_s[:, None], nearest_int((q4 / max_scale)[:, None] * sc), 0)
        lm = np.where(has_m[:, None], nearest_int((q4 / max_min)[:, None] * mins), 0)
        dh = f16_bytes(np.where(has_s, max_scale / q4, f32(0)))
        mh = f16_bytes(np.where(has_m, max_min / q4, f32(0)))
    scales = ((ls & 0xFF) | ((lm << 4) & 0xFF)).astype(np.uint8)
    d = f16_at(dh, 0)[:, None] * (scales & 0x0F).astype(np.float32, copy=False)
    dm = f16_at(mh, 0)[:, None] * (scales >> 4).astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        l = np.clip(nearest_int((xb + dm[:, :, None]) / d[:, :, None]), 0, 3)
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 16, 16)).reshape(nb, QK_K)
    return np.concatenate([scales, pack_2bit(L), dh, mh], axis=1)


def q2_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    sc = b[:, 0:16]
    d, dmin = f16_at(b, 80), f16_at(b, 82)
    dl = (d[:, None] * (sc & 0x0F).astype(np.float32, copy=False))[:, :, None]
    ml = (dmin[:, None] * (sc >> 4).astype(np.float32, copy=False))[:, :, None]
    q = unpack_2bit(b[:, 16:80]).reshape(nb, 16, 16).astype(np.float32, copy=False)
    return (dl * q - ml).reshape(nb, QK_K).astype(np.float32, copy=False)


def q3_k_scales(s: U8) -> npt.NDArray[np.int32]:
    """12 packed bytes -> 16 six-bit scales (minus 32)."""
    nb = s.shape[0]
    low = np.concatenate([s[:, 0:8] & 0x0F, s[:, 0:8] >> 4], axis=1)  # j < 8 low nibble, j >= 8 high nibble
    hi = (s[:, 8:12].reshape(nb, 1, 4) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)) & 3
    out: npt.NDArray[np.int32] = (low | (hi.reshape(nb, 16) << 4)).astype(np.int32) - np.int32(32)
    return out


def q3_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    Ls, sc = make_q3_quants(x.reshape(nb * 16, 16), 4)
    sc = sc.reshape(nb, 16)
    max_scale, _ = absmax_signed(sc)
    has = max_scale != 0
    with np.errstate(all="ignore"):
        iscale = f32(-32) / max_scale
        l = np.clip(nearest_int(iscale[:, None] * sc), -32, 31) + 32
        dh = f16_bytes(np.where(has, f32(1) / iscale, f32(0)))
    l = np.where(has[:, None], l, 0).astype(np.uint8)
    hb = (l >> 4).reshape(nb, 4, 4) << np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)
    packed_hi = hb[:, 0] | hb[:, 1] | hb[:, 2] | hb[:, 3]
    scales = np.concatenate([pack_nibbles(l[:, :8], l[:, 8:]), packed_hi], axis=1).astype(np.uint8)
    scales = np.where(has[:, None], scales, 0).astype(np.uint8)
    d = f16_at(dh, 0)[:, None] * q3_k_scales(scales).astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        lq = np.clip(nearest_int(xb / d[:, :, None]), -4, 3) + 4
    L = np.where((d != 0)[:, :, None], lq, Ls.reshape(nb, 16, 16)).reshape(nb, QK_K)
    high = (L > 3).reshape(nb, 8, 32).astype(np.uint8)  # element j -> byte j%32, bit j//32
    hmask = (high << np.arange(8, dtype=np.uint8).reshape(1, 8, 1)).sum(axis=1, dtype=np.uint8)
    L = np.where(L > 3, L - 4, L)
    return np.concatenate([hmask, pack_2bit(L), scales, dh], axis=1)


def q3_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = f16_at(b, 108)
    dl = (d[:, None] * q3_k_scales(b[:, 96:108]).astype(np.float32, copy=False))[:, :, None]
    low = unpack_2bit(b[:, 32:96]).astype(np.int8)
    high = (b[:, 0:32].reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    q = low - ((high.reshape(nb, QK_K) ^ 1) << 2).astype(np.int8)
    return (dl * q.reshape(nb, 16, 16).astype(np.float32, copy=False)).reshape(nb, QK_K).astype(np.float32, copy=False)


def k4_scales_pack(ls: Arr, lm: Arr) -> U8:
    """8 six-bit scales and mins -> ggml's 12-byte K_SCALE layout."""
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    first = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    second = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    third = (ls[:, 4:] & 0x0F) | ((lm[:, 4:] & 0x0F) << 4)
    return np.concatenate([first, second, third], axis=1).astype(np.uint8)


def k4_scales_unpack(s: U8) -> tuple[U8, U8]:
    """get_scale_min_k4 for j = 0..7: (scales, mins), each (nb, 8)."""
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(np.uint8), mn.astype(np.uint8)


def qkx_superblock(x: F32, nmax: int, rmin: float, nstep: int) -> tuple[U8, U8, npt.NDArray[np.int32]]:
    """Shared part of Q4_K / Q5_K: (d and dmin bytes, 12 scale bytes, L (nb, 256))."""
    nb = x.shape[0]
    xg = x.reshape(nb * 8, 32)
    av_x = np.sqrt(seqsum(xg * xg) / f32(32))
    w = av_x[:, None] + np.abs(xg)
    Ls, sc, mins = make_qkx2_quants(xg, w, nmax, rmin, 0.1, nstep, False)
    sc, mins = sc.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale = np.maximum(sc.max(axis=1), f32(0))
    max_min = np.maximum(mins.max(axis=1), f32(0))
    with np.errstate(all="ignore"):
        inv_scale = np.where(max_scale > 0, f32(63) / max_scale, f32(0)).astype(np.float32, copy=False)
        inv_min = np.where(max_min > 0, f32(63) / max_min, f32(0)).astype(np.float32, copy=False)
        ls = np.minimum(nearest_int(inv_scale[:, None] * sc) & 0xFF, 63)
        lm = np.minimum(nearest_int(inv_min[:, None] * mins) & 0xFF, 63)
    dh = f16_bytes(max_scale / f32(63))
    mh = f16_bytes(max_min / f32(63))
    d = f16_at(dh, 0)[:, None] * ls.astype(np.float32, copy=False)
    dm = f16_at(mh, 0)[:, None] * lm.astype(np.float32, copy=False)
    xb = x.reshape(nb, 8, 32)
    with np.errstate(all="ignore"):
        l = np.clip(nearest_int((xb + dm[:, :, None]) / d[:, :, None]), 0, nmax)
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 8, 32)).reshape(nb, QK_K).astype(np.int32)
    return np.concatenate([dh, mh], axis=1), k4_scales_pack(ls, lm), L


def q4_k_quant(x: F32) -> U8:
    dmin, scales, L = qkx_superblock(x, 15, -1.0, 20)
    q = L.reshape(-1, 4, 2, 32)
    return np.concatenate([dmin, scales, pack_nibbles(q[:, :, 0], q[:, :, 1]).reshape(-1, 128)], axis=1)


def k_dequant(b: U8, q: U8) -> F32:
    nb = b.shape[0]
    d, dmin = f16_at(b, 0), f16_at(b, 2)
    sc, mn = k4_scales_unpack(b[:, 4:16])
    dl = (d[:, None] * sc.astype(np.float32, copy=False))[:, :, None]
    ml = (dmin[:, None] * mn.astype(np.float32, copy=False))[:, :, None]
    return (
        (dl * q.reshape(nb, 8, 32).astype(np.float32, copy=False) - ml).reshape(nb, QK_K).astype(np.float32, copy=False)
    )


def q4_k_dequant(b: U8) -> F32:
    qs = b[:, 16:144].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return k_dequant(b, (qs & 0x0F).astype(np.uint8))


def q5_k_quant(x: F32) -> U8:
    dmin, scales, L = qkx_superblock(x, 31, -0.5, 15)
    q = L.reshape(-1, 4, 2, 32)  # chunk c of 64: (l1, l2) = elements (j, j+32)
    high = (q > 15).astype(np.uint8) << (
        2 * np.arange(4, dtype=np.uint8).reshape(1, 4, 1, 1) + np.arange(2, dtype=np.uint8).reshape(1, 1, 2, 1)
    )
    qh = high.reshape(-1, 8, 32).sum(axis=1, dtype=np.uint8)
    ql = pack_nibbles(q[:, :, 0], q[:, :, 1]).reshape(-1, 128)
    return np.concatenate([dmin, scales, qh, ql], axis=1)


def q5_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    ql = b[:, 48:176].reshape(nb, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    qh = b[:, 16:48].reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    q = (ql & 0x0F).reshape(nb, 8, 32) | ((qh & 1) << 4)
    return k_dequant(b, q.astype(np.uint8))


def q6_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    Ls, sc = make_qx_quants_rmse1(x.reshape(nb * 16, 16), 32)
    sc = sc.reshape(nb, 16)
    max_scale, max_abs = absmax_signed(sc)
    zero = max_abs < GROUP_MAX_EPS
    with np.errstate(all="ignore"):
        iscale = f32(-128) / max_scale
        dh = f16_bytes(f32(1) / iscale)
        scales = np.minimum(nearest_int(iscale[:, None] * sc), 127)
    d = f16_at(dh, 0)[:, None] * scales.astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        l = np.clip(nearest_int(xb / d[:, :, None]), -32, 31) + 32
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 16, 16)).reshape(nb, 2, 4, 32).astype(np.uint8)
    ql = np.concatenate([pack_nibbles(L[:, :, 0], L[:, :, 2]), pack_nibbles(L[:, :, 1], L[:, :, 3])], axis=2).reshape(
        nb, 128
    )
    h = L >> 4
    qh = (h[:, :, 0] | (h[:, :, 1] << 2) | (h[:, :, 2] << 4) | (h[:, :, 3] << 6)).reshape(nb, 64)
    out = np.concatenate([ql, qh, (scales & 0xFF).astype(np.uint8), dh], axis=1).astype(np.uint8)
    out[zero] = 0
    return out


def q6_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = f16_at(b, 208)
    sc = b[:, 192:208].view(np.int8).astype(np.float32, copy=False)
    ql = b[:, 0:128].reshape(nb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    low = (ql & 0x0F).reshape(nb, 2, 4, 32)  # (l+0, l+32) low nibbles, then (l+64, l+96) high nibbles
    qh = b[:, 128:192].reshape(nb, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    q = (low | ((qh & 3) << 4)).astype(np.int8) - np.int8(32)
    dl = (d[:, None] * sc)[:, :, None]
    return (dl * q.reshape(nb, 16, 16).astype(np.float32, copy=False)).reshape(nb, QK_K).astype(np.float32, copy=False)


def q8_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    mx, amax = absmax_signed(x)
    zero = amax == 0
    with np.errstate(all="ignore"):
        iscale = f32(-127) / mx
        q = np.minimum(nearest_int(iscale[:, None] * x), 127)
        d = (f32(1) / iscale).astype("<f4")
    q = np.where(zero[:, None], 0, q).astype(np.int8)
    d = np.where(zero, f32(0), d).astype("<f4")
    bsums = q.reshape(nb, 16, 16).astype(np.int32).sum(axis=2).astype("<i2")
    return np.concatenate(
        [d.reshape(nb, 1).view(np.uint8), q.view(np.uint8), bsums.view(np.uint8).reshape(nb, 32)], axis=1
    )


def q8_k_dequant(b: U8) -> F32:
    d = np.ascontiguousarray(b[:, 0:4]).view("<f4")[:, 0].astype(np.float32, copy=False)
    return (d[:, None] * b[:, 4:260].view(np.int8).astype(np.float32, copy=False)).astype(np.float32, copy=False)


def iq4_xs_quant(x: F32) -> U8:
    # quantize_iq4_xs without importance: per 32-block search of 15 scales, then 6-bit scales vs a shared d.
    nb = x.shape[0]
    xg = x.reshape(nb * 8, 32)
    v0 = KVALUES_IQ4NL[0]
    mx, amax = absmax_signed(xg)
    zero = amax < GROUP_MAX_EPS
    w = xg * xg
    with np.errstate(all="ignore"):
        d = -mx / v0
        idv = f32(1) / d
        q = KVALUES_IQ4NL[best_index_iq4nl(idv[:, None] * xg)]
        wq = w * q
        sumqx, sumq2 = seqsum(wq * xg), seqsum(wq * q)
        d = np.where(sumq2 > 0, sumqx / sumq2, f32(0)).astype(np.float32, copy=False)
        best = d * sumqx
        for itry in range(-7, 8):
            idv = f32(itry + int(v0)) / mx
            q = KVALUES_IQ4NL[best_index_iq4nl(idv[:, None] * xg)]
            wq = w * q
            sumqx, sumq2 = seqsum(wq * xg), seqsum(wq * q)
            upd = (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
            d = np.where(upd, sumqx / sumq2, d).astype(np.float32, copy=False)
            best = np.where(upd, d * sumqx, best).astype(np.float32, copy=False)
    sc = np.where(zero, f32(0), d).astype(np.float32, copy=False).reshape(nb, 8)
    max_scale, _ = absmax_signed(sc)
    with np.errstate(all="ignore"):
        dsup = -max_scale / f32(32)
        idsup = np.where(dsup != 0, f32(1) / dsup, f32(0)).astype(np.float32, copy=False)
        l = np.clip(nearest_int(idsup[:, None] * sc), -32, 31)
        dl = dsup[:, None] * l.astype(np.float32, copy=False)
        idl = np.where(dl != 0, f32(1) / dl, f32(0)).astype(np.float32, copy=False)
        L = best_index_iq4nl(idl[:, :, None] * x.reshape(nb, 8, 32))
    l = (l + 32).astype(np.uint16)
    scales_l = pack_nibbles(l[:, 0::2], l[:, 1::2])
    scales_h = ((l >> 4) << (2 * np.arange(8, dtype=np.uint16))[None, :]).sum(axis=1, dtype=np.uint16).astype("<u2")
    qs = pack_nibbles(L[:, :, :16], L[:, :, 16:]).reshape(nb, 128)
    return np.concatenate([f16_bytes(dsup), scales_h.reshape(nb, 1).view(np.uint8), scales_l, qs], axis=1)


def iq4_xs_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = f16_at(b, 0)
    sh = np.ascontiguousarray(b[:, 2:4]).view("<u2")[:, 0].astype(np.int32)
    sl = unpack_nibbles(b[:, 4:8])  # (nb, 8): low nibbles (even blocks) then high nibbles (odd blocks)
    sl = np.stack([sl[:, :4], sl[:, 4:]], axis=2).reshape(nb, 8).astype(np.int32)
    ls = sl | (((sh[:, None] >> (2 * np.arange(8))[None, :]) & 3) << 4)
    dl = (d[:, None] * (ls - 32).astype(np.float32, copy=False))[:, :, None]
    q = b[:, 8:136].reshape(nb, 8, 16)
    vals: F32 = KVALUES_IQ4NL[np.concatenate([q & 0x0F, q >> 4], axis=2)]
    out: F32 = (dl * vals).reshape(nb, QK_K).astype(np.float32, copy=False)
    return out


