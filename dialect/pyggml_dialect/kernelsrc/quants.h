/* ggml's 32-element block types, read (ELEM, BLOCK_DOT) byte for byte; the writers (QUANTIZE_BLOCK) are pyggml's
 * shared quantize.h (pyggml.kernelsrc), the cpu plugin's too.
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
/* QUANTIZE_BLOCK, and blocks.h: pg_nibble, pg_u32le, pg_iq4nl_value */
#include "quantize.h"

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

INLINE float elem_q4_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_q4_0;
    return LOAD_HALF(b, 0) * (float)(pg_nibble((GLOBAL const u8 *)(b + 2), (i32)(k % 32)) - 8);
}
INLINE float elem_q4_1(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_q4_1;
    return LOAD_HALF(b, 0) * (float)pg_nibble((GLOBAL const u8 *)(b + 4), (i32)(k % 32)) + LOAD_HALF(b, 1);
}
/* 5-bit level j of a q5 block: its nibble and bit j of the little-endian u32 qh */
INLINE i32 pg_q5_level(GLOBAL const char *qh, GLOBAL const char *qs, i32 j) {
    return pg_nibble((GLOBAL const u8 *)qs, j) | (i32)(((pg_u32le((GLOBAL const u8 *)qh) >> j) & 1u) << 4);
}
INLINE float elem_q5_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_q5_0;
    return LOAD_HALF(b, 0) * (float)(pg_q5_level(b + 2, b + 6, (i32)(k % 32)) - 16);
}
INLINE float elem_q5_1(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_q5_1;
    return LOAD_HALF(b, 0) * (float)pg_q5_level(b + 4, b + 8, (i32)(k % 32)) + LOAD_HALF(b, 1);
}
INLINE float elem_q8_0(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_q8_0;
    return LOAD_HALF(b, 0) * (float)((GLOBAL const i8 *)(b + 2))[k % 32];
}
INLINE float elem_iq4_nl(GLOBAL const char *row, i64 k) {
    GLOBAL const char *b = row + (k / 32) * TSZ_iq4_nl;
    return LOAD_HALF(b, 0) * pg_iq4nl_value(pg_nibble((GLOBAL const u8 *)(b + 2), (i32)(k % 32)));
}
#endif
