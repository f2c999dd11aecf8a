/* x86-64 CPUs with AVX-512 (F, VL, BW): 512-bit float dot products (F32, and F16 weights against F32), and
   the byte dots of dot_x86.h compiled again where the compiler has 32 vector registers, with VPDPBUSD when
   AVX512-VNNI is there too (dot_avx512_vnni.c). */
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
    s->level = vnni ? 4 : 3;
}
#endif
