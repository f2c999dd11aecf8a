/* The tensor-core path of MUL_MAT with many src1 columns (prompts), for weights whose integer path (mmq.cu) does not
 * exist: F16 and the 256-element K types. A tile of weights is decoded to F16 in shared memory (the K types' scales
 * taken once a 16-element run), src1 is rounded to F16 beside it (what ggml's CPU does for F16 weights; ggml's CUDA
 * backend does the same for the weights it hands to cuBLAS), and warps multiply 16 x 16 x 16 F16 fragments into F32
 * accumulators (WMMA, sm_70+).
 *
 *   k_mul_mat_mma  128 threads (4 warps, 2 x 2) compute a 64 x 64 output tile, k advancing 32 at a time; each warp
 *                  holds a 32 x 32 quarter as 2 x 2 accumulator fragments
 *
 * Written in the kernel dialect, so the same text also builds as OpenCL C (tests run it on PoCL): the fragments
 * have a portable form below, lane l holding entries l, l + 32, ... of a 16 x 16 tile, with F16 operands and F32 sums
 * as the tensor cores take them (only the order of the sums differs).
 * Defines: WT (weight type), WT_IS_<WT> = 1, T1 (src1 type). */
#include "kquants.h"

#define MM_T 64                  /* rows and columns of an output tile */
#define MM_BK 32                 /* k a stage */
#define MM_LD (MM_BK + 8)        /* halves a staged row: 80 bytes, so rows 16 apart start 32-byte aligned */
#define MM_THREADS 128

#if defined(__CUDACC__)
using namespace nvcuda;
#define MM_ALIGNED __align__(32)
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> mm_acc;
INLINE void mm_zero(mm_acc *c) { wmma::fill_fragment(*c, 0.f); }
/* c += A B for A 16 x 16 at `a` (row r's k at a[r * MM_LD + k]) and B 16 x 16 at `b` (column j's k at b[j * MM_LD + k]) */
INLINE void mm_step(mm_acc *c, const u16 *a, const u16 *b) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, (const __half *)a, MM_LD);
    wmma::load_matrix_sync(fb, (const __half *)b, MM_LD);
    wmma::mma_sync(*c, fa, fb, *c);
}
/* c's 16 x 16 entries to s, entry (r, j) at s[j * 16 + r] */
INLINE void mm_store(float *s, const mm_acc *c) { wmma::store_matrix_sync(s, *c, 16, wmma::mem_col_major); }
INLINE void mm_put(u16 *p, i32 i, float v) { ((__half *)p)[i] = __float2half_rn(v); }
#else
#define MM_ALIGNED
typedef struct { float v[8]; } mm_acc;
INLINE void mm_zero(mm_acc *c) {
    for (i32 m = 0; m < 8; m++) c->v[m] = 0.f;
}
INLINE void mm_step(mm_acc *c, LOCAL_PTR const u16 *a, LOCAL_PTR const u16 *b) {
    i32 lane = LID(0) % 32;
    for (i32 m = 0; m < 8; m++) {
        i32 e = lane + 32 * m, r = e / 16, j = e % 16;
        float s = 0.f;
        for (i32 k = 0; k < 16; k++) {
            s += vload_half(r * MM_LD + k, (LOCAL_PTR const half *)a) * vload_half(j * MM_LD + k,
                                                                                  (LOCAL_PTR const half *)b);
        }
        c->v[m] += s;
    }
}
INLINE void mm_store(LOCAL_PTR float *s, const mm_acc *c) {
    i32 lane = LID(0) % 32;
    for (i32 m = 0; m < 8; m++) {
        i32 e = lane + 32 * m;
        s[(e % 16) * 16 + e / 16] = c->v[m];
    }
}
INLINE void mm_put(LOCAL_PTR u16 *p, i32 i, float v) { vstore_half_rte(v, i, (LOCAL_PTR half *)p); }
#endif

/* elements k0 .. k0 + 15 of a weight row (k0 a multiple of 16), 0 past ne00 */
INLINE void mm_run16(GLOBAL const char *row, i64 k0, i64 ne00, float *v) {
#if defined(WT_IS_q4_K) || defined(WT_IS_q5_K)
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k0 / 256) * TSZ(WT));
    i32 e = (i32)(k0 % 256), c = e / 64, hi = (e % 64) / 32, l0 = e % 32, sc, mn;
    pg_scale_min_k4(2 * c + hi, b + 4, &sc, &mn);
    float ds = LOAD_HALF(b, 0) * (float)sc, dm = LOAD_HALF(b, 1) * (float)mn;
