/* Small readers of ggml's block layouts, shared by every reader and writer of blocks: the OpenCL/CUDA element
 * readers (pyggml_opencl kernels/quants.h, kquants.h), the quantisers here (quantize.h, kquantize.h) and the cpu
 * plugin's dequantisers and dot products. Pointers are GLOBAL (device memory; empty in host C). */
#ifndef PYGGML_BLOCKS_H
#define PYGGML_BLOCKS_H
#include "dialect.h"

/* ggml's nearest_int: add 1.5 * 2^23 and read the mantissa (round half to even for |f| < 2^22) */
INLINE i32 pg_nearest_int(float f) {
    float v = f + 12582912.f;
    return (i32)(AS_UINT(v) & 0x007fffffu) - 0x00400000;
}
INLINE i32 pg_clampi(i32 v, i32 lo, i32 hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* little-endian u32 at any byte offset (q5_0 / q5_1 high bits) */
INLINE u32 pg_u32le(GLOBAL const u8 *p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

/* nibble j of a 32-block's 16 bytes: j < 16 the low nibble of qs[j], else the high nibble of qs[j - 16] */
INLINE i32 pg_nibble(GLOBAL const u8 *qs, i32 j) { return j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4); }

/* 6-bit scale and minimum number j (0..7) of a q4_K / q5_K block, from its 12 scale bytes q */
INLINE void pg_scale_min_k4(i32 j, GLOBAL const u8 *q, i32 *sc, i32 *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* signed 6-bit scale j (0..15) of a q3_K block, from its 12 scale bytes s */
INLINE i32 pg_q3k_scale(GLOBAL const u8 *s, i32 j) {
    i32 lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    i32 hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* IQ4_NL's 16 levels (a switch: no constant table to place in an address space) */
INLINE float pg_iq4nl_value(i32 n) {
    switch (n) {
        case 0: return -127.f; case 1: return -104.f; case 2: return -83.f; case 3: return -65.f;
        case 4: return -49.f; case 5: return -35.f; case 6: return -22.f; case 7: return -10.f;
        case 8: return 1.f; case 9: return 13.f; case 10: return 25.f; case 11: return 38.f;
        case 12: return 53.f; case 13: return 69.f; case 14: return 89.f; default: return 113.f;
    }
}
#endif
