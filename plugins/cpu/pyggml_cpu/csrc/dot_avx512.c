/* x86-64 CPUs with AVX-512 (F, VL, BW): 512-bit float dot products (F32, and F16 weights against F32: one row,
   and the tinyBLAS-order tiles of prompt matmuls), and the byte dots of dot_x86.h compiled again where the
   compiler has 32 vector registers, with VPDPBUSD when AVX512-VNNI is there too (dot_avx512_vnni.c). */
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512vl,avx512bw,avx2,fma,f16c")
#include <immintrin.h>

#include "api.h"
#include "pgc.h"

#define XSFX(name) name##_512
#include "dot_x86.h"
#include "dot_x86_f16.h"

void pgc_simd_avx512_vnni(pgc_simd *s);

PGC_DOT4(dot_f32_zmm, float, 16, __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_loadu_ps, _mm512_fmadd_ps,
         _mm512_add_ps, _mm512_reduce_add_ps, PGC_ID)

static inline __m512 ld_f16x16_zmm(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

static float dot_f16_zmm(int64_t n, const uint16_t *x, const float *y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(ld_f16x16_zmm(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(ld_f16x16_zmm(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(ld_f16x16_zmm(x + i), _mm512_loadu_ps(y + i), a0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) s += F16T(x[i]) * y[i];
    return s;
}

/* ggml_vec_dot_f16's order (dot_x86_f16.h's f16_ggml_rows_ymm, same bits) with 512-bit FMAs: a row's accumulators
   a0 and a1 are the low and high halves of one zmm, a2 and a3 of another, so 16 contiguous halves convert and
   multiply at once and v = (a0 + a2) + (a1 + a3) is their sum's low half plus its high half. R rows per pass (2R
   accumulators), each pair of activation vectors loaded once for the R rows, each row read F16_PREFETCH bytes
   ahead, the R dots ended together (f16_ggml_finish8) and stored dd bytes apart. With CARRY a pass takes the
   32-value steps [i0, i1) only, its accumulators loaded from `st` (zeros before the first pass) and left there
   while i1 is short of the steps' end: the same sums in the same order. */
static inline __attribute__((always_inline)) void f16_ggml_rows_zmm(int64_t n, const uint16_t *x, size_t bx,
                                                                    const float *y, char *d, size_t dd, int64_t i0,
                                                                    int64_t i1, __m512 *st, const int R,
                                                                    const int X32, const int CARRY) {
    __m512 acc[8][2]; /* zeros or st as the instance says: a choice at run time put them on the stack (2x) */
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) acc[r][h] = CARRY ? st[2 * r + h] : _mm512_setzero_ps();
    const int64_t np = n & ~(int64_t)31;
    if (np == 0) { /* rows shorter than 32: the tail alone */
        for (int r = 0; r < R; r++) {
            const uint16_t *xr = (const uint16_t *)((const char *)x + r * bx);
            *(float *)(d + r * dd) = X32 ? 0.0f : f16_ggml_tail(0.0f, 0, n, xr, y);
        }
        return;
    }
    int64_t i = i0;
    do { /* at least once, so that the accumulators stay in registers (dot_x86_f16.h's f16_ggml_rows_ymm) */
        for (int h = 0; h < 2; h++) {
            const __m512 yv = _mm512_loadu_ps(y + i + 16 * h);
            if (h == 0 && !X32) /* measured: 1.03-1.1x from L2 and L3 */
                for (int r = 0; r < R; r++) _mm_prefetch((const char *)x + r * bx + 2 * i + F16_PREFETCH, _MM_HINT_T0);
            for (int r = 0; r < R; r++) {
                const char *xr = (const char *)x + r * bx;
                const __m512 xv = X32 ? _mm512_loadu_ps((const float *)xr + i + 16 * h)
                                      : ld_f16x16_zmm((const uint16_t *)xr + i + 16 * h);
                acc[r][h] = _mm512_fmadd_ps(xv, yv, acc[r][h]);
            }
        }
        i += 32;
    } while (i < i1);
    if (CARRY && i1 < np) {
        for (int r = 0; r < R; r++)
            for (int h = 0; h < 2; h++) st[2 * r + h] = acc[r][h];
        return;
    }
    __m256 v[8];
    for (int r = 0; r < 8; r++) {
        const __m512 v2 = _mm512_add_ps(acc[r < R ? r : 0][0], acc[r < R ? r : 0][1]); /* (a0 + a2 | a1 + a3) */
        v[r] = _mm256_add_ps(_mm512_castps512_ps256(v2),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v2), 1)));
    }
    const __m256 s = f16_ggml_finish8(v);
    if (np == n && R == 8 && dd == sizeof(float)) {
        _mm256_storeu_ps((float *)d, s);
        return;
    }
    float o[8];
    _mm256_storeu_ps(o, s);
    for (int r = 0; r < R; r++)
        *(float *)(d + r * dd) = X32 ? o[r] : f16_ggml_tail(o[r], np, n, (const uint16_t *)((const char *)x + r * bx), y);
}

static float dot_f16_ggml_zmm(int64_t n, const uint16_t *x, const float *y) {
    float s;
    f16_ggml_rows_zmm(n, x, 0, y, (char *)&s, 0, 0, n & ~(int64_t)31, NULL, 1, 0, 0);
    return s;
}

/* f16_ggml_rows_zmm of R (1-8) rows, the instance (X32, CARRY) a constant */
#define F16_ZMM_ROWS(NAME, X32, CARRY)                                                                                 \
    static void NAME(int64_t n, const uint16_t *x, size_t bx, const float *y, char *d, size_t dd, int64_t i0,          \
                     int64_t i1, void *st, int R) {                                                                    \
        switch (R) {                                                                                                   \
        case 8: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 8, X32, CARRY); break;                    \
        case 7: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 7, X32, CARRY); break;                    \
        case 6: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 6, X32, CARRY); break;                    \
        case 5: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 5, X32, CARRY); break;                    \
        case 4: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 4, X32, CARRY); break;                    \
        case 3: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 3, X32, CARRY); break;                    \
        case 2: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 2, X32, CARRY); break;                    \
        default: f16_ggml_rows_zmm(n, x, bx, y, d, dd, i0, i1, (__m512 *)st, 1, X32, CARRY); break;                   \
        }                                                                                                              \
    }
