/* CUDA fast paths of MUL_MAT with 32-element block weights (and Q4_K / Q5_K, whose 32-element sub-blocks have one
 * scale and minimum each): integer dot products with dp4a (sm_61+) or 8-bit tensor-core fragments.
 *
 * The activations are first quantised by the shared k_quantize_act (matmul_q.cl) into q8_1 blocks of 36 bytes:
 * half d, half s = d * sum(qs), i8 qs[32] (qs 4-byte aligned). Each weight block is decoded into eight packed
 * signed int8x4 words (elements 0..15 in words 0..3, 16..31 in words 4..7) plus its scale d and minimum m, so one
 * dot loop serves every type:  block value = d_w * d_a * sum(dp4a(w, a)) (+ m_w * s_a for q4_1 / q5_1).
 * The integer sums are exact, so for the 32-element types the numbers are the shared k_mul_mat_q's (ggml's CPU
 * arithmetic; only the float summation order over blocks differs in the mat-vec kernel); Q4_K / Q5_K take q8_1
 * activations by sub-block, as llama.cpp's CUDA backend does, where ggml's CPU takes q8_K by super-block.
 *
 *   k_mmvq  mat-vec, src1 with up to MV_MAXC columns: one warp per weight row, lanes stride over blocks; epi:
 *           what follows fused (activations.h: the ADD of a residual or bias, or a GLU of two weights' products)
 *   k_mmq   tiled: 256 threads compute a 64 x 64 output tile, MQ_KB blocks of k per shared-memory stage
 *   k_mmq_mma  the same tile and stages on the tensor cores: 4 warps (2 x 2) multiply 16 x 16 x 16 signed 8-bit
 *           fragments (tensorcore.h), a block's exact integer sums then scaled as k_mmq scales them, so the two
 *           kernels give the same numbers
 *
 * Written in the kernel dialect, so the same text also builds as OpenCL C (tests run it on PoCL): the CUDA-only
 * pieces (__dp4a, warp shuffles, the fragments) have portable equivalents.
 * Defines: WT (weight type), WT_IS_<WT> = 1, HAS_MIN (q4_1, q5_1, q4_K, q5_K). */
#include "kquants.h"
#include "activations.h"
#include "tensorcore.h"

#define QA 36          /* bytes of one q8_1 activation block */
#define MV_NW 4        /* warps (weight rows) per block of k_mmvq */
#define MV_MAXC 8      /* most src1 columns k_mmvq handles */
#define MQ_T 64        /* rows and columns of a k_mmq tile */
#define MQ_KB 4        /* weight blocks per k_mmq stage */
#define MQ_LD (MQ_KB * 8 + 1)

