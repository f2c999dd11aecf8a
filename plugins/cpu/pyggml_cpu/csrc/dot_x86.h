/* x86 intrinsic kernels for AVX2 (+FMA, F16C), included by dot_avx2.c and, with PGC_VNNI defined (the
   unsigned x signed byte dots become one VPDPBUSD), by dot_vnni.c; the includer sets the target pragma and
   XSFX(name). */
#include <immintrin.h>

#include "quants.h"

static inline float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then high nibbles (ggml's 32-block order) */
static inline __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0xF));
}

/* sum of products of unsigned bytes u and signed bytes s, as 8 int32 */
static inline __m256i dot_us8(__m256i u, __m256i s) {
#if defined(PGC_VNNI)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

static inline __m256i dot_ss8(__m256i x, __m256i y) {
    return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

static float XSFX(dot_f32)(int64_t n, const float *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static inline __m256 ld_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static float XSFX(dot_f16)(int64_t n, const uint16_t *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(ld_f16x8(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(ld_f16x8(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(ld_f16x8(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(ld_f16x8(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(ld_f16x8(x + i), _mm256_loadu_ps(y + i), a0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += _cvtsh_ss(x[i]) * y[i];
    return s;
}

static void XSFX(vd_q4_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq4_0 *x = (const bq4_0 *)vx;
    const bq8_0 *y = (const bq8_0 *)vy;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK; i++) {
        __m256i q = _mm256_sub_epi8(nibbles32(x[i].qs), off);
        __m256i p = dot_ss8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum8(acc);
}

static void XSFX(vd_q4_1)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq4_1 *x = (const bq4_1 *)vx;
    const bq8_1 *y = (const bq8_1 *)vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        __m256i p = dot_us8(nibbles32(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
        summs += _cvtsh_ss(x[i].m) * _cvtsh_ss(y[i].s);
    }
    *s = hsum8(acc) + summs;
}

static void XSFX(vd_q8_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq8_0 *x = (const bq8_0 *)vx;
    const bq8_0 *y = (const bq8_0 *)vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK; i++) {
        __m256i p = dot_ss8(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d) * _cvtsh_ss(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum8(acc);
}

static inline __m256i scale_pair(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

static void XSFX(vd_q4_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq4_K *x = (const bq4_K *)vx;
    const bq8_K *y = (const bq8_K *)vy;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < n / QKK; i++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) pgc_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        int msum = 0;
        for (int j = 0; j < 8; j++) msum += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q4 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q4, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c)));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32)));
            p0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c]));
            p1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        float d = y[i].d * _cvtsh_ss(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        accm += y[i].d * _cvtsh_ss(x[i].dmin) * msum;
    }
    *s = hsum8(acc) - accm;
}

static void XSFX(vd_q6_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq6_K *x = (const bq6_K *)vx;
    const bq8_K *y = (const bq8_K *)vy;
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++) {
        const int8_t *sc = x[i].scales;
        int bias = 0;
        for (int g = 0; g < 16; g++) bias += sc[g] * y[i].bsums[g];
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qhp = x[i].qh + 32 * h;
            const int8_t *q8 = y[i].qs + 128 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                int g = 8 * h + 2 * k;
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[g], sc[g + 1])));
            }
        }
        float d = y[i].d * _cvtsh_ss(x[i].d);
        __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, _mm256_setr_epi32(32 * bias, 0, 0, 0, 0, 0, 0, 0)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), v, acc);
    }
    *s = hsum8(acc);
}

static void XSFX(register_x86)(pgc_simd *s) {
    s->dot_f32 = XSFX(dot_f32);
    s->dot_f16 = XSFX(dot_f16);
    s->vec_dot[T_Q4_0] = XSFX(vd_q4_0);
    s->vec_dot[T_Q4_1] = XSFX(vd_q4_1);
    s->vec_dot[T_Q8_0] = XSFX(vd_q8_0);
    s->vec_dot[T_Q4_K] = XSFX(vd_q4_K);
    s->vec_dot[T_Q6_K] = XSFX(vd_q6_K);
}
