/* ggml's 256-element "K" block types, read element by element (ELEM); byte layouts:
 *   q2_K  u8 scales[16]; u8 qs[64]; half d, dmin                         (84 bytes)
 *   q3_K  u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d                  (110)
 *   q4_K  half d, dmin; u8 scales[12]; u8 qs[128]                         (144)
 *   q5_K  half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]              (176)
 *   q6_K  u8 ql[128]; u8 qh[64]; i8 scales[16]; half d                    (210)
 * Element e of a block: h = e / 128 (half), r = e % 128; see each function for the bit positions. */
#ifndef PYGGML_KQUANTS_H
#define PYGGML_KQUANTS_H
#include "quants.h"

#define BLK_q2_K 256
#define BLK_q3_K 256
#define BLK_q4_K 256
#define BLK_q5_K 256
#define BLK_q6_K 256
#define TSZ_q2_K 84
#define TSZ_q3_K 110
#define TSZ_q4_K 144
#define TSZ_q5_K 176
#define TSZ_q6_K 210

INLINE float elem_q2_K(GLOBAL const char *row, i64 k) {
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k / 256) * 84);
    i32 e = (i32)(k % 256), h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    u8 sc = b[8 * h + 2 * j + l / 16];
    i32 q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
    return LOAD_HALF(b + 80, 0) * (float)(sc & 15) * (float)q - LOAD_HALF(b + 80, 1) * (float)(sc >> 4);
}

INLINE float elem_q3_K(GLOBAL const char *row, i64 k) {
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k / 256) * 110);
    i32 e = (i32)(k % 256), h = e / 128, r = e % 128, j = r / 32, l = r % 32;
    i32 q = ((b[32 + 32 * h + l] >> (2 * j)) & 3) - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4);
    return LOAD_HALF(b + 108, 0) * (float)pg_q3k_scale(b + 96, 8 * h + 2 * j + l / 16) * (float)q;
}

/* the integer level of element e (0..255) of a q4_K (0..15), q5_K (0..31) or q6_K (-32..31) block b: one place for
 * the bit layouts, which ELEM, matmul.cl's sub-block dots and the CUDA plugin's F16 tiles read */
INLINE i32 pg_q4_K_level(GLOBAL const u8 *b, i32 e) {
    i32 sb = e / 32;
    return (b[16 + 32 * (sb / 2) + e % 32] >> (4 * (sb % 2))) & 15;
}
INLINE i32 pg_q5_K_level(GLOBAL const u8 *b, i32 e) {
    i32 sb = e / 32, l = e % 32;
    return ((b[48 + 32 * (sb / 2) + l] >> (4 * (sb % 2))) & 15) | (((b[16 + l] >> sb) & 1) << 4);
}
INLINE i32 pg_q6_K_level(GLOBAL const u8 *b, i32 e) {
    i32 h = e / 128, t = (e % 128) / 32, l = e % 32;
    i32 lo = (b[64 * h + l + (t & 1) * 32] >> (4 * (t / 2))) & 15, hi = (b[128 + 32 * h + l] >> (2 * t)) & 3;
    return (lo | (hi << 4)) - 32;
}
/* q6_K's signed scale of element e's 16-element group */
INLINE i32 pg_q6_K_scale(GLOBAL const u8 *b, i32 e) { return ((GLOBAL const i8 *)(b + 192))[e / 16]; }

/* element e of a q4_K / q5_K block with level v: scale and minimum number e / 32 */
INLINE float pg_k4_value(GLOBAL const u8 *b, i32 e, i32 v) {
    i32 sc, mn;
    pg_scale_min_k4(e / 32, b + 4, &sc, &mn);
    return LOAD_HALF(b, 0) * (float)sc * (float)v - LOAD_HALF(b, 1) * (float)mn;
}

INLINE float elem_q4_K(GLOBAL const char *row, i64 k) {
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k / 256) * 144);
    i32 e = (i32)(k % 256);
    return pg_k4_value(b, e, pg_q4_K_level(b, e));
}

INLINE float elem_q5_K(GLOBAL const char *row, i64 k) {
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k / 256) * 176);
    i32 e = (i32)(k % 256);
    return pg_k4_value(b, e, pg_q5_K_level(b, e));
}

INLINE float elem_q6_K(GLOBAL const char *row, i64 k) {
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k / 256) * 210);
    i32 e = (i32)(k % 256);
    return LOAD_HALF(b + 208, 0) * (float)pg_q6_K_scale(b, e) * (float)pg_q6_K_level(b, e);
}
#endif
