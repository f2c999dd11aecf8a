/* Writing ggml's 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): ggml's reference quantisers, byte
 * for byte with pyggml.quants. QUANTIZE_BLOCK(T, b, x) writes the block at b from the 32 floats at x (private
 * memory on a device; one work-item per block); the cpu plugin calls quantize_T block by block. Layouts:
 *   q4_0  half d; u8 qs[16]                 q4_1  half d, m; u8 qs[16]
 *   q5_0  half d; u8 qh[4]; u8 qs[16]       q5_1  half d, m; u8 qh[4]; u8 qs[16]
 *   q8_0  half d; i8 qs[32]                 iq4_nl half d; u8 qs[16]
 * Levels are clamped then truncated, which is ggml's MIN(top, (int8_t)v) for every finite input (a comparison, not
 * fminf: no libm call per value in host C). A block holding a NaN or an infinity is pyggml's rule, not ggml's
 * (which converts a NaN to an integer there: undefined in C): pg_nan_block writes what pyggml.quants.nan_block
 * does, NaN in every scale field and zero in every other byte, so it dequantises to NaN everywhere. */
#ifndef PYGGML_QUANTIZE_H
#define PYGGML_QUANTIZE_H
#include "blocks.h"

/* the largest magnitude of n values (returned) and the value that has it (the first one on ties) */
INLINE float pg_amax(const float *x, i32 n, float *signed_max) {
    float amax = 0.f, vmax = 0.f;
    for (i32 j = 0; j < n; j++) {
        if (FABS(x[j]) > amax) { amax = FABS(x[j]); vmax = x[j]; }
    }
    *signed_max = vmax;
    return amax;
}

/* 1 when all n values are finite (the exponent bits, so no compiler flag can fold the test away) */
INLINE i32 pg_all_finite(const float *x, i32 n) {
    u32 nonfinite = 0;
    for (i32 j = 0; j < n; j++) nonfinite |= (u32)((AS_UINT(x[j]) & 0x7f800000u) == 0x7f800000u);
    return !nonfinite;
}

/* when the n values at x hold a NaN or an infinity: the block of `size` bytes at b becomes zeros with `nscale` fp16
 * NaNs (0x7e00, stored as bytes: the same bits on every backend) from byte d_off (d, then m / dmin / s), and 1 is
 * returned; else 0 and nothing is written. Its products are then NaN, as the float products would be, and no
 * float-to-int conversion sees a non-finite value. */
INLINE i32 pg_nan_block(GLOBAL char *b, const float *x, i32 n, i32 size, i32 d_off, i32 nscale) {
    if (pg_all_finite(x, n)) return 0;
    GLOBAL u8 *y = (GLOBAL u8 *)b;
    for (i32 j = 0; j < size; j++) y[j] = 0;
    for (i32 j = 0; j < nscale; j++) y[d_off + 2 * j + 1] = 0x7e;
    return 1;
}

INLINE void quantize_q8_0(GLOBAL char *b, const float *x) {
    GLOBAL i8 *q = (GLOBAL i8 *)(b + 2);
    if (pg_nan_block(b, x, 32, 34, 0, 1)) return;
    float vmax;
    float d = pg_amax(x, 32, &vmax) / 127.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    for (i32 j = 0; j < 32; j++) q[j] = (i8)ROUND(x[j] * id);
}

/* level v clamped at top (NaN: top), truncated */
INLINE i32 pg_level(float v, float top) { return (i32)(v < top ? v : top); }

/* nibbles j and j + 16 of the levels (x - sub) * id + bias, clamped at 15, into byte j */
INLINE void pg_pack4(GLOBAL char *qs, const float *x, float sub, float id, float bias) {
    for (i32 j = 0; j < 16; j++) {
        i32 q0 = pg_level((x[j] - sub) * id + bias, 15.f), q1 = pg_level((x[j + 16] - sub) * id + bias, 15.f);
        ((GLOBAL u8 *)qs)[j] = (u8)(q0 | (q1 << 4));
    }
}

/* q4_0 / q5_0: d = (the value of largest magnitude) / -top, stored; returns 1 / d (0 for d = 0) */
INLINE float pg_scale_absmax(GLOBAL char *b, const float *x, float top) {
    float vmax;
    pg_amax(x, 32, &vmax);
    float d = vmax / -top;
    STORE_HALF(b, 0, d);
    return d != 0.f ? 1.f / d : 0.f;
}

INLINE void quantize_q4_0(GLOBAL char *b, const float *x) {
    if (pg_nan_block(b, x, 32, 18, 0, 1)) return;
    pg_pack4(b + 2, x, 0.f, pg_scale_absmax(b, x, 8.f), 8.5f);
}

