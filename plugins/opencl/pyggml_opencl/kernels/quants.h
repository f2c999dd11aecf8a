/* ggml's 32-element block types, read (ELEM, BLOCK_DOT) and written (QUANTIZE_BLOCK), byte for byte.
 *
 *   q4_0  half d; u8 qs[16]                 x = d * (nibble - 8); nibble j<16: low of qs[j], else high of qs[j-16]
 *   q4_1  half d, m; u8 qs[16]              x = d * nibble + m
 *   q5_0  half d; u8 qh[4]; u8 qs[16]       x = d * ((nibble | bit_j(qh) << 4) - 16)
 *   q5_1  half d, m; u8 qh[4]; u8 qs[16]    x = d * (nibble | bit_j(qh) << 4) + m
 *   q8_0  half d; i8 qs[32]                 x = d * q
 *   iq4_nl half d; u8 qs[16]                x = d * KVALUES[nibble]
 * Block sizes (elements) BLK_T and bytes TSZ_T follow. Plain types have BLK 1.
 */
#ifndef PYGGML_QUANTS_H
#define PYGGML_QUANTS_H
#include "common.h"

#define BLK_f32 1
#define BLK_f16 1
#define BLK_bf16 1
#define BLK_q4_0 32
#define BLK_q4_1 32
#define BLK_q5_0 32
#define BLK_q5_1 32
#define BLK_q8_0 32
#define BLK_iq4_nl 32
#define TSZ_q4_0 18
#define TSZ_q4_1 20
#define TSZ_q5_0 22
#define TSZ_q5_1 24
#define TSZ_q8_0 34
#define TSZ_iq4_nl 18
#define BLK(T) PG_CAT(BLK_, T)

INLINE u32 pg_u32le(GLOBAL const u8 *p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}
INLINE i32 pg_nibble(GLOBAL const u8 *qs, i32 j) { return j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4); }

INLINE float elem_q4_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 18;
    return LOAD_HALF(b, 0) * (float)(pg_nibble((GLOBAL const u8 *)(b + 2), (i32)(k % 32)) - 8);
}
INLINE float elem_q4_1(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 20;
    return LOAD_HALF(b, 0) * (float)pg_nibble((GLOBAL const u8 *)(b + 4), (i32)(k % 32)) + LOAD_HALF(b, 1);
}
INLINE float elem_q5_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 22;
    i32 j = (i32)(k % 32);
    u32 qh = pg_u32le((GLOBAL const u8 *)(b + 2));
    i32 q = pg_nibble((GLOBAL const u8 *)(b + 6), j) | (i32)(((qh >> j) & 1u) << 4);
    return LOAD_HALF(b, 0) * (float)(q - 16);
}
INLINE float elem_q5_1(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 24;
    i32 j = (i32)(k % 32);
    u32 qh = pg_u32le((GLOBAL const u8 *)(b + 4));
    i32 q = pg_nibble((GLOBAL const u8 *)(b + 8), j) | (i32)(((qh >> j) & 1u) << 4);
    return LOAD_HALF(b, 0) * (float)q + LOAD_HALF(b, 1);
}
INLINE float elem_q8_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 34;
    return LOAD_HALF(b, 0) * (float)((GLOBAL const i8 *)(b + 2))[k % 32];
}
INLINE float pg_iq4nl_value(i32 n) {
    switch (n) {
        case 0: return -127.f; case 1: return -104.f; case 2: return -83.f; case 3: return -65.f;
        case 4: return -49.f; case 5: return -35.f; case 6: return -22.f; case 7: return -10.f;
        case 8: return 1.f; case 9: return 13.f; case 10: return 25.f; case 11: return 38.f;
        case 12: return 53.f; case 13: return 69.f; case 14: return 89.f; default: return 113.f;
    }
}
INLINE float elem_iq4_nl(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * 18;
    return LOAD_HALF(b, 0) * pg_iq4nl_value(pg_nibble((GLOBAL const u8 *)(b + 2), (i32)(k % 32)));
}

