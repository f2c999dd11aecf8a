"""Reference (de)quantisation of ggml's block types in numpy, byte for byte as ggml's C reference.

Every codec works on all blocks of an array at once (numpy over a leading block axis); only the small, fixed
search loops of ggml's quantizers (the candidate scales of ``make_qkx2_quants`` / ``make_qx_quants``, the
coordinate passes of ``make_q3_quants``) iterate in Python.

Bit-exactness rules followed throughout (they mirror the scalar C code compiled without FMA contraction,
which is how ggml's portable base library is built):

* float32 everywhere, one rounding per C operator, the C evaluation order (``w*x*l`` is ``(w*x)*l``);
* running sums are sequential (``np.cumsum`` accumulates left to right; ``np.sum`` is pairwise and would not
  match);
* ``nearest_int`` is ggml's magic-number trick (round half to even); ``roundf``/``lroundf`` (Q8_0, Q8_1, TQ*)
  round half away from zero; float -> int8/uint8 casts truncate and wrap as the C code does;
* fp32 -> fp16 rounds to nearest even; NaN becomes the quiet NaN 0x7E00 with its sign, as ggml's converter;
* the legacy 4/5-bit types round with ``(int)(v + 8.5f)`` etc., i.e. half *up* after the offset;
* min/max scans keep the first of equal values and the signed max starts from +0.0, so the sign of a zero
  scale or min (0x0000 vs 0x8000) is ggml's, not whatever numpy's min/max return.

Reproduced quirks: an all-zero IQ4_NL block repeats the previous block's nibbles (ggml skips it without
refreshing its index buffer; a leading one is uninitialised memory in C, zeros here); an all-zero Q8_K block
gets zero bsums (left unwritten in C).  Quantisation assumes finite input, as ggml's reference does.

Block layouts are ggml's (``ggml-common.h``), little-endian.  Block sizes and byte sizes come from
``pyggml.types.type_traits``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.types import GGMLType, type_traits

__all__ = ["DEQUANT_TYPES", "QUANT_TYPES", "dequantize", "quantize"]

Arr = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

QK_K = 256
_GROUP_MAX_EPS = np.float32(1e-15)
_KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)
_KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)

_f32 = np.float32


# ---------------------------------------------------------------------------------------------------------------
# scalar helpers, vectorised
# ---------------------------------------------------------------------------------------------------------------


def _f16_bytes(x: Arr) -> U8:
    """float32 (n,) -> (n, 2) little-endian fp16 bytes, round to nearest even, NaN -> 0x7E00 | sign."""
    x32 = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x32.astype("<f2").view("<u2")
    nan = np.isnan(x32)
    if nan.any():
        sign = (x32.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
        h = np.where(nan, sign | np.uint16(0x7E00), h).astype("<u2")
    return np.ascontiguousarray(h).view(np.uint8).reshape(*x32.shape, 2)


def _f16_at(blocks: U8, off: int) -> F32:
    """The fp16 at byte offset `off` of every block, as float32 (nb,)."""
    return np.ascontiguousarray(blocks[:, off : off + 2]).view("<f2")[:, 0].astype(np.float32, copy=False)


def _nearest_int(x: Arr) -> npt.NDArray[np.int32]:
    """ggml's nearest_int: add 1.5*2^23 in float32 and read the mantissa (round half to even for |x| < 2^22)."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = (np.asarray(x, dtype=np.float32) + _f32(12582912.0)).view(np.int32)
    return (v & np.int32(0x007FFFFF)) - np.int32(0x00400000)


def _roundf(x: Arr) -> F32:
    """C roundf: round half away from zero (exactly, no x+0.5 rounding trap)."""
    a = np.abs(x)
    f = np.floor(a)
    r = f + (a - f >= _f32(0.5)).astype(np.float32, copy=False)
    out: F32 = np.copysign(r, x).astype(np.float32, copy=False)
    return out


def _seqsum(a: Arr) -> F32:
    """Left-to-right float32 sum over the last axis, as a C `for` loop accumulates."""
    out: F32 = np.cumsum(a, axis=-1, dtype=np.float32)[..., -1]
    return out


def _absmax_signed(x: Arr) -> tuple[F32, F32]:
    """(value with the largest |value|, its |value|) per row; the first one wins ties, as `if (ax > amax)`."""
    idx = np.argmax(np.abs(x), axis=-1)[..., None]
    mx = np.take_along_axis(x, idx, axis=-1)[..., 0].astype(np.float32, copy=False)
    mx = np.where(mx != 0, mx, _f32(0)).astype(np.float32, copy=False)  # C starts from max = +0.0, never -0.0
    return mx, np.abs(mx)


def _first_min(x: Arr) -> F32:
    """Row minimum as a `if (v < min)` scan finds it: the first of equal values (so -0.0 vs 0.0 is kept)."""
    out: F32 = np.take_along_axis(x, np.argmin(x, axis=-1)[..., None], axis=-1)[..., 0].astype(np.float32)
    return out


def _first_max(x: Arr) -> F32:
    out: F32 = np.take_along_axis(x, np.argmax(x, axis=-1)[..., None], axis=-1)[..., 0].astype(np.float32)
    return out


def _trunc_to_u8(x: Arr) -> U8:
    """C `(uint8_t)(int)(float)` of an in-range float: truncate toward zero, keep the low byte."""
    with np.errstate(invalid="ignore"):
        return (np.trunc(x).astype(np.int64) & 0xFF).astype(np.uint8)


