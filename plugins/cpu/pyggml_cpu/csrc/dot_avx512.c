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

void pgc_simd_avx512_vnni(pgc_simd *s);

static float dot_f32_zmm(int64_t n, const float *x, const float *y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

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

/* Measured here: the K-quant dots gain from 32 registers; the 32-block dots run fastest as the VEX AVX-VNNI
   build, so those come from dot_vnni.c when the CPU has AVX-VNNI. */
void pgc_simd_avx512(pgc_simd *s, int vnni) {
    pgc_simd k;
    memset(&k, 0, sizeof(k));
    if (vnni) pgc_simd_avx512_vnni(&k);
    else register_x86_512(&k);
    if (pgc_cpu_features() & PGC_F_AVXVNNI) {
        pgc_simd_vnni(s);
    } else {
        pgc_simd_avx2(s);
        register_x86_512(s);
    }
    const int kt[] = {T_Q4_K, T_Q6_K};
    for (int j = 0; j < 2; j++) {
        s->vec_dot[kt[j]] = k.vec_dot[kt[j]];
        s->vec_dot2[kt[j]] = k.vec_dot2[kt[j]];
        s->vec_dotr[kt[j]] = k.vec_dotr[kt[j]];
    }
    s->dot_f32 = dot_f32_zmm;
    s->dot_f16 = dot_f16_zmm;
    s->dot_f16_tiles = dot_f16_tiles_zmm;
    s->level = vnni ? 4 : 3;
}
#endif
