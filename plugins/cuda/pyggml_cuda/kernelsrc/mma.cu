/* The tensor-core path of MUL_MAT with many src1 columns (prompts), for weights whose integer path (mmq.cu) does not
 * exist: F16, Q2_K, Q3_K and Q6_K (scales per 16 elements). A tile of weights is decoded to F16 in shared memory
 * (Q6_K's scale taken once a 16-element run), src1 is rounded to F16 beside it (what ggml's CPU does for F16
 * weights; ggml's CUDA backend does the same for the weights it hands to cuBLAS), and warps multiply 16 x 16 x 16 F16
 * fragments into F32 accumulators (WMMA, sm_70+).
 *
 *   k_mul_mat_mma  128 threads (4 warps, 2 x 2) compute a 64 x 64 output tile, k advancing 32 at a time; each warp
 *                  holds a 32 x 32 quarter as 2 x 2 accumulator fragments
 *
 * Written in the kernel dialect, so the same text also builds as OpenCL C (tests run it on PoCL): the fragments
 * (tensorcore.h) have a portable form.
 * Defines: WT (weight type), WT_IS_<WT> = 1, T1 (src1 type). */
#include "kquants.h"
#include "tensorcore.h"

#define MM_T 64                  /* rows and columns of an output tile */
#define MM_BK 32                 /* k a stage */
#define MM_LD (MM_BK + 8)        /* halves a staged row: 80 bytes, so rows 16 apart start 32-byte aligned */
#define MM_THREADS 128

/* elements k0 .. k0 + 15 of a weight row (k0 a multiple of 16), 0 past ne00; Q6_K's scale taken once a run */
INLINE void mm_run16(GLOBAL const char *row, i64 k0, i64 ne00, float *v) {
#if defined(WT_IS_q6_K)
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k0 / 256) * TSZ(WT));
    i32 e0 = (i32)(k0 % 256);
    float ds = LOAD_HALF(b + 208, 0) * (float)pg_q6_K_scale(b, e0);
    for (i32 j = 0; j < 16; j++) v[j] = ds * (float)pg_q6_K_level(b, e0 + j);
#else
    for (i32 j = 0; j < 16; j++) v[j] = k0 + j < ne00 ? ELEM(WT, row, k0 + j) : 0.f;
#endif
}

/* grid: (ceil(ne01 / 64) * 128, ceil(ne11 / 64), ne12 * ne13), block 128 */
KERNEL void k_mul_mat_mma(TENSOR(a), TENSOR(b), TENSOR(d)) {
    LOCAL TC_ALIGNED u16 ws[MM_T * MM_LD];
    LOCAL TC_ALIGNED u16 xs[MM_T * MM_LD];
    LOCAL TC_ALIGNED float cs[4 * 256];
    i32 t = LID(0), warp = t / 32, lane = t % 32, wr = warp / 2, wc = warp % 2;
    i64 r0 = GRP(0) * MM_T, c0 = GRP(1) * MM_T;
    i64 i12 = GID(2) % b_ne2, i13 = GID(2) / b_ne2;
    i64 i02 = i12 / (b_ne2 / a_ne2), i03 = i13 / (b_ne3 / a_ne3);
    tc_accf acc[2][2];
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) tc_zero_f(&acc[i][j]);
    }
    /* the row (and column) and the 16-element half of the stage each thread decodes */
    i32 sr = t / 2, sk = (t % 2) * 16;
    i64 r = r0 + sr, c = c0 + sr;
    GLOBAL const char *wrow = AT(a, 0, r < a_ne1 ? r : 0, i02, i03);
    for (i64 k0 = 0; k0 < a_ne0; k0 += MM_BK) {
        float v[16];
        if (r < a_ne1) {
            mm_run16(wrow, k0 + sk, a_ne0, v);
        } else {
            for (i32 j = 0; j < 16; j++) v[j] = 0.f;
        }
        for (i32 j = 0; j < 16; j++) tc_put_half(ws, sr * MM_LD + sk + j, v[j]);
        for (i32 j = 0; j < 16; j++) {
            i64 k = k0 + sk + j;
            tc_put_half(xs, sr * MM_LD + sk + j, c < b_ne1 && k < a_ne0 ? LOADT(T1, AT(b, k, c, i12, i13)) : 0.f);
        }
        BARRIER();
        for (i32 kk = 0; kk < MM_BK; kk += 16) {
            for (i32 i = 0; i < 2; i++) {
                for (i32 j = 0; j < 2; j++) {
                    tc_step_f16(&acc[i][j], ws + (wr * 32 + 16 * i) * MM_LD + kk, xs + (wc * 32 + 16 * j) * MM_LD + kk,
                                MM_LD);
                }
            }
        }
        BARRIER();
    }
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) {
            tc_store_f(cs + warp * 256, &acc[i][j]);
            TC_SYNC();
            for (i32 m = 0; m < 8; m++) {
                i32 e = lane + 32 * m;
                i64 rr = r0 + wr * 32 + 16 * i + e % 16, cc = c0 + wc * 32 + 16 * j + e / 16;
                if (rr < a_ne1 && cc < b_ne1) store_f32(AT(d, rr, cc, i12, i13), cs[warp * 256 + e]);
            }
            TC_SYNC();
        }
    }
}