def _pack_nibbles(lo: Arr, hi: Arr) -> U8:
    return ((lo.astype(np.uint8) & 0x0F) | ((hi.astype(np.uint8) & 0x0F) << 4)).astype(np.uint8)


def _unpack_nibbles(qs: U8) -> U8:
    """(nb, m) bytes -> (nb, 2m): all low nibbles, then all high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.uint8)


def _best_index_iq4nl(x: Arr) -> npt.NDArray[np.int64]:
    """best_index_int8 over kvalues_iq4nl: nearest table entry, ties towards the upper one."""
    v = _KVALUES_IQ4NL
    x = np.asarray(x, dtype=np.float32)
    mu = np.clip(np.searchsorted(v, x, side="right"), 1, 15)
    lower = (x - v[mu - 1]) < (v[mu] - x)
    idx = np.where(lower, mu - 1, mu)
    idx = np.where(x >= v[15], 15, idx)
    return np.where(x <= v[0], 0, idx).astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# ggml's scale searches (vectorised over groups = rows of x)
# ---------------------------------------------------------------------------------------------------------------


def _make_qkx2_quants(
    x: F32, weights: F32, nmax: int, rmin: float, rdelta: float, nstep: int, use_mad: bool
) -> tuple[U8, F32, F32]:
    """make_qkx2_quants: asymmetric (scale, min) least-squares search.  Returns (L, scale, the_min)."""
    w = weights
    mn = _first_min(x)
    mn = np.where(mn > 0, _f32(0), mn).astype(np.float32, copy=False)
    mx = _first_max(x)
    sum_w = _seqsum(w)
    sum_x = _seqsum(w * x)
    flat = mx == mn
    fmax = _f32(nmax)

    def err(diff: Arr) -> Arr:
        return np.abs(diff) if use_mad else diff * diff

    with np.errstate(all="ignore"):
        iscale = fmax / (mx - mn)
        scale = _f32(1) / iscale
        L = np.clip(_nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(np.float32, copy=False)
        best = _seqsum(w * err(scale[:, None] * L + mn[:, None] - x))
        for step in range(nstep + 1):
            num = _f32(rmin) + _f32(rdelta) * _f32(step) + fmax
            isc = num / (mx - mn)
            la = np.clip(_nearest_int(isc[:, None] * (x - mn[:, None])), 0, nmax).astype(np.float32, copy=False)
            wl = w * la
            sum_l = _seqsum(wl)
            sum_l2 = _seqsum(wl * la)
            sum_xl = _seqsum(wl * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, _f32(0), this_min).astype(np.float32, copy=False)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(np.float32, copy=False)
            cur = _seqsum(w * err(this_scale[:, None] * la + this_min[:, None] - x))
            upd = (D > 0) & (cur < best)
            L = np.where(upd[:, None], la, L)
            best = np.where(upd, cur, best)
            scale = np.where(upd, this_scale, scale).astype(np.float32, copy=False)
            mn = np.where(upd, this_min, mn).astype(np.float32, copy=False)
    L = np.where(flat[:, None], _f32(0), L)
    scale = np.where(flat, _f32(0), scale).astype(np.float32, copy=False)
    return L.astype(np.uint8), scale, (-mn).astype(np.float32, copy=False)


def _make_qx_quants_rmse1(x: F32, nmax: int) -> tuple[npt.NDArray[np.int32], F32]:
    """make_qx_quants with rmse_type=1 and no importance weights (w = x^2).  Returns (L in [0, 2*nmax), scale)."""
    mx, amax = _absmax_signed(x)
    zero = amax < _GROUP_MAX_EPS
    w = x * x
    wx = w * x
    lo, hi = -nmax, nmax - 1
    with np.errstate(all="ignore"):
        iscale = _f32(-nmax) / mx
        l = np.clip(_nearest_int(iscale[:, None] * x), lo, hi).astype(np.float32, copy=False)
        L = l.astype(np.int32) + nmax
        sumlx = _seqsum(wx * l)
        suml2 = _seqsum((w * l) * l)
        scale = np.where(suml2 != 0, sumlx / suml2, _f32(0)).astype(np.float32, copy=False)
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            isc = -(_f32(nmax) + _f32(0.1) * _f32(step)) / mx
            l = np.clip(_nearest_int(isc[:, None] * x), lo, hi).astype(np.float32, copy=False)
            sumlx = _seqsum(wx * l)
            suml2 = _seqsum((w * l) * l)
            upd = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            L = np.where(upd[:, None], l.astype(np.int32) + nmax, L)
            scale = np.where(upd, sumlx / suml2, scale).astype(np.float32, copy=False)
            best = np.where(upd, scale * sumlx, best).astype(np.float32, copy=False)
    L = np.where(zero[:, None], 0, L).astype(np.int32)
    scale = np.where(zero, _f32(0), scale).astype(np.float32, copy=False)
    return L, scale


def _make_q3_quants(x: F32, nmax: int) -> tuple[npt.NDArray[np.int32], F32]:
    """make_q3_quants with do_rmse: coordinate descent over the elements, up to 5 passes."""
    mx, amax = _absmax_signed(x)
    zero = amax < _GROUP_MAX_EPS
    lo, hi = -nmax, nmax - 1
    w = x * x
    wx = w * x
    with np.errstate(all="ignore"):
        iscale = _f32(-nmax) / mx
        L = np.clip(_nearest_int(iscale[:, None] * x), lo, hi).astype(np.float32, copy=False)
        sumlx = _seqsum(wx * L)
        suml2 = _seqsum((w * L) * L)
        for _ in range(5):
            changed = np.zeros(x.shape[0], dtype=bool)
            for i in range(x.shape[1]):
                wi, xi, wxi, li = w[:, i], x[:, i], wx[:, i], L[:, i]
                slx = sumlx - wxi * li
                sl2 = suml2 - (wi * li) * li
                new_l = np.clip(_nearest_int((xi * sl2) / slx), lo, hi).astype(np.float32, copy=False)
                slx_n = slx + wxi * new_l
                sl2_n = sl2 + (wi * new_l) * new_l
                acc = (slx > 0) & (new_l != li) & (sl2_n > 0) & ((slx_n * slx_n) * suml2 > (sumlx * sumlx) * sl2_n)
                L[:, i] = np.where(acc, new_l, li)
                sumlx = np.where(acc, slx_n, sumlx).astype(np.float32, copy=False)
                suml2 = np.where(acc, sl2_n, suml2).astype(np.float32, copy=False)
                changed |= acc
            if not changed.any():  # a pass without change leaves the state as it was: later passes are no-ops
                break
        scale = np.where(suml2 > 0, sumlx / suml2, _f32(0)).astype(np.float32, copy=False)
    Li = np.where(zero[:, None], 0, L.astype(np.int32) + nmax).astype(np.int32)
    return Li, np.where(zero, _f32(0), scale).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------------------------
# 32-element legacy types
# ---------------------------------------------------------------------------------------------------------------


def _q4_0_quant(x: F32) -> U8:
    mx, _ = _absmax_signed(x)
    d = mx / _f32(-8)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, _f32(1) / d, _f32(0)).astype(np.float32, copy=False)
    q = np.minimum(_trunc_to_u8(x * idv[:, None] + _f32(8.5)).astype(np.int8), 15).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), _pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def _q4_0_dequant(b: U8) -> F32:
    d = _f16_at(b, 0)
    q = _unpack_nibbles(b[:, 2:18]).astype(np.int8) - np.int8(8)
    return (q.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def _q4_1_quant(x: F32) -> U8:
    mn, mx = _first_min(x), _first_max(x)
    d = (mx - mn) / _f32(15)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, _f32(1) / d, _f32(0)).astype(np.float32, copy=False)
    q = np.minimum(_trunc_to_u8((x - mn[:, None]) * idv[:, None] + _f32(0.5)).astype(np.int8), 15).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), _f16_bytes(mn), _pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def _q4_1_dequant(b: U8) -> F32:
    d, m = _f16_at(b, 0), _f16_at(b, 2)
    q = _unpack_nibbles(b[:, 4:20]).astype(np.float32, copy=False)
    return (q * d[:, None] + m[:, None]).astype(np.float32, copy=False)


def _qh_bits(q: U8) -> U8:
    """Bit 4 of each of 32 quants -> a little-endian uint32 (element j -> bit j), as 4 bytes."""
    return np.packbits((q >> 4) & 1, axis=1, bitorder="little")


def _qh_unbits(qh: U8) -> U8:
    return np.unpackbits(qh, axis=1, bitorder="little")


def _q5_0_quant(x: F32) -> U8:
    mx, _ = _absmax_signed(x)
    d = mx / _f32(-16)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, _f32(1) / d, _f32(0)).astype(np.float32, copy=False)
    q = np.minimum(_trunc_to_u8(x * idv[:, None] + _f32(16.5)).astype(np.int8), 31).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), _qh_bits(q), _pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def _q5_0_dequant(b: U8) -> F32:
    d = _f16_at(b, 0)
    q = _unpack_nibbles(b[:, 6:22]) | (_qh_unbits(b[:, 2:6]) << 4)
    return ((q.astype(np.int8) - np.int8(16)).astype(np.float32, copy=False) * d[:, None]).astype(
        np.float32, copy=False
    )


def _q5_1_quant(x: F32) -> U8:
    mn, mx = _first_min(x), _first_max(x)
    d = (mx - mn) / _f32(31)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, _f32(1) / d, _f32(0)).astype(np.float32, copy=False)
    q = _trunc_to_u8((x - mn[:, None]) * idv[:, None] + _f32(0.5))  # no clamp in ggml
    return np.concatenate([_f16_bytes(d), _f16_bytes(mn), _qh_bits(q), _pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def _q5_1_dequant(b: U8) -> F32:
    d, m = _f16_at(b, 0), _f16_at(b, 2)
    q = (_unpack_nibbles(b[:, 8:24]) | (_qh_unbits(b[:, 4:8]) << 4)).astype(np.float32, copy=False)
    return (q * d[:, None] + m[:, None]).astype(np.float32, copy=False)


def _q8_scale(x: F32) -> tuple[F32, F32]:
    amax = np.abs(x).max(axis=1)
    d = amax / _f32(127)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, _f32(1) / d, _f32(0)).astype(np.float32, copy=False)
    return d.astype(np.float32, copy=False), _roundf(x * idv[:, None])


def _q8_0_quant(x: F32) -> U8:
    d, q = _q8_scale(x)
    return np.concatenate([_f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)


def _q8_0_dequant(b: U8) -> F32:
    d = _f16_at(b, 0)
    return (b[:, 2:34].view(np.int8).astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def _q8_1_quant(x: F32) -> U8:
    d, q = _q8_scale(x)
    qi = q.astype(np.int8)
    s = qi.astype(np.int32).sum(axis=1).astype(np.float32, copy=False) * d
    return np.concatenate([_f16_bytes(d), _f16_bytes(s), qi.view(np.uint8)], axis=1)


def _q8_1_dequant(b: U8) -> F32:
    d = _f16_at(b, 0)  # the stored s = d*sum(q) is a by-product for dot products, not needed here
    return (b[:, 4:36].view(np.int8).astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def _iq4_nl_quant(x: F32) -> U8:
    # quantize_row_iq4_nl_ref: ntry = -1, weights x^2, one pass at d = max/values[0], no refinement.
    mx, amax = _absmax_signed(x)
    zero = amax < _GROUP_MAX_EPS
    with np.errstate(all="ignore"):
        d = mx / _KVALUES_IQ4NL[0]
        idv = _f32(1) / d
        L = _best_index_iq4nl(idv[:, None] * x)
        q = _KVALUES_IQ4NL[L]
        wq = (x * x) * q
        sumqx = _seqsum(wq * x)
        sumq2 = _seqsum(wq * q)
        scale = np.where(sumq2 > 0, sumqx / sumq2, _f32(0)).astype(np.float32, copy=False)
    scale = np.where(zero, _f32(0), scale).astype(np.float32, copy=False)
    # ggml skips an all-zero block without writing its L, so the nibbles of the previous block (in the same
    # call) are packed again; before any non-zero block the C buffer is uninitialised, here zero.
    n = x.shape[0]
    src = np.maximum.accumulate(np.where(zero, -1, np.arange(n)))
    L = np.where((src >= 0)[:, None], L[np.maximum(src, 0)], 0)
    return np.concatenate([_f16_bytes(scale), _pack_nibbles(L[:, :16], L[:, 16:])], axis=1)


def _iq4_nl_dequant(b: U8) -> F32:
    d = _f16_at(b, 0)
    return (d[:, None] * _KVALUES_IQ4NL[_unpack_nibbles(b[:, 2:18])]).astype(np.float32, copy=False)


def _e8m0_half(e: Arr) -> F32:
    e32 = e.astype(np.uint32)
    bits = np.where(e32 < 2, np.uint32(0x00200000) << e32, (e32 - 1) << np.uint32(23)).astype(np.uint32)
    return bits.view(np.float32)


def _mxfp4_quant(x: F32) -> U8:
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ex = np.floor(np.log2(amax)) - _f32(2) + _f32(127)
        e = np.where(amax > 0, np.trunc(ex).astype(np.int64) & 0xFF, 0).astype(np.uint8)
    d = _e8m0_half(e)
    errs = np.abs(_KVALUES_MXFP4[None, None, :] * d[:, None, None] - x[:, :, None])
    q = np.argmin(errs, axis=-1)  # first minimum, as the strict `<` scan
    return np.concatenate([e[:, None], _pack_nibbles(q[:, :16], q[:, 16:])], axis=1)


def _mxfp4_dequant(b: U8) -> F32:
    d = _e8m0_half(b[:, 0])
    return (_KVALUES_MXFP4[_unpack_nibbles(b[:, 1:17])] * d[:, None]).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------------------------
# K-quants (super-blocks of 256)
# ---------------------------------------------------------------------------------------------------------------


def _pack_2bit(L: Arr) -> U8:
    """(nb, 256) values 0..3 -> (nb, 64): per 128 chunk, byte l holds elements l, l+32, l+64, l+96."""
    q = L.astype(np.uint8).reshape(-1, 2, 4, 32)
    out = q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)
    return out.reshape(-1, 64).astype(np.uint8)


def _unpack_2bit(qs: U8) -> U8:
    q = qs.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return (q & 3).reshape(-1, QK_K).astype(np.uint8)


def _q2_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    xg = x.reshape(nb * 16, 16)
    Ls, sc, mins = _make_qkx2_quants(xg, np.abs(xg), 3, -0.5, 0.1, 15, True)
    sc, mins = sc.reshape(nb, 16), mins.reshape(nb, 16)
    max_scale = np.maximum(sc.max(axis=1), _f32(0))
    max_min = np.maximum(mins.max(axis=1), _f32(0))
    has_s, has_m = max_scale > 0, max_min > 0
    q4 = _f32(15)
    with np.errstate(all="ignore"):
        ls = np.where(has_s[:, None], _nearest_int((q4 / max_scale)[:, None] * sc), 0)
        lm = np.where(has_m[:, None], _nearest_int((q4 / max_min)[:, None] * mins), 0)
        dh = _f16_bytes(np.where(has_s, max_scale / q4, _f32(0)))
        mh = _f16_bytes(np.where(has_m, max_min / q4, _f32(0)))
    scales = ((ls & 0xFF) | ((lm << 4) & 0xFF)).astype(np.uint8)
    d = _f16_at(dh, 0)[:, None] * (scales & 0x0F).astype(np.float32, copy=False)
    dm = _f16_at(mh, 0)[:, None] * (scales >> 4).astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        l = np.clip(_nearest_int((xb + dm[:, :, None]) / d[:, :, None]), 0, 3)
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 16, 16)).reshape(nb, QK_K)
    return np.concatenate([scales, _pack_2bit(L), dh, mh], axis=1)


def _q2_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    sc = b[:, 0:16]
    d, dmin = _f16_at(b, 80), _f16_at(b, 82)
    dl = (d[:, None] * (sc & 0x0F).astype(np.float32, copy=False))[:, :, None]
    ml = (dmin[:, None] * (sc >> 4).astype(np.float32, copy=False))[:, :, None]
    q = _unpack_2bit(b[:, 16:80]).reshape(nb, 16, 16).astype(np.float32, copy=False)
    return (dl * q - ml).reshape(nb, QK_K).astype(np.float32, copy=False)


def _q3_k_scales(s: U8) -> npt.NDArray[np.int32]:
    """12 packed bytes -> 16 six-bit scales (minus 32)."""
    nb = s.shape[0]
    low = np.concatenate([s[:, 0:8] & 0x0F, s[:, 0:8] >> 4], axis=1)  # j < 8 low nibble, j >= 8 high nibble
    hi = (s[:, 8:12].reshape(nb, 1, 4) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)) & 3
    out: npt.NDArray[np.int32] = (low | (hi.reshape(nb, 16) << 4)).astype(np.int32) - np.int32(32)
    return out


def _q3_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    Ls, sc = _make_q3_quants(x.reshape(nb * 16, 16), 4)
    sc = sc.reshape(nb, 16)
    max_scale, _ = _absmax_signed(sc)
    has = max_scale != 0
    with np.errstate(all="ignore"):
        iscale = _f32(-32) / max_scale
        l = np.clip(_nearest_int(iscale[:, None] * sc), -32, 31) + 32
        dh = _f16_bytes(np.where(has, _f32(1) / iscale, _f32(0)))
    l = np.where(has[:, None], l, 0).astype(np.uint8)
    hb = (l >> 4).reshape(nb, 4, 4) << np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)
    packed_hi = hb[:, 0] | hb[:, 1] | hb[:, 2] | hb[:, 3]
    scales = np.concatenate([_pack_nibbles(l[:, :8], l[:, 8:]), packed_hi], axis=1).astype(np.uint8)
    scales = np.where(has[:, None], scales, 0).astype(np.uint8)
    d = _f16_at(dh, 0)[:, None] * _q3_k_scales(scales).astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        lq = np.clip(_nearest_int(xb / d[:, :, None]), -4, 3) + 4
    L = np.where((d != 0)[:, :, None], lq, Ls.reshape(nb, 16, 16)).reshape(nb, QK_K)
    high = (L > 3).reshape(nb, 8, 32).astype(np.uint8)  # element j -> byte j%32, bit j//32
    hmask = (high << np.arange(8, dtype=np.uint8).reshape(1, 8, 1)).sum(axis=1, dtype=np.uint8)
    L = np.where(L > 3, L - 4, L)
    return np.concatenate([hmask, _pack_2bit(L), scales, dh], axis=1)


def _q3_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = _f16_at(b, 108)
    dl = (d[:, None] * _q3_k_scales(b[:, 96:108]).astype(np.float32, copy=False))[:, :, None]
    low = _unpack_2bit(b[:, 32:96]).astype(np.int8)
    high = (b[:, 0:32].reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    q = low - ((high.reshape(nb, QK_K) ^ 1) << 2).astype(np.int8)
    return (dl * q.reshape(nb, 16, 16).astype(np.float32, copy=False)).reshape(nb, QK_K).astype(np.float32, copy=False)


def _k4_scales_pack(ls: Arr, lm: Arr) -> U8:
    """8 six-bit scales and mins -> ggml's 12-byte K_SCALE layout."""
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    first = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    second = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    third = (ls[:, 4:] & 0x0F) | ((lm[:, 4:] & 0x0F) << 4)
    return np.concatenate([first, second, third], axis=1).astype(np.uint8)