F16_ZMM_ROWS(f16_zmm_rows, 0, 0)
F16_ZMM_ROWS(f16_zmm_rows_x32, 1, 0)
F16_ZMM_ROWS(f16_zmm_rows_carry, 0, 1)
#undef F16_ZMM_ROWS

static void f16_to_f32_zmm(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, ld_f16x16_zmm(x + i));
}

/* eight rows per pass (16 accumulators), the rest in one pass (dot_x86_f16.h's f16_ggml_tiles_drive) */
static void dot_f16_ggml_tiles_zmm(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                   int64_t nc, char *d, size_t dr, size_t dc) {
    __m512 st[F16_CHUNK_COLS][16];
    f16_ggml_tiles_drive(n, x, bx, nr, y, by, nc, d, dr, dc, 8, f16_zmm_rows, f16_zmm_rows_x32,
                         f16_zmm_rows_carry, f16_to_f32_zmm, (char *)st, sizeof st[0]);
}

/* F16 tiles (dot_x86.h's f16_tiles_drive) with 512-bit FMAs that keep the 8-lane sums: a zmm accumulator holds
   two outputs, rows 2p (low half) and 2p + 1 (high half) of one column, and each FMA advances both by the same 8
   products as two ymm FMAs. Four rows x C columns: 2 x C accumulators; each pair of weight vectors is converted
   once for the C columns, each activation vector broadcast to both halves once for the four rows. */
static inline __attribute__((always_inline)) void f16_tile_zmm(int64_t n, const uint16_t *const *xr, int64_t m,
                                                               const float *y, size_t by, char *d, size_t dr,
                                                               size_t dc, const int C) {
    __m512 acc[8][2];
    for (int c = 0; c < C; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m512 xv[2];
        for (int p = 0; p < 2; p++) {
            const __m128i lo = _mm_loadu_si128((const __m128i *)(xr[2 * p] + i));
            const __m128i hi = _mm_loadu_si128((const __m128i *)(xr[2 * p + 1] + i));
            xv[p] = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
        }
        for (int c = 0; c < C; c++) {
            const double *yc = (const double *)((const float *)((const char *)y + c * by) + i);
            const __m512 yv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(yc)));
            for (int p = 0; p < 2; p++) acc[c][p] = _mm512_fmadd_ps(xv[p], yv, acc[c][p]);
        }
    }
    if (m == 4 && dr == sizeof(float)) { /* two columns' four contiguous rows at once (hsum8_x8, same adds) */
        int c = 0;
        for (; c + 2 <= C; c += 2) {
            __m256 v[8];
            for (int k = 0; k < 2; k++)
                for (int p = 0; p < 2; p++) {
                    v[4 * k + 2 * p] = _mm512_castps512_ps256(acc[c + k][p]);
                    v[4 * k + 2 * p + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[c + k][p]), 1));
                }
            const __m256 s = hsum8_x8(v);
            _mm_storeu_ps((float *)(d + c * dc), _mm256_castps256_ps128(s));
            _mm_storeu_ps((float *)(d + (c + 1) * dc), _mm256_extractf128_ps(s, 1));
        }
        if (c == C) return;
    }
    for (int c = 0; c < C; c++)
        for (int p = 0; p < 2; p++) {
            const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[c][p]), 1));
            if (2 * p < m) *(float *)(d + 2 * p * dr + c * dc) = hsum8(_mm512_castps512_ps256(acc[c][p]));
            if (2 * p + 1 < m) *(float *)(d + (2 * p + 1) * dr + c * dc) = hsum8(hi);
        }
}