#if defined(__CUDACC__)
INLINE i32 pg_dp4a(i32 a, i32 b, i32 c) { return __dp4a(a, b, c); }
/* sum over the 32 lanes of a warp (every lane gets it) */
INLINE float pg_warp_sum(float v, LOCAL_PTR float *red) {
    (void)red;
    for (i32 o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
#else
INLINE i32 pg_sbyte(i32 x, i32 s) { return (((x >> s) & 0xff) ^ 0x80) - 0x80; }
INLINE i32 pg_dp4a(i32 a, i32 b, i32 c) {
    for (i32 s = 0; s < 32; s += 8) c += pg_sbyte(a, s) * pg_sbyte(b, s);
    return c;
}
/* the same through local memory: `red` holds one float per lane of the work-group */
INLINE float pg_warp_sum(float v, LOCAL_PTR float *red) {
    i32 l = LID(0);
    red[l] = v;
    BARRIER();
    for (i32 s = 16; s > 0; s >>= 1) {
        if ((l & 31) < s) red[l] += red[l + s];
        BARRIER();
    }
    float r = red[l & ~31];
    BARRIER();
    return r;
}
#endif

/* four bytes at a 2-byte aligned address, little endian */
INLINE i32 pg_ld_b2(GLOBAL const char *p) {
    GLOBAL const u16 *h = (GLOBAL const u16 *)p;
    return (i32)((u32)h[0] | ((u32)h[1] << 16));
}
/* per byte x - k for bytes x < 128, k <= 16 (no borrow crosses bytes) */
INLINE i32 pg_sub4(i32 x, u32 k) { return (i32)((((u32)x | 0x80808080u) - k) ^ 0x80808080u); }
/* bits 0..3 of x to bit 4 of bytes 0..3 */
INLINE i32 pg_spread4(u32 x) {
    return (i32)(((x & 1u) << 4) | ((x & 2u) << 11) | ((x & 4u) << 18) | ((x & 8u) << 25));
}

#if !defined(WT_IS_q4_K) && !defined(WT_IS_q5_K)
/* weight block -> w[8] packed signed bytes, its scale and minimum */
INLINE void pg_decode(GLOBAL const char *b, i32 *w, float *d, float *m) {
    *d = LOAD_HALF(b, 0);
    *m = 0.f;
#if defined(WT_IS_q8_0)
    for (i32 k = 0; k < 8; k++) w[k] = pg_ld_b2(b + 2 + 4 * k);
#elif defined(WT_IS_q4_0) || defined(WT_IS_q4_1)
#if defined(WT_IS_q4_1)
    *m = LOAD_HALF(b, 1);
    GLOBAL const char *qs = b + 4;
    const u32 off = 0u;
#else
    GLOBAL const char *qs = b + 2;
    const u32 off = 0x08080808u;
#endif
    for (i32 k = 0; k < 4; k++) {
        i32 q = pg_ld_b2(qs + 4 * k);
        w[k] = pg_sub4(q & 0x0f0f0f0f, off);
        w[k + 4] = pg_sub4((q >> 4) & 0x0f0f0f0f, off);
    }
#elif defined(WT_IS_q5_0) || defined(WT_IS_q5_1)
#if defined(WT_IS_q5_1)
    *m = LOAD_HALF(b, 1);
    u32 qh = (u32)pg_ld_b2(b + 4);
    GLOBAL const char *qs = b + 8;
    const u32 off = 0u;
#else
    u32 qh = (u32)pg_ld_b2(b + 2);
    GLOBAL const char *qs = b + 6;
    const u32 off = 0x10101010u;
#endif
    for (i32 k = 0; k < 4; k++) {
        i32 q = pg_ld_b2(qs + 4 * k);
        w[k] = pg_sub4((q & 0x0f0f0f0f) | pg_spread4(qh >> (4 * k)), off);
        w[k + 4] = pg_sub4(((q >> 4) & 0x0f0f0f0f) | pg_spread4(qh >> (16 + 4 * k)), off);
    }
#elif defined(WT_IS_iq4_nl)
    for (i32 k = 0; k < 4; k++) {
        u32 q = (u32)pg_ld_b2(b + 2 + 4 * k);
        u32 lo = 0u, hi = 0u;
        for (i32 j = 0; j < 4; j++) {
            u32 byte = (q >> (8 * j)) & 0xffu;
            lo |= ((u32)(i32)pg_iq4nl_value((i32)(byte & 15u)) & 0xffu) << (8 * j);
            hi |= ((u32)(i32)pg_iq4nl_value((i32)(byte >> 4)) & 0xffu) << (8 * j);
        }
        w[k] = (i32)lo;
        w[k + 4] = (i32)hi;
    }
#else
#error "mmq.cu: WT must be a 32-element block type (q4_0 q4_1 q5_0 q5_1 q8_0 iq4_nl) or q4_K / q5_K"
#endif
}
#endif

/* 32-element block ib of a weight row -> w[8], d, m as pg_decode; for Q4_K / Q5_K the block is sub-block ib % 8 of
 * super-block ib / 8: d = the super-block's d times the sub-block's scale, m = -(dmin times its minimum) (the
 * minimum taken off: value = d q + m, as q4_1's), q its 4-bit levels (Q5_K: and the fifth bit, from qh) */
INLINE void pg_decode_at(GLOBAL const char *row, i64 ib, i32 *w, float *d, float *m) {
#if defined(WT_IS_q4_K) || defined(WT_IS_q5_K)
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (ib / 8) * TSZ(WT));
    i32 sb = (i32)(ib % 8), sc, mn, shift = 4 * (sb % 2);
    pg_scale_min_k4(sb, b + 4, &sc, &mn);
    *d = LOAD_HALF(b, 0) * (float)sc;
    *m = -(LOAD_HALF(b, 1) * (float)mn);
#if defined(WT_IS_q4_K)
    GLOBAL const u32 *q = (GLOBAL const u32 *)(b + 16 + 32 * (sb / 2));
#else
    GLOBAL const u32 *q = (GLOBAL const u32 *)(b + 48 + 32 * (sb / 2)), *qh = (GLOBAL const u32 *)(b + 16);
#endif
    for (i32 k = 0; k < 8; k++) {
        u32 x = (q[k] >> shift) & 0x0f0f0f0fu;
#if defined(WT_IS_q5_K)
        x |= ((qh[k] >> sb) & 0x01010101u) << 4;
#endif
        w[k] = (i32)x;
    }
#else
    pg_decode(row + ib * TSZ(WT), w, d, m);
#endif
}

/* a block's value from its exact integer sum s, the weights' scale dw and minimum mw, the activations' d and s (sa):
 * dw da s (+ mw sa where the blocks carry a minimum); every kernel here scales by this one text, so k_mmq and
 * k_mmq_mma give the same numbers */
INLINE float pg_scaled(i32 s, float dw, float mw, float da, float sa) {
    float v = dw * da * (float)s;
#if HAS_MIN
    v += mw * sa;
#else
    (void)mw;
    (void)sa;
#endif
    return v;
}

INLINE float pg_block_value(const i32 *w, float dw, float mw, GLOBAL const char *ab) {
    i32 s = 0;
    for (i32 k = 0; k < 8; k++) s = pg_dp4a(w[k], *(GLOBAL const i32 *)(ab + 4 + 4 * k), s);
    return pg_scaled(s, dw, mw, LOAD_HALF(ab, 0), LOAD_HALF(ab, 1));
}

/* this lane's part of a weight row's dot with each of the ne11 columns of the quantised activations */
INLINE void mv_row(GLOBAL const char *row, GLOBAL const char *act, i64 nblk, i64 ne11, i32 lane, float *acc) {
    i32 w[8];
    float dw, mw;
    for (i64 ib = lane; ib < nblk; ib += 32) {
        pg_decode_at(row, ib, w, &dw, &mw);
        for (i32 c = 0; c < MV_MAXC; c++) {
            if (c < ne11) acc[c] += pg_block_value(w, dw, mw, act + (c * nblk + ib) * QA);
        }
    }
}

/* grid (ceil(ne01 / MV_NW) * 32 * MV_NW, 1, ne12 * ne13), local (32 * MV_NW); ne11 <= MV_MAXC; a2 (the GLU
 * epilogues' second weights, activations.h) is laid out as a */
KERNEL void k_mmvq(TENSOR(a), TENSOR(a2), GLOBAL const char *q, i64 qoff, TENSOR(e), TENSOR(d), i64 ne11, i64 ne12,
                   i32 epi) {
    LOCAL float red[32 * MV_NW];
    i32 lane = LID(0) & 31;
    i64 i01 = GRP(0) * MV_NW + LID(0) / 32;
    i64 i12 = GID(2) % ne12, i13 = GID(2) / ne12;
    i64 i02 = i12 / (ne12 / a_ne2), i03 = i13 / (d_ne3 / a_ne3);
    i64 nblk = a_ne0 / 32;
    float acc[MV_MAXC], acc2[MV_MAXC];
    for (i32 c = 0; c < MV_MAXC; c++) acc[c] = acc2[c] = 0.f;
    if (i01 < a_ne1) {   /* no early return: the portable warp sum has barriers */
        GLOBAL const char *act = q + qoff + ne11 * (i12 + ne12 * i13) * nblk * QA;
        mv_row(AT(a, 0, i01, i02, i03), act, nblk, ne11, lane, acc);
        if (epi >= EPI_SWIGLU) mv_row(AT(a2, 0, i01, i02, i03), act, nblk, ne11, lane, acc2);
    }
    for (i32 c = 0; c < MV_MAXC; c++) {
        if (c >= ne11) break;
        float r = pg_warp_sum(acc[c], red), r2 = epi >= EPI_SWIGLU ? pg_warp_sum(acc2[c], red) : 0.f;
        if (lane == 0 && i01 < a_ne1) store_epilogue(TENSOR_ARGS(e), TENSOR_ARGS(d), i01, c, i12, i13, r, r2, epi);
    }
}

/* a tile kernel's staging of block sk of the stage for weight row sr and src1 column sr of the tile, from block ib
 * of the weight row wrow and the activation block ablk (0 outside the matrices: zeros): the packed words into wq and aq
 * (k_mmq: row sr's words at sr * MQ_LD + 8 sk; planes, k_mmq_mma: word k at ((2 sk + k / 4) MQ_T + sr) 4 + k % 4),
 * the weights' scale and minimum into wd and wm, the activations' d and s into ad and as ([MQ_T][MQ_KB] each) */
INLINE void mq_stage(GLOBAL const char *wrow, i64 ib, GLOBAL const char *ablk, i32 sr, i32 sk, i32 planes,
                     LOCAL_PTR i32 *wq, LOCAL_PTR i32 *aq, LOCAL_PTR float *wd, LOCAL_PTR float *wm,
                     LOCAL_PTR float *ad, LOCAL_PTR float *as) {
    i32 w[8];
    float dw = 0.f, mw = 0.f;
    if (wrow) {
        pg_decode_at(wrow, ib, w, &dw, &mw);
    } else {
        for (i32 k = 0; k < 8; k++) w[k] = 0;
    }
    for (i32 k = 0; k < 8; k++) {
        i32 at = planes ? ((2 * sk + k / 4) * MQ_T + sr) * 4 + k % 4 : sr * MQ_LD + sk * 8 + k;
        wq[at] = w[k];
        aq[at] = ablk ? *(GLOBAL const i32 *)(ablk + 4 + 4 * k) : 0;
    }
    wd[sr * MQ_KB + sk] = dw;
    wm[sr * MQ_KB + sk] = mw;
    ad[sr * MQ_KB + sk] = ablk ? LOAD_HALF(ablk, 0) : 0.f;
    as[sr * MQ_KB + sk] = ablk ? LOAD_HALF(ablk, 1) : 0.f;
}
/* the weight row r (block ib in range) and the activation block (column c, block ib) a tile kernel stages, or 0 */
#define MQ_WROW(r, ib) ((r) < a_ne1 && (ib) < nblk ? AT(a, 0, r, i02, i03) : 0)
#define MQ_ABLK(c, ib) ((c) < ne11 && (ib) < nblk ? act + ((c) * nblk + (ib)) * QA : 0)

/* grid (ceil(ne01 / 64) * 256, ceil(ne11 / 64), ne12 * ne13), local (256). Thread t computes rows
 * r0 + t % 16 + 16 i and columns c0 + t / 16 + 16 j (i, j < 4); blocks of k are summed in order. */
KERNEL void k_mmq(TENSOR(a), GLOBAL const char *q, i64 qoff, TENSOR(d), i64 ne11, i64 ne12) {
    LOCAL i32 wq[MQ_T][MQ_LD];
    LOCAL i32 aq[MQ_T][MQ_LD];
    LOCAL float wd[MQ_T][MQ_KB];
    LOCAL float wm[MQ_T][MQ_KB];
    LOCAL float ad[MQ_T][MQ_KB];
    LOCAL float as[MQ_T][MQ_KB];
    i32 t = LID(0), tr = t % 16, tc = t / 16;
    i64 r0 = GRP(0) * MQ_T, c0 = GRP(1) * MQ_T;
    i64 i12 = GID(2) % ne12, i13 = GID(2) / ne12;
    i64 i02 = i12 / (ne12 / a_ne2), i03 = i13 / (d_ne3 / a_ne3);
    i64 nblk = a_ne0 / 32;
    GLOBAL const char *act = q + qoff + ne11 * (i12 + ne12 * i13) * nblk * QA;
    float acc[4][4];
    for (i32 i = 0; i < 4; i++) {
        for (i32 j = 0; j < 4; j++) acc[i][j] = 0.f;
    }
    /* the (row or column, block) pair each thread stages */
    i32 sr = t / MQ_KB, sk = t % MQ_KB;
    for (i64 ib0 = 0; ib0 < nblk; ib0 += MQ_KB) {
        mq_stage(MQ_WROW(r0 + sr, ib0 + sk), ib0 + sk, MQ_ABLK(c0 + sr, ib0 + sk), sr, sk, 0, &wq[0][0], &aq[0][0],
                 &wd[0][0], &wm[0][0], &ad[0][0], &as[0][0]);
        BARRIER();
        for (i32 kb = 0; kb < MQ_KB; kb++) {
            for (i32 i = 0; i < 4; i++) {
                i32 r = tr + 16 * i;
                for (i32 j = 0; j < 4; j++) {
                    i32 c = tc + 16 * j;
                    i32 s = 0;
                    for (i32 k = 0; k < 8; k++) s = pg_dp4a(wq[r][kb * 8 + k], aq[c][kb * 8 + k], s);
                    acc[i][j] += pg_scaled(s, wd[r][kb], wm[r][kb], ad[c][kb], as[c][kb]);
                }
            }
        }
        BARRIER();
    }
    for (i32 i = 0; i < 4; i++) {
        i64 r = r0 + tr + 16 * i;
        for (i32 j = 0; j < 4; j++) {
            i64 c = c0 + tc + 16 * j;
            if (r < a_ne1 && c < ne11) store_f32(AT(d, r, c, i12, i13), acc[i][j]);
        }
    }
}

#define MT_THREADS 128
/* grid (ceil(ne01 / 64) * 128, ceil(ne11 / 64), ne12 * ne13), local (128). A stage holds MQ_KB blocks of k as
 * 2 * MQ_KB planes of 16 bytes a row (plane p: bytes 16 (p % 2) .. of block p / 2), so every fragment starts
 * 32-byte aligned; warp w computes rows 32 (w / 2) .. + 31 and columns 32 (w % 2) .. + 31 of the tile, lane l the
 * entries l + 32 m of each 16 x 16 quarter of that (the portable fragments' layout, kept in its float sums). */
KERNEL void k_mmq_mma(TENSOR(a), GLOBAL const char *q, i64 qoff, TENSOR(d), i64 ne11, i64 ne12) {
    LOCAL TC_ALIGNED i32 wq[2 * MQ_KB * MQ_T * 4];
    LOCAL TC_ALIGNED i32 aq[2 * MQ_KB * MQ_T * 4];
    LOCAL TC_ALIGNED i32 cs[4 * 256];
    LOCAL float wd[MQ_T][MQ_KB];
    LOCAL float wm[MQ_T][MQ_KB];
    LOCAL float ad[MQ_T][MQ_KB];
    LOCAL float as[MQ_T][MQ_KB];
    i32 t = LID(0), warp = t / 32, lane = t % 32, wr = warp / 2, wc = warp % 2;
    i64 r0 = GRP(0) * MQ_T, c0 = GRP(1) * MQ_T;
    i64 i12 = GID(2) % ne12, i13 = GID(2) / ne12;
    i64 i02 = i12 / (ne12 / a_ne2), i03 = i13 / (d_ne3 / a_ne3);
    i64 nblk = a_ne0 / 32;
    GLOBAL const char *act = q + qoff + ne11 * (i12 + ne12 * i13) * nblk * QA;
    float acc[2][2][8];
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) {
            for (i32 m = 0; m < 8; m++) acc[i][j][m] = 0.f;
        }
    }
    for (i64 ib0 = 0; ib0 < nblk; ib0 += MQ_KB) {
        /* each thread stages two (row, block) pairs of the weights and two (column, block) pairs of src1 */
        for (i32 p = t; p < MQ_T * MQ_KB; p += MT_THREADS) {
            i32 sr = p / MQ_KB, sk = p % MQ_KB;
            mq_stage(MQ_WROW(r0 + sr, ib0 + sk), ib0 + sk, MQ_ABLK(c0 + sr, ib0 + sk), sr, sk, 1, wq, aq, &wd[0][0],
                     &wm[0][0], &ad[0][0], &as[0][0]);
        }
        BARRIER();
        for (i32 kb = 0; kb < MQ_KB; kb++) {
            for (i32 i = 0; i < 2; i++) {
                for (i32 j = 0; j < 2; j++) {
                    i32 rt = wr * 32 + 16 * i, ct = wc * 32 + 16 * j;
                    tc_acci s;
                    tc_zero_i(&s);
                    for (i32 h = 0; h < 2; h++) {
                        tc_step_s8(&s, (LOCAL_PTR const i8 *)(wq + ((2 * kb + h) * MQ_T + rt) * 4),
                                   (LOCAL_PTR const i8 *)(aq + ((2 * kb + h) * MQ_T + ct) * 4), 16);
                    }
                    tc_store_i(cs + warp * 256, &s);
                    TC_SYNC();
                    for (i32 m = 0; m < 8; m++) {
                        i32 e = lane + 32 * m, r = rt + e % 16, c = ct + e / 16;
                        acc[i][j][m] += pg_scaled(cs[warp * 256 + e], wd[r][kb], wm[r][kb], ad[c][kb], as[c][kb]);
                    }
                    TC_SYNC();
                }
            }
        }
        BARRIER();
    }
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) {
            for (i32 m = 0; m < 8; m++) {
                i32 e = lane + 32 * m;
                i64 r = r0 + wr * 32 + 16 * i + e % 16, c = c0 + wc * 32 + 16 * j + e / 16;
                if (r < a_ne1 && c < ne11) store_f32(AT(d, r, c, i12, i13), acc[i][j][m]);
            }
        }
    }
}