def _k4_scales_unpack(s: U8) -> tuple[U8, U8]:
    """get_scale_min_k4 for j = 0..7: (scales, mins), each (nb, 8)."""
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(np.uint8), mn.astype(np.uint8)


def _qkx_superblock(x: F32, nmax: int, rmin: float, nstep: int) -> tuple[U8, U8, npt.NDArray[np.int32]]:
    """Shared part of Q4_K / Q5_K: (d and dmin bytes, 12 scale bytes, L (nb, 256))."""
    nb = x.shape[0]
    xg = x.reshape(nb * 8, 32)
    av_x = np.sqrt(_seqsum(xg * xg) / _f32(32))
    w = av_x[:, None] + np.abs(xg)
    Ls, sc, mins = _make_qkx2_quants(xg, w, nmax, rmin, 0.1, nstep, False)
    sc, mins = sc.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale = np.maximum(sc.max(axis=1), _f32(0))
    max_min = np.maximum(mins.max(axis=1), _f32(0))
    with np.errstate(all="ignore"):
        inv_scale = np.where(max_scale > 0, _f32(63) / max_scale, _f32(0)).astype(np.float32, copy=False)
        inv_min = np.where(max_min > 0, _f32(63) / max_min, _f32(0)).astype(np.float32, copy=False)
        ls = np.minimum(_nearest_int(inv_scale[:, None] * sc) & 0xFF, 63)
        lm = np.minimum(_nearest_int(inv_min[:, None] * mins) & 0xFF, 63)
    dh = _f16_bytes(max_scale / _f32(63))
    mh = _f16_bytes(max_min / _f32(63))
    d = _f16_at(dh, 0)[:, None] * ls.astype(np.float32, copy=False)
    dm = _f16_at(mh, 0)[:, None] * lm.astype(np.float32, copy=False)
    xb = x.reshape(nb, 8, 32)
    with np.errstate(all="ignore"):
        l = np.clip(_nearest_int((xb + dm[:, :, None]) / d[:, :, None]), 0, nmax)
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 8, 32)).reshape(nb, QK_K).astype(np.int32)
    return np.concatenate([dh, mh], axis=1), _k4_scales_pack(ls, lm), L


