"""Array types, ggml's constants and the scalar helpers and scale searches shared by the codecs, vectorised
over blocks (rows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

QK_K = 256
GROUP_MAX_EPS = np.float32(1e-15)
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)

f32 = np.float32


# ---------------------------------------------------------------------------------------------------------------
# scalar helpers, vectorised
# ---------------------------------------------------------------------------------------------------------------


def f16_bytes(x: Arr) -> U8:
    """float32 (n,) -> (n, 2) little-endian fp16 bytes, round to nearest even, NaN -> 0x7E00 | sign."""
    x32 = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x32.astype("<f2").view("<u2")
    nan = np.isnan(x32)
    if nan.any():
        sign = (x32.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
        h = np.where(nan, sign | np.uint16(0x7E00), h).astype("<u2")
    return np.ascontiguousarray(h).view(np.uint8).reshape(*x32.shape, 2)


def f16_at(blocks: U8, off: int) -> F32:
    """The fp16 at byte offset `off` of every block, as float32 (nb,)."""
    return np.ascontiguousarray(blocks[:, off : off + 2]).view("<f2")[:, 0].astype(np.float32, copy=False)


def nearest_int(x: Arr) -> npt.NDArray[np.int32]:
    """ggml's nearest_int: add 1.5*2^23 in float32 and read the mantissa (round half to even for |x| < 2^22)."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = (np.asarray(x, dtype=np.float32) + f32(12582912.0)).view(np.int32)
    return (v & np.int32(0x007FFFFF)) - np.int32(0x00400000)


def roundf(x: Arr) -> F32:
    """C roundf: round half away from zero (exactly, no x+0.5 rounding trap)."""
    a = np.abs(x)
    f = np.floor(a)
    r = f + (a - f >= f32(0.5)).astype(np.float32, copy=False)
    out: F32 = np.copysign(r, x).astype(np.float32, copy=False)
    return out


def seqsum(a: Arr) -> F32:
    """Left-to-right float32 sum over the last axis, as a C `for` loop accumulates."""
    out: F32 = np.cumsum(a, axis=-1, dtype=np.float32)[..., -1]
    return out


def absmax_signed(x: Arr) -> tuple[F32, F32]:
    """(value with the largest |value|, its |value|) per row; the first one wins ties, as `if (ax > amax)`."""
    idx = np.argmax(np.abs(x), axis=-1)[..., None]
    mx = np.take_along_axis(x, idx, axis=-1)[..., 0].astype(np.float32, copy=False)
    mx = np.where(mx != 0, mx, f32(0)).astype(np.float32, copy=False)  # C starts from max = +0.0, never -0.0
    return mx, np.abs(mx)


def first_min(x: Arr) -> F32:
    """Row minimum as a `if (v < min)` scan finds it: the first of equal values (so -0.0 vs 0.0 is kept)."""
    out: F32 = np.take_along_axis(x, np.argmin(x, axis=-1)[..., None], axis=-1)[..., 0].astype(np.float32)
    return out


def first_max(x: Arr) -> F32:
    out: F32 = np.take_along_axis(x, np.argmax(x, axis=-1)[..., None], axis=-1)[..., 0].astype(np.float32)
    return out


def trunc_to_u8(x: Arr) -> U8:
    """C `(uint8_t)(int)(float)` of an in-range float: truncate toward zero, keep the low byte."""
    with np.errstate(invalid="ignore"):
        return (np.trunc(x).astype(np.int64) & 0xFF).astype(np.uint8)


def pack_nibbles(lo: Arr, hi: Arr) -> U8:
    return ((lo.astype(np.uint8) & 0x0F) | ((hi.astype(np.uint8) & 0x0F) << 4)).astype(np.uint8)