#if defined(WT_IS_q4_K)
    GLOBAL const u8 *q = b + 16 + 32 * c;
#else
    GLOBAL const u8 *q = b + 48 + 32 * c;
#endif
    for (i32 j = 0; j < 16; j++) {
        i32 l = l0 + j, x = hi ? q[l] >> 4 : q[l] & 15;
#if defined(WT_IS_q5_K)
        x += ((b[16 + l] >> (2 * c + hi)) & 1) << 4;
#endif
        v[j] = ds * (float)x - dm;
    }
#elif defined(WT_IS_q6_K)
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (k0 / 256) * TSZ(WT));
    i32 e = (i32)(k0 % 256), h = e / 128, t = (e % 128) / 32, l0 = e % 32;
    float ds = LOAD_HALF(b + 208, 0) * (float)((GLOBAL const i8 *)(b + 192))[8 * h + l0 / 16 + 2 * t];
    for (i32 j = 0; j < 16; j++) {
        i32 l = l0 + j;
        u8 ql = b[64 * h + l + (t & 1) * 32];
        i32 lo = t < 2 ? (ql & 15) : (ql >> 4), hi = (b[128 + 32 * h + l] >> (2 * t)) & 3;
        v[j] = ds * (float)((lo | (hi << 4)) - 32);
    }
#else
    for (i32 j = 0; j < 16; j++) v[j] = k0 + j < ne00 ? ELEM(WT, row, k0 + j) : 0.f;
#endif
}

/* grid: (ceil(ne01 / 64) * 128, ceil(ne11 / 64), ne12 * ne13), block 128 */
KERNEL void k_mul_mat_mma(TENSOR(a), TENSOR(b), TENSOR(d)) {
    LOCAL MM_ALIGNED u16 ws[MM_T * MM_LD];
    LOCAL MM_ALIGNED u16 xs[MM_T * MM_LD];
    LOCAL MM_ALIGNED float cs[4 * 256];
    i32 t = LID(0), warp = t / 32, lane = t % 32, wr = warp / 2, wc = warp % 2;
    i64 r0 = GRP(0) * MM_T, c0 = GRP(1) * MM_T;
    i64 i12 = GID(2) % b_ne2, i13 = GID(2) / b_ne2;
    i64 i02 = i12 / (b_ne2 / a_ne2), i03 = i13 / (b_ne3 / a_ne3);
    mm_acc acc[2][2];
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) mm_zero(&acc[i][j]);
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
        for (i32 j = 0; j < 16; j++) mm_put(ws, sr * MM_LD + sk + j, v[j]);
        for (i32 j = 0; j < 16; j++) {
            i64 k = k0 + sk + j;
            mm_put(xs, sr * MM_LD + sk + j, c < b_ne1 && k < a_ne0 ? LOADT(T1, AT(b, k, c, i12, i13)) : 0.f);
        }
        BARRIER();
        for (i32 kk = 0; kk < MM_BK; kk += 16) {
            for (i32 i = 0; i < 2; i++) {
                for (i32 j = 0; j < 2; j++) {
                    mm_step(&acc[i][j], ws + (wr * 32 + 16 * i) * MM_LD + kk, xs + (wc * 32 + 16 * j) * MM_LD + kk);
                }
            }
        }
        BARRIER();
    }
    for (i32 i = 0; i < 2; i++) {
        for (i32 j = 0; j < 2; j++) {
            mm_store(cs + warp * 256, &acc[i][j]);
            BARRIER();
            for (i32 m = 0; m < 8; m++) {
                i32 e = lane + 32 * m;
                i64 rr = r0 + wr * 32 + 16 * i + e % 16, cc = c0 + wc * 32 + 16 * j + e / 16;
                if (rr < a_ne1 && cc < b_ne1) store_f32(AT(d, rr, cc, i12, i13), cs[warp * 256 + e]);
            }
            BARRIER();
        }
    }
}
