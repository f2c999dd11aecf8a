/* x86-64 CPUs with AVX-512F: the float dot products (F32, and F16 weights against F32) at 16 lanes. The
   byte dots stay the AVX2 / AVX-VNNI ones. */
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx2,fma,f16c")
#include <immintrin.h>

#include "pgc.h"

static float dot_f32_512(int64_t n, const float *x, const float *y) {
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

static inline __m512 ld_f16x16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

static float dot_f16_512(int64_t n, const uint16_t *x, const float *y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(ld_f16x16(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(ld_f16x16(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(ld_f16x16(x + i), _mm512_loadu_ps(y + i), a0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) s += F16T(x[i]) * y[i];
    return s;
}

void pgc_simd_avx512(pgc_simd *s) {
    s->dot_f32 = dot_f32_512;
    s->dot_f16 = dot_f16_512;
    s->level += 2; /* 3: avx2 + avx512, 4: avx2 + avx-vnni + avx512 */
}
#endif