/* ---- writing blocks (SET_ROWS / CPY into a block type): x holds 32 floats in private memory ---- */

INLINE float pg_amax(const float *x, float *signed_max) {
    float amax = 0.f, vmax = 0.f;
    for (i32 j = 0; j < 32; j++) {
        if (FABS(x[j]) > amax) { amax = FABS(x[j]); vmax = x[j]; }
    }
    *signed_max = vmax;
    return amax;
}
INLINE void quantize_q8_0(GLOBAL char *b, const float *x) {
    float vmax;
    float d = pg_amax(x, &vmax) / 127.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    for (i32 j = 0; j < 32; j++) ((GLOBAL i8 *)(b + 2))[j] = (i8)ROUND(x[j] * id);
}
INLINE void quantize_q4_0(GLOBAL char *b, const float *x) {
    float vmax;
    pg_amax(x, &vmax);
    float d = vmax / -8.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    for (i32 j = 0; j < 16; j++) {
        i32 q0 = (i32)FMIN(15.f, x[j] * id + 8.5f), q1 = (i32)FMIN(15.f, x[j + 16] * id + 8.5f);
        ((GLOBAL u8 *)(b + 2))[j] = (u8)(q0 | (q1 << 4));
    }
}
/* comparisons, not fmin/fmax: of equal values (-0 and +0) the first one stays, as in ggml's scan */
INLINE void pg_minmax(const float *x, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (i32 j = 1; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo; *mx = hi;
}
INLINE void quantize_q4_1(GLOBAL char *b, const float *x) {
    float mn, mx;
    pg_minmax(x, &mn, &mx);
    float d = (mx - mn) / 15.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    STORE_HALF(b, 1, mn);
    for (i32 j = 0; j < 16; j++) {
        i32 q0 = (i32)FMIN(15.f, (x[j] - mn) * id + 0.5f), q1 = (i32)FMIN(15.f, (x[j + 16] - mn) * id + 0.5f);
        ((GLOBAL u8 *)(b + 4))[j] = (u8)(q0 | (q1 << 4));
    }
}
INLINE void pg_store_qh(GLOBAL char *p, u32 qh) {
    for (i32 i = 0; i < 4; i++) ((GLOBAL u8 *)p)[i] = (u8)(qh >> (8 * i));
}
INLINE void quantize_q5_0(GLOBAL char *b, const float *x) {
    float vmax;
    pg_amax(x, &vmax);
    float d = vmax / -16.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    u32 qh = 0;
    for (i32 j = 0; j < 16; j++) {
        i32 q0 = (i32)FMIN(31.f, x[j] * id + 16.5f), q1 = (i32)FMIN(31.f, x[j + 16] * id + 16.5f);
        ((GLOBAL u8 *)(b + 6))[j] = (u8)((q0 & 15) | ((q1 & 15) << 4));
        qh |= ((u32)(q0 >> 4) & 1u) << j;
        qh |= ((u32)(q1 >> 4) & 1u) << (j + 16);
    }
    pg_store_qh(b + 2, qh);
}
INLINE void quantize_q5_1(GLOBAL char *b, const float *x) {
    float mn, mx;
    pg_minmax(x, &mn, &mx);
    float d = (mx - mn) / 31.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    STORE_HALF(b, 0, d);
    STORE_HALF(b, 1, mn);
    u32 qh = 0;
    for (i32 j = 0; j < 16; j++) {
        i32 q0 = (i32)((x[j] - mn) * id + 0.5f), q1 = (i32)((x[j + 16] - mn) * id + 0.5f);
        ((GLOBAL u8 *)(b + 8))[j] = (u8)((q0 & 15) | ((q1 & 15) << 4));
        qh |= ((u32)(q0 >> 4) & 1u) << j;
        qh |= ((u32)(q1 >> 4) & 1u) << (j + 16);
    }
    pg_store_qh(b + 4, qh);
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
    float vmax;
    float amax = pg_amax(x, &vmax);
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