def _q4_k_quant(x: F32) -> U8:
    dmin, scales, L = _qkx_superblock(x, 15, -1.0, 20)
    q = L.reshape(-1, 4, 2, 32)
    return np.concatenate([dmin, scales, _pack_nibbles(q[:, :, 0], q[:, :, 1]).reshape(-1, 128)], axis=1)


def _k_dequant(b: U8, q: U8) -> F32:
    nb = b.shape[0]
    d, dmin = _f16_at(b, 0), _f16_at(b, 2)
    sc, mn = _k4_scales_unpack(b[:, 4:16])
    dl = (d[:, None] * sc.astype(np.float32, copy=False))[:, :, None]
    ml = (dmin[:, None] * mn.astype(np.float32, copy=False))[:, :, None]
    return (
        (dl * q.reshape(nb, 8, 32).astype(np.float32, copy=False) - ml).reshape(nb, QK_K).astype(np.float32, copy=False)
    )


def _q4_k_dequant(b: U8) -> F32:
    qs = b[:, 16:144].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return _k_dequant(b, (qs & 0x0F).astype(np.uint8))


def _q5_k_quant(x: F32) -> U8:
    dmin, scales, L = _qkx_superblock(x, 31, -0.5, 15)
    q = L.reshape(-1, 4, 2, 32)  # chunk c of 64: (l1, l2) = elements (j, j+32)
    high = (q > 15).astype(np.uint8) << (
        2 * np.arange(4, dtype=np.uint8).reshape(1, 4, 1, 1) + np.arange(2, dtype=np.uint8).reshape(1, 1, 2, 1)
    )
    qh = high.reshape(-1, 8, 32).sum(axis=1, dtype=np.uint8)
    ql = _pack_nibbles(q[:, :, 0], q[:, :, 1]).reshape(-1, 128)
    return np.concatenate([dmin, scales, qh, ql], axis=1)