F16_TILE_ENTRY(f16_zmm1, f16_tile_zmm, 1)
F16_TILE_ENTRY(f16_zmm2, f16_tile_zmm, 2)
F16_TILE_ENTRY(f16_zmm3, f16_tile_zmm, 3)
F16_TILE_ENTRY(f16_zmm4, f16_tile_zmm, 4)
F16_TILE_ENTRY(f16_zmm5, f16_tile_zmm, 5)
F16_TILE_ENTRY(f16_zmm6, f16_tile_zmm, 6)
F16_TILE_ENTRY(f16_zmm7, f16_tile_zmm, 7)
F16_TILE_ENTRY(f16_zmm8, f16_tile_zmm, 8)

static void dot_f16_tiles_zmm(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                              int64_t nc, char *d, size_t dr, size_t dc) {
    static const f16_tile_fn tiles[] = {NULL,     f16_zmm1, f16_zmm2, f16_zmm3, f16_zmm4,
                                        f16_zmm5, f16_zmm6, f16_zmm7, f16_zmm8};
    f16_tiles_drive(n, x, bx, nr, y, by, nc, d, dr, dc, tiles, 8);
}

/* F16 panels (pgc_f16_panel_fn): tinyBLAS's order with the rows as the vector. Sixteen weight rows are converted
   and transposed once (p[16 i + r] = x[r][i]) for all the columns; an output's eight lane sums (lane l: values l,
   l + 8, ... in order, one FMA chain each, the first from zero) are computed for the 16 rows at once, C columns
   side by side, and added in hsum's tree ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)): dot_f16_tiles' bits with no
   horizontal sums, where a prompt's attention (n = 64 or 128 values a row) spent as much on them as on its FMAs. */
#define F16P_COLS 6
#define F16P_CHUNK 128 /* values a pass over the panel takes (8 KiB of it: in L1 whatever n) */
AINLINE void f16p_cols(const float *p, int64_t n, const float *const *yc, const int C, char *d, size_t dr,
                       size_t dc, int m) {
    __m512 acc[8][F16P_COLS]; /* the eight lane sums of each column, carried from chunk to chunk */
    for (int64_t i0 = 0; i0 < n; i0 += F16P_CHUNK) {
        const int64_t i1 = n - i0 < F16P_CHUNK ? n : i0 + F16P_CHUNK;
        for (int l = 0; l < 8; l++) {
            __m512 a[F16P_COLS];
            for (int c = 0; c < C; c++) a[c] = i0 ? acc[l][c] : _mm512_setzero_ps();
            for (int64_t i = i0 + l; i < i1; i += 8) {
                const __m512 pv = _mm512_load_ps(p + 16 * i);
                for (int c = 0; c < C; c++) a[c] = _mm512_fmadd_ps(pv, _mm512_set1_ps(yc[c][i]), a[c]);
            }
            for (int c = 0; c < C; c++) acc[l][c] = a[c];
        }
    }
    for (int c = 0; c < C; c++) {
        const __m512 u0 = _mm512_add_ps(_mm512_add_ps(acc[0][c], acc[4][c]), _mm512_add_ps(acc[2][c], acc[6][c]));
        const __m512 u1 = _mm512_add_ps(_mm512_add_ps(acc[1][c], acc[5][c]), _mm512_add_ps(acc[3][c], acc[7][c]));
        const __m512 out = _mm512_add_ps(u0, u1);
        if (dr == sizeof(float)) {
            _mm512_mask_storeu_ps(d + c * dc, (__mmask16)((1u << m) - 1), out);
        } else {
            float o[16];
            _mm512_storeu_ps(o, out);
            for (int r = 0; r < m; r++) *(float *)(d + r * dr + c * dc) = o[r];
        }
    }
}