/* comparisons, not fmin/fmax: of equal values (-0 and +0) the first one stays, as in ggml's scan */
INLINE void pg_minmax(const float *x, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (i32 j = 1; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* q4_1 / q5_1: d = (max - min) / top and m = min, stored; returns 1 / d (0 for d = 0) */
INLINE float pg_scale_min(GLOBAL char *b, const float *x, float top, float *mn) {
    float mx;
    pg_minmax(x, mn, &mx);
    float d = (mx - *mn) / top;
    STORE_HALF(b, 0, d);
    STORE_HALF(b, 1, *mn);
    return d != 0.f ? 1.f / d : 0.f;
}

INLINE void quantize_q4_1(GLOBAL char *b, const float *x) {
    if (pg_nan_block(b, x, 32, 20, 0, 2)) return;
    float mn, id = pg_scale_min(b, x, 15.f, &mn);
    pg_pack4(b + 4, x, mn, id, 0.5f);
}

/* 5-bit levels q[0..31]: low nibbles into qs (j and j + 16 share byte j), bit 4 of q[j] into bit j of qh */
INLINE void pg_pack5(GLOBAL char *qhp, GLOBAL char *qs, const i32 *q) {
    u32 qh = 0;
    for (i32 j = 0; j < 16; j++) {
        ((GLOBAL u8 *)qs)[j] = (u8)((q[j] & 15) | ((q[j + 16] & 15) << 4));
        qh |= ((u32)(q[j] >> 4) & 1u) << j;
        qh |= ((u32)(q[j + 16] >> 4) & 1u) << (j + 16);
    }
    for (i32 i = 0; i < 4; i++) ((GLOBAL u8 *)qhp)[i] = (u8)(qh >> (8 * i));
}

INLINE void quantize_q5_0(GLOBAL char *b, const float *x) {
    if (pg_nan_block(b, x, 32, 22, 0, 1)) return;
    float id = pg_scale_absmax(b, x, 16.f);
    i32 q[32];
    for (i32 j = 0; j < 32; j++) q[j] = pg_level(x[j] * id + 16.5f, 31.f);
    pg_pack5(b + 2, b + 6, q);
}

INLINE void quantize_q5_1(GLOBAL char *b, const float *x) {
    if (pg_nan_block(b, x, 32, 24, 0, 2)) return;
    float mn, id = pg_scale_min(b, x, 31.f, &mn);
    i32 q[32];
    for (i32 j = 0; j < 32; j++) q[j] = (i32)((x[j] - mn) * id + 0.5f);
    pg_pack5(b + 4, b + 8, q);
}

/* nearest IQ4_NL table entry (ties towards the upper one), as ggml's best_index_int8 */
INLINE i32 pg_iq4nl_best(float x) {
    if (x <= -127.f) return 0;
    if (x >= 113.f) return 15;
    i32 lo = 0, hi = 15;
    while (hi - lo > 1) {
        i32 mid = (lo + hi) / 2;
        if (x < pg_iq4nl_value(mid)) hi = mid; else lo = mid;
    }
    return x - pg_iq4nl_value(lo) < pg_iq4nl_value(hi) - x ? lo : hi;
}

/* ggml's reference IQ4_NL quantisation: one pass at d = max / -127 with weights x^2, then the least-squares
 * scale (no refinement search) */
INLINE void quantize_iq4_nl(GLOBAL char *b, const float *x) {
    if (pg_nan_block(b, x, 32, 18, 0, 1)) return;
    float vmax;
    float amax = pg_amax(x, 32, &vmax);
    u8 L[32];
    float scale = 0.f;
    if (amax >= 1e-15f) {
        float d = vmax / -127.f;
        float id = 1.f / d;
        float sumqx = 0.f, sumq2 = 0.f;
        for (i32 j = 0; j < 32; j++) {
            i32 l = pg_iq4nl_best(id * x[j]);
            L[j] = (u8)l;
            float q = pg_iq4nl_value(l);
            float wq = (x[j] * x[j]) * q;
            sumqx += wq * x[j];
            sumq2 += wq * q;
        }
        scale = sumq2 > 0.f ? sumqx / sumq2 : 0.f;
    } else {
        for (i32 j = 0; j < 32; j++) L[j] = 0;
    }
    STORE_HALF(b, 0, scale);
    for (i32 j = 0; j < 16; j++) ((GLOBAL u8 *)(b + 2))[j] = (u8)(L[j] | (L[j + 16] << 4));
}
#define QUANTIZE_BLOCK(T, b, x) PG_CAT(quantize_, T)((b), (x))

#endif