def _q5_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    ql = b[:, 48:176].reshape(nb, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    qh = b[:, 16:48].reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    q = (ql & 0x0F).reshape(nb, 8, 32) | ((qh & 1) << 4)
    return _k_dequant(b, q.astype(np.uint8))


def _q6_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    Ls, sc = _make_qx_quants_rmse1(x.reshape(nb * 16, 16), 32)
    sc = sc.reshape(nb, 16)
    max_scale, max_abs = _absmax_signed(sc)
    zero = max_abs < _GROUP_MAX_EPS
    with np.errstate(all="ignore"):
        iscale = _f32(-128) / max_scale
        dh = _f16_bytes(_f32(1) / iscale)
        scales = np.minimum(_nearest_int(iscale[:, None] * sc), 127)
    d = _f16_at(dh, 0)[:, None] * scales.astype(np.float32, copy=False)
    xb = x.reshape(nb, 16, 16)
    with np.errstate(all="ignore"):
        l = np.clip(_nearest_int(xb / d[:, :, None]), -32, 31) + 32
    L = np.where((d != 0)[:, :, None], l, Ls.reshape(nb, 16, 16)).reshape(nb, 2, 4, 32).astype(np.uint8)
    ql = np.concatenate([_pack_nibbles(L[:, :, 0], L[:, :, 2]), _pack_nibbles(L[:, :, 1], L[:, :, 3])], axis=2).reshape(
        nb, 128
    )
    h = L >> 4
    qh = (h[:, :, 0] | (h[:, :, 1] << 2) | (h[:, :, 2] << 4) | (h[:, :, 3] << 6)).reshape(nb, 64)
    out = np.concatenate([ql, qh, (scales & 0xFF).astype(np.uint8), dh], axis=1).astype(np.uint8)
    out[zero] = 0
    return out


def _q6_k_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = _f16_at(b, 208)
    sc = b[:, 192:208].view(np.int8).astype(np.float32, copy=False)
    ql = b[:, 0:128].reshape(nb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    low = (ql & 0x0F).reshape(nb, 2, 4, 32)  # (l+0, l+32) low nibbles, then (l+64, l+96) high nibbles
    qh = b[:, 128:192].reshape(nb, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    q = (low | ((qh & 3) << 4)).astype(np.int8) - np.int8(32)
    dl = (d[:, None] * sc)[:, :, None]
    return (dl * q.reshape(nb, 16, 16).astype(np.float32, copy=False)).reshape(nb, QK_K).astype(np.float32, copy=False)


def _q8_k_quant(x: F32) -> U8:
    nb = x.shape[0]
    mx, amax = _absmax_signed(x)
    zero = amax == 0
    with np.errstate(all="ignore"):
        iscale = _f32(-127) / mx
        q = np.minimum(_nearest_int(iscale[:, None] * x), 127)
        d = (_f32(1) / iscale).astype("<f4")
    q = np.where(zero[:, None], 0, q).astype(np.int8)
    d = np.where(zero, _f32(0), d).astype("<f4")
    bsums = q.reshape(nb, 16, 16).astype(np.int32).sum(axis=2).astype("<i2")
    return np.concatenate(
        [d.reshape(nb, 1).view(np.uint8), q.view(np.uint8), bsums.view(np.uint8).reshape(nb, 32)], axis=1
    )


def _q8_k_dequant(b: U8) -> F32:
    d = np.ascontiguousarray(b[:, 0:4]).view("<f4")[:, 0].astype(np.float32, copy=False)
    return (d[:, None] * b[:, 4:260].view(np.int8).astype(np.float32, copy=False)).astype(np.float32, copy=False)


def _iq4_xs_quant(x: F32) -> U8:
    # quantize_iq4_xs without importance: per 32-block search of 15 scales, then 6-bit scales vs a shared d.
    nb = x.shape[0]
    xg = x.reshape(nb * 8, 32)
    v0 = _KVALUES_IQ4NL[0]
    mx, amax = _absmax_signed(xg)
    zero = amax < _GROUP_MAX_EPS
    w = xg * xg
    with np.errstate(all="ignore"):
        d = -mx / v0
        idv = _f32(1) / d
        q = _KVALUES_IQ4NL[_best_index_iq4nl(idv[:, None] * xg)]
        wq = w * q
        sumqx, sumq2 = _seqsum(wq * xg), _seqsum(wq * q)
        d = np.where(sumq2 > 0, sumqx / sumq2, _f32(0)).astype(np.float32, copy=False)
        best = d * sumqx
        for itry in range(-7, 8):
            idv = _f32(itry + int(v0)) / mx
            q = _KVALUES_IQ4NL[_best_index_iq4nl(idv[:, None] * xg)]
            wq = w * q
            sumqx, sumq2 = _seqsum(wq * xg), _seqsum(wq * q)
            upd = (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
            d = np.where(upd, sumqx / sumq2, d).astype(np.float32, copy=False)
            best = np.where(upd, d * sumqx, best).astype(np.float32, copy=False)
    sc = np.where(zero, _f32(0), d).astype(np.float32, copy=False).reshape(nb, 8)
    max_scale, _ = _absmax_signed(sc)
    with np.errstate(all="ignore"):
        dsup = -max_scale / _f32(32)
        idsup = np.where(dsup != 0, _f32(1) / dsup, _f32(0)).astype(np.float32, copy=False)
        l = np.clip(_nearest_int(idsup[:, None] * sc), -32, 31)
        dl = dsup[:, None] * l.astype(np.float32, copy=False)
        idl = np.where(dl != 0, _f32(1) / dl, _f32(0)).astype(np.float32, copy=False)
        L = _best_index_iq4nl(idl[:, :, None] * x.reshape(nb, 8, 32))
    l = (l + 32).astype(np.uint16)
    scales_l = _pack_nibbles(l[:, 0::2], l[:, 1::2])
    scales_h = ((l >> 4) << (2 * np.arange(8, dtype=np.uint16))[None, :]).sum(axis=1, dtype=np.uint16).astype("<u2")
    qs = _pack_nibbles(L[:, :, :16], L[:, :, 16:]).reshape(nb, 128)
    return np.concatenate([_f16_bytes(dsup), scales_h.reshape(nb, 1).view(np.uint8), scales_l, qs], axis=1)


def _iq4_xs_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = _f16_at(b, 0)
    sh = np.ascontiguousarray(b[:, 2:4]).view("<u2")[:, 0].astype(np.int32)
    sl = _unpack_nibbles(b[:, 4:8])  # (nb, 8): low nibbles (even blocks) then high nibbles (odd blocks)
    sl = np.stack([sl[:, :4], sl[:, 4:]], axis=2).reshape(nb, 8).astype(np.int32)
    ls = sl | (((sh[:, None] >> (2 * np.arange(8))[None, :]) & 3) << 4)
    dl = (d[:, None] * (ls - 32).astype(np.float32, copy=False))[:, :, None]
    q = b[:, 8:136].reshape(nb, 8, 16)
    vals: F32 = _KVALUES_IQ4NL[np.concatenate([q & 0x0F, q >> 4], axis=2)]
    out: F32 = (dl * vals).reshape(nb, QK_K).astype(np.float32, copy=False)
    return out


# ---------------------------------------------------------------------------------------------------------------
# ternary types
# ---------------------------------------------------------------------------------------------------------------


def _tern(x: F32) -> tuple[F32, npt.NDArray[np.int32]]:
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, _f32(1) / amax, _f32(0)).astype(np.float32, copy=False)
    return amax.astype(np.float32, copy=False), _roundf(x * idv[:, None]).astype(np.int32) + 1


_POW3 = np.array([81, 27, 9, 3, 1], dtype=np.int32)


def _tq1_0_quant(x: F32) -> U8:
    nb = x.shape[0]
    d, t = _tern(x)
    a = (t[:, :160].reshape(nb, 5, 32) * _POW3[None, :, None]).sum(axis=1)
    b = (t[:, 160:240].reshape(nb, 5, 16) * _POW3[None, :, None]).sum(axis=1)
    c = (t[:, 240:].reshape(nb, 4, 4) * _POW3[None, :4, None]).sum(axis=1)  # 4 trits, shifted up one
    q = np.concatenate([a, b, c], axis=1) & 0xFF
    q = (q * 256 + 242) // 243
    return np.concatenate([q.astype(np.uint8), _f16_bytes(d)], axis=1)


def _tq1_0_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = _f16_at(b, 52)
    pow3 = np.array([1, 3, 9, 27, 81], dtype=np.uint8)
    a = (b[:, None, 0:32] * pow3[None, :, None]).reshape(nb, 160)
    c = (b[:, None, 32:48] * pow3[None, :, None]).reshape(nb, 80)
    h = (b[:, None, 48:52] * pow3[None, :4, None]).reshape(nb, 16)
    q = np.concatenate([a, c, h], axis=1).astype(np.uint8)
    t = ((q.astype(np.uint16) * 3) >> 8).astype(np.int16) - 1
    return (t.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def _tq2_0_quant(x: F32) -> U8:
    d, t = _tern(x)
    return np.concatenate([_pack_2bit(t & 3), _f16_bytes(d)], axis=1)


def _tq2_0_dequant(b: U8) -> F32:
    d = _f16_at(b, 64)
    q = _unpack_2bit(b[:, 0:64]).astype(np.int8) - np.int8(1)
    return (q.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------------------------------

_T = GGMLType
_CODECS: dict[GGMLType, tuple[Callable[[U8], F32], Callable[[F32], U8] | None]] = {
    _T.Q4_0: (_q4_0_dequant, _q4_0_quant),
    _T.Q4_1: (_q4_1_dequant, _q4_1_quant),
    _T.Q5_0: (_q5_0_dequant, _q5_0_quant),
    _T.Q5_1: (_q5_1_dequant, _q5_1_quant),
    _T.Q8_0: (_q8_0_dequant, _q8_0_quant),
    _T.Q8_1: (_q8_1_dequant, _q8_1_quant),
    _T.Q2_K: (_q2_k_dequant, _q2_k_quant),
    _T.Q3_K: (_q3_k_dequant, _q3_k_quant),
    _T.Q4_K: (_q4_k_dequant, _q4_k_quant),
    _T.Q5_K: (_q5_k_dequant, _q5_k_quant),
    _T.Q6_K: (_q6_k_dequant, _q6_k_quant),
    _T.Q8_K: (_q8_k_dequant, _q8_k_quant),
    _T.IQ4_NL: (_iq4_nl_dequant, _iq4_nl_quant),
    _T.IQ4_XS: (_iq4_xs_dequant, _iq4_xs_quant),
    _T.TQ1_0: (_tq1_0_dequant, _tq1_0_quant),
    _T.TQ2_0: (_tq2_0_dequant, _tq2_0_quant),
    _T.MXFP4: (_mxfp4_dequant, _mxfp4_quant),
}

QUANT_TYPES: frozenset[GGMLType] = frozenset(t for t, (_, q) in _CODECS.items() if q is not None)
"""Block types this module both quantizes and dequantizes."""
DEQUANT_TYPES: frozenset[GGMLType] = frozenset(_CODECS)
"""Block types this module dequantizes (a superset of QUANT_TYPES)."""


def dequantize(raw: npt.NDArray[Any], qtype: GGMLType, n_elements: int | None = None) -> F32:
    """Decode whole blocks of `qtype` (bytes, any shape and dtype, C-contiguous) into a 1-D float32 array.

    With `n_elements`, only the first `n_elements` values (a whole number of blocks) are decoded; `raw` may be
    longer.  Without it, `raw` must hold a whole number of blocks.
    """
    qtype = GGMLType(qtype)
    codec = _CODECS.get(qtype)
    if codec is None:
        raise UnsupportedTypeError(f"pyggml.quants cannot dequantize {qtype}")
    tr = type_traits(qtype)
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if n_elements is None:
        if data.size % tr.type_size:
            raise ShapeError(f"{data.size} bytes is not a whole number of {qtype} blocks ({tr.type_size} bytes)")
        nblocks = data.size // tr.type_size
    else:
        if n_elements < 0 or n_elements % tr.blck_size:
            raise ShapeError(f"{n_elements} elements is not a whole number of {qtype} blocks ({tr.blck_size})")
        nblocks = n_elements // tr.blck_size
        if nblocks * tr.type_size > data.size:
            raise ShapeError(f"{n_elements} {qtype} elements need {nblocks * tr.type_size} bytes, got {data.size}")
    blocks = data[: nblocks * tr.type_size].reshape(nblocks, tr.type_size)
    if nblocks == 0:
        return np.zeros(0, dtype=np.float32)
    with np.errstate(all="ignore"):  # garbage bytes may hold inf/NaN scales: decode them as C does, silently
        out = codec[0](blocks)
    return np.ascontiguousarray(out, dtype=np.float32).reshape(-1)


def quantize(values: npt.ArrayLike, qtype: GGMLType) -> U8:
    """Encode float values (any shape; size a multiple of the block size) as ggml blocks: a 1-D uint8 array.

    Blocks are taken from the flattened (C order) values, as ggml quantizes rows laid end to end.
    """
    qtype = GGMLType(qtype)
    codec = _CODECS.get(qtype)
    if codec is None or codec[1] is None:
        raise UnsupportedTypeError(f"pyggml.quants cannot quantize to {qtype}")
    tr = type_traits(qtype)
    x = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    if x.size % tr.blck_size:
        raise ShapeError(f"{x.size} values is not a whole number of {qtype} blocks ({tr.blck_size})")
    if x.size == 0:
        return np.zeros(0, dtype=np.uint8)
    with np.errstate(all="ignore"):
        out = codec[1](x.reshape(-1, tr.blck_size))
    assert out.shape == (x.size // tr.blck_size, tr.type_size), (qtype, out.shape)
    return np.ascontiguousarray(out, dtype=np.uint8).reshape(-1)