static void dot_f16_panel_zmm(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                              int64_t nc, char *d, size_t dr, size_t dc, char *scratch) {
    float *p = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    if (nr < F16_PANEL_ROWS) memset(p, 0, sizeof(float) * F16_PANEL_ROWS * (size_t)n);
    const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(F16_PANEL_ROWS));
    for (int64_t r = 0; r < nr; r++) {
        const uint16_t *xr = (const uint16_t *)((const char *)x + r * bx);
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 k = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
            const __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, xr + i));
            _mm512_mask_i32scatter_ps(p + F16_PANEL_ROWS * i + r, k, at, v, 4);
        }
    }
    for (int64_t c0 = 0; c0 < nc;) {
        const float *yc[F16P_COLS];
        const int w = nc - c0 >= F16P_COLS ? F16P_COLS : (int)(nc - c0);
        for (int c = 0; c < w; c++) yc[c] = (const float *)((const char *)y + (c0 + c) * by);
        char *dd = d + c0 * dc;
        switch (w) {
        case 1: f16p_cols(p, n, yc, 1, dd, dr, dc, (int)nr); break;
        case 2: f16p_cols(p, n, yc, 2, dd, dr, dc, (int)nr); break;
        case 3: f16p_cols(p, n, yc, 3, dd, dr, dc, (int)nr); break;
        case 4: f16p_cols(p, n, yc, 4, dd, dr, dc, (int)nr); break;
        case 5: f16p_cols(p, n, yc, 5, dd, dr, dc, (int)nr); break;
        default: f16p_cols(p, n, yc, F16P_COLS, dd, dr, dc, (int)nr); break;
        }
        c0 += w;
    }
}

#include "dot_avx512_kpairs.h" /* the K-quants' prompt tiles */

/* Measured here: the K-quant dots gain from 32 registers; the 32-block dots run fastest as the VEX AVX-VNNI
   build, so those come from dot_vnni.c when the CPU has AVX-VNNI. */
void pgc_simd_avx512(pgc_simd *s, int vnni) {
    pgc_simd k;
    memset(&k, 0, sizeof(k));
    if (vnni) pgc_simd_avx512_vnni(&k);
    else register_x86_512(&k);
    if (pgc_cpu_features() & PGC_F_AVXVNNI) {
        pgc_simd_vnni(s);
    } else { /* e.g. AMD Zen 4: VPDPBUSD only in its EVEX form */
        pgc_simd_avx2(s);
        if (vnni) pgc_simd_avx512_vnni(s);
        else register_x86_512(s);
    }
    const int kt[] = {T_Q4_K, T_Q6_K};
    for (int j = 0; j < 2; j++) {
        s->vec_dot[kt[j]] = k.vec_dot[kt[j]];
        s->vec_dot2[kt[j]] = k.vec_dot2[kt[j]];
        s->vec_dotr[kt[j]] = k.vec_dotr[kt[j]];
    }
    s->q_tiles[T_Q4_K] = q4_K_tiles_zmm;
    s->q_tiles[T_Q6_K] = q6_K_tiles_zmm;
    const int r8k[] = {T_Q4_0, T_Q5_0, T_Q5_1, T_Q8_0, T_Q4_K, T_Q5_K, T_Q6_K}; /* prompts: two groups in zmm */
    for (int j = 0; j < 7; j++) s->r8[r8k[j]] = k.r8[r8k[j]];
    const int lt[] = {T_Q4_0, T_Q4_1, T_Q8_0, T_Q5_0, T_Q5_1};
    for (int j = 0; j < 5; j++) s->q_tiles[lt[j]] = k.q_tiles[lt[j]];
    s->dot_f32 = dot_f32_zmm;
    s->dot_f16 = dot_f16_zmm;
    s->dot_f16_ggml = dot_f16_ggml_zmm;
    s->dot_f16_ggml_tiles = dot_f16_ggml_tiles_zmm;
    s->dot_f16_tiles = dot_f16_tiles_zmm;
    s->dot_f16_panel = dot_f16_panel_zmm;
    s->level = vnni ? 4 : 3;
}
#endif