def unpack_nibbles(qs: U8) -> U8:
    """(nb, m) bytes -> (nb, 2m): all low nibbles, then all high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.uint8)


def best_index_iq4nl(x: Arr) -> npt.NDArray[np.int64]:
    """best_index_int8 over kvalues_iq4nl: nearest table entry, ties towards the upper one."""
    v = KVALUES_IQ4NL
    x = np.asarray(x, dtype=np.float32)
    mu = np.clip(np.searchsorted(v, x, side="right"), 1, 15)
    lower = (x - v[mu - 1]) < (v[mu] - x)
    idx = np.where(lower, mu - 1, mu)
    idx = np.where(x >= v[15], 15, idx)
    return np.where(x <= v[0], 0, idx).astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# ggml's scale searches (vectorised over groups = rows of x)
# ---------------------------------------------------------------------------------------------------------------


def make_qkx2_quants(
    x: F32, weights: F32, nmax: int, rmin: float, rdelta: float, nstep: int, use_mad: bool
) -> tuple[U8, F32, F32]:
    """make_qkx2_quants: asymmetric (scale, min) least-squares search.  Returns (L, scale, the_min)."""
    w = weights
    mn = first_min(x)
    mn = np.where(mn > 0, f32(0), mn).astype(np.float32, copy=False)
    mx = first_max(x)
    sum_w = seqsum(w)
    sum_x = seqsum(w * x)
    flat = mx == mn
    fmax = f32(nmax)

    def err(diff: Arr) -> Arr:
        return np.abs(diff) if use_mad else diff * diff

    with np.errstate(all="ignore"):
        iscale = fmax / (mx - mn)
        scale = f32(1) / iscale
        L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(np.float32, copy=False)
        best = seqsum(w * err(scale[:, None] * L + mn[:, None] - x))
        for step in range(nstep + 1):
            num = f32(rmin) + f32(rdelta) * f32(step) + fmax
            isc = num / (mx - mn)
            la = np.clip(nearest_int(isc[:, None] * (x - mn[:, None])), 0, nmax).astype(np.float32, copy=False)
            wl = w * la
            sum_l = seqsum(wl)
            sum_l2 = seqsum(wl * la)
            sum_xl = seqsum(wl * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, f32(0), this_min).astype(np.float32, copy=False)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(np.float32, copy=False)
            cur = seqsum(w * err(this_scale[:, None] * la + this_min[:, None] - x))
            upd = (D > 0) & (cur < best)
            L = np.where(upd[:, None], la, L)
            best = np.where(upd, cur, best)
            scale = np.where(upd, this_scale, scale).astype(np.float32, copy=False)
            mn = np.where(upd, this_min, mn).astype(np.float32, copy=False)
    L = np.where(flat[:, None], f32(0), L)
    scale = np.where(flat, f32(0), scale).astype(np.float32, copy=False)
    return L.astype(np.uint8), scale, (-mn).astype(np.float32, copy=False)


def make_qx_quants_rmse1(x: F32, nmax: int) -> tuple[npt.NDArray[np.int32], F32]:
    """make_qx_quants with rmse_type=1 and no importance weights (w = x^2).  Returns (L in [0, 2*nmax), scale)."""
    mx, amax = absmax_signed(x)
    zero = amax < GROUP_MAX_EPS
    w = x * x
    wx = w * x
    lo, hi = -nmax, nmax - 1
    with np.errstate(all="ignore"):
        iscale = f32(-nmax) / mx
        l = np.clip(nearest_int(iscale[:, None] * x), lo, hi).astype(np.float32, copy=False)
        L = l.astype(np.int32) + nmax
        sumlx = seqsum(wx * l)
        suml2 = seqsum((w * l) * l)
        scale = np.where(suml2 != 0, sumlx / suml2, f32(0)).astype(np.float32, copy=False)
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            isc = -(f32(nmax) + f32(0.1) * f32(step)) / mx
            l = np.clip(nearest_int(isc[:, None] * x), lo, hi).astype(np.float32, copy=False)
            sumlx = seqsum(wx * l)
            suml2 = seqsum((w * l) * l)
            upd = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            L = np.where(upd[:, None], l.astype(np.int32) + nmax, L)
            scale = np.where(upd, sumlx / suml2, scale).astype(np.float32, copy=False)
            best = np.where(upd, scale * sumlx, best).astype(np.float32, copy=False)
    L = np.where(zero[:, None], 0, L).astype(np.int32)
    scale = np.where(zero, f32(0), scale).astype(np.float32, copy=False)
    return L, scale


def make_q3_quants(x: F32, nmax: int) -> tuple[npt.NDArray[np.int32], F32]:
    """make_q3_quants with do_rmse: coordinate descent over the elements, up to 5 passes."""
    mx, amax = absmax_signed(x)
    zero = amax < GROUP_MAX_EPS
    lo, hi = -nmax, nmax - 1
    w = x * x
    wx = w * x
    with np.errstate(all="ignore"):
        iscale = f32(-nmax) / mx
        L = np.clip(nearest_int(iscale[:, None] * x), lo, hi).astype(np.float32, copy=False)
        sumlx = seqsum(wx * L)
        suml2 = seqsum((w * L) * L)
        for _ in range(5):
            changed = np.zeros(x.shape[0], dtype=bool)
            for i in range(x.shape[1]):
                wi, xi, wxi, li = w[:, i], x[:, i], wx[:, i], L[:, i]
                slx = sumlx - wxi * li
                sl2 = suml2 - (wi * li) * li
                new_l = np.clip(nearest_int((xi * sl2) / slx), lo, hi).astype(np.float32, copy=False)
                slx_n = slx + wxi * new_l
                sl2_n = sl2 + (wi * new_l) * new_l
                acc = (slx > 0) & (new_l != li) & (sl2_n > 0) & ((slx_n * slx_n) * suml2 > (sumlx * sumlx) * sl2_n)
                L[:, i] = np.where(acc, new_l, li)
                sumlx = np.where(acc, slx_n, sumlx).astype(np.float32, copy=False)
                suml2 = np.where(acc, sl2_n, suml2).astype(np.float32, copy=False)
                changed |= acc
            if not changed.any():  # a pass without change leaves the state as it was: later passes are no-ops
                break
        scale = np.where(suml2 > 0, sumlx / suml2, f32(0)).astype(np.float32, copy=False)
    Li = np.where(zero[:, None], 0, L.astype(np.int32) + nmax).astype(np.int32)
    return Li, np.where(zero, f32(0), scale).astype(np.float32, copy=False)


