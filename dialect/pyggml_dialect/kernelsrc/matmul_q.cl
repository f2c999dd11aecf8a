/* MUL_MAT with 32-element block weights as ggml's CPU backend computes it: activations are first quantised to
 * the weight type's dot partner (q8_0: half d, i8 qs[32]; q8_1: half d, half s = d * sum(qs), i8 qs[32]) and
 * each block contributes d_w * d_a * sum(q_w * q_a) (+ m_w * s_a for the types with a minimum). Integer sums are
 * exact, so results follow ggml's rounding, not only its tolerance.
 * Defines: WT (weight type), WT_IS_<WT>, T1 (activation type), QA_SIZE (34 | 36), HAS_MIN (0 | 1). */
#include "quants.h"

/* activation row r (r over ne11 * ne12 * ne13), block ib -> q + (r * nblk + ib) * QA_SIZE; one item per block */
KERNEL void k_quantize_act(TENSOR(b), GLOBAL char *q, i64 qoff) {
    i64 nblk = b_ne0 / 32;
    i64 i = GID(0);
    if (i >= nblk * NROWS(b)) return;
    i64 ib = i % nblk, r = i / nblk;
    i64 i1 = r % b_ne1, i2 = (r / b_ne1) % b_ne2, i3 = r / (b_ne1 * b_ne2);
    float x[32];
    float amax = 0.f, z = 0.f;
    for (i32 j = 0; j < 32; j++) {
        x[j] = LOADT(T1, AT(b, ib * 32 + j, i1, i2, i3));
        amax = FMAX(amax, FABS(x[j]));
        z += x[j] * 0.f;  /* NaN when x holds a NaN or an infinity */
    }
    /* as ggml's CPU backend quantises matmul activations (not its reference quantiser): id = 127 / amax and
       round to nearest even, so the integer products are llama.cpp's */
    float d = amax / 127.f;
    float id = amax != 0.f ? 127.f / amax : 0.f;
    GLOBAL char *blk = q + qoff + i * QA_SIZE;
    GLOBAL i8 *qs = (GLOBAL i8 *)(blk + QA_SIZE - 32);
    if (z != 0.f) {  /* a non-finite block: a NaN scale and zero quants, so its products are NaN (as the cpu plugin) */
        for (i32 j = 0; j < 32; j++) qs[j] = 0;
        STORE_HALF(blk, 0, z);
#if HAS_MIN
        STORE_HALF(blk, 1, z);
#endif
        return;
    }
    i32 sum = 0;
    for (i32 j = 0; j < 32; j++) {
        i32 v = (i32)RINT(x[j] * id);
        qs[j] = (i8)v;
        sum += v;
    }
    STORE_HALF(blk, 0, d);
#if HAS_MIN
    STORE_HALF(blk, 1, (float)sum * d);
#endif
}

/* integer weights of block `blk` (without scale / minimum) */
INLINE void weight_ints(GLOBAL const char *blk, i32 *w) {
#if defined(WT_IS_q8_0)
    for (i32 j = 0; j < 32; j++) w[j] = ((GLOBAL const i8 *)(blk + 2))[j];
#elif defined(WT_IS_q4_0) || defined(WT_IS_q4_1) || defined(WT_IS_iq4_nl)
#if defined(WT_IS_q4_1)
    GLOBAL const u8 *qs = (GLOBAL const u8 *)(blk + 4);
#else
    GLOBAL const u8 *qs = (GLOBAL const u8 *)(blk + 2);
#endif
    for (i32 j = 0; j < 16; j++) {
#if defined(WT_IS_q4_0)
        w[j] = (qs[j] & 15) - 8;
        w[j + 16] = (qs[j] >> 4) - 8;
#elif defined(WT_IS_q4_1)
        w[j] = qs[j] & 15;
        w[j + 16] = qs[j] >> 4;
#else
        w[j] = (i32)pg_iq4nl_value(qs[j] & 15);
        w[j + 16] = (i32)pg_iq4nl_value(qs[j] >> 4);
#endif
    }
#else /* q5_0, q5_1 */
#if defined(WT_IS_q5_1)
    u32 qh = pg_u32le((GLOBAL const u8 *)(blk + 4));
    GLOBAL const u8 *qs = (GLOBAL const u8 *)(blk + 8);
    const i32 off = 0;
#else
    u32 qh = pg_u32le((GLOBAL const u8 *)(blk + 2));
    GLOBAL const u8 *qs = (GLOBAL const u8 *)(blk + 6);
    const i32 off = 16;
#endif
    for (i32 j = 0; j < 32; j++) w[j] = (pg_nibble(qs, j) | (i32)(((qh >> j) & 1u) << 4)) - off;
#endif
}

#define NC 4
/* one work-item per (weight row, up to NC activation columns); grid (ne01 rounded up, ceil(ne11 / NC),
 * ne12 * ne13). Each weight block is decoded once for the NC columns. */
KERNEL void k_mul_mat_q(TENSOR(a), GLOBAL const char *q, i64 qoff, TENSOR(d), i64 ne11, i64 ne12) {
    i64 i01 = GID(0), c0 = GID(1) * NC, i12 = GID(2) % ne12, i13 = GID(2) / ne12;
    if (i01 >= a_ne1) return;
    i64 i02 = i12 / (ne12 / a_ne2), i03 = i13 / (d_ne3 / a_ne3);
    i32 nc = ne11 - c0 < NC ? (i32)(ne11 - c0) : NC;
    i64 nblk = a_ne0 / 32;
    GLOBAL const char *row = AT(a, 0, i01, i02, i03);
    GLOBAL const char *act = q + qoff + ((c0 + ne11 * (i12 + ne12 * i13)) * nblk) * QA_SIZE;
    float acc[NC];
    i32 w[32];
    for (i32 c = 0; c < NC; c++) acc[c] = 0.f;
    for (i64 ib = 0; ib < nblk; ib++) {
        GLOBAL const char *wb = row + ib * TSZ(WT);
        weight_ints(wb, w);
        float dw = LOAD_HALF(wb, 0);
        for (i32 c = 0; c < nc; c++) {
            GLOBAL const char *ab = act + (c * nblk + ib) * QA_SIZE;
            GLOBAL const i8 *qa = (GLOBAL const i8 *)(ab + QA_SIZE - 32);
            i32 sumi = 0;
            for (i32 j = 0; j < 32; j++) sumi += w[j] * (i32)qa[j];
            float v = dw * LOAD_HALF(ab, 0) * (float)sumi;
#if HAS_MIN
            v += LOAD_HALF(wb, 1) * LOAD_HALF(ab, 1);
#endif
            acc[c] += v;
        }
    }
    for (i32 c = 0; c < nc; c++) store_f32(AT(d, i01, c0 + c, i12, i13), acc[c]);
}
