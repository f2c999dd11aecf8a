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
#if defined(PGC_VNNI512)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(PGC_VNNI)
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

/* The 32-element block dots run two blocks per step into two accumulators, so consecutive blocks do not
   wait on each other's FMA. BLOCK(i, acc) adds block i's contribution. */
#define TWO_BLOCKS(nb, BLOCK)                                                                      \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 1 < (nb); i += 2) {                                                                 \
        BLOCK(i, acc0);                                                                            \
        BLOCK(i + 1, acc1);                                                                        \
    }                                                                                              \
    if (i < (nb)) BLOCK(i, acc0);                                                                  \
    __m256 acc = _mm256_add_ps(acc0, acc1)

static void XSFX(vd_q4_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq4_0 *x = (const bq4_0 *)vx;
    const bq8_0 *y = (const bq8_0 *)vy;
    const __m256i off = _mm256_set1_epi8(8);
#define Q4_0_BLOCK(j, a)                                                                                   \
    do {                                                                                                   \
        __m256i p_ = dot_ss8(_mm256_sub_epi8(nibbles32(x[j].qs), off), _mm256_loadu_si256((const __m256i *)y[j].qs)); \
        a = _mm256_fmadd_ps(_mm256_set1_ps(F16T(x[j].d) * F16T(y[j].d)), _mm256_cvtepi32_ps(p_), a); \
    } while (0)
    TWO_BLOCKS(n / QK, Q4_0_BLOCK);
#undef Q4_0_BLOCK
    *s = hsum8(acc);
}

static void XSFX(vd_q4_1)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq4_1 *x = (const bq4_1 *)vx;
    const bq8_1 *y = (const bq8_1 *)vy;
    float summs = 0.0f;
#define Q4_1_BLOCK(j, a)                                                                                   \
    do {                                                                                                   \
        __m256i p_ = dot_us8(nibbles32(x[j].qs), _mm256_loadu_si256((const __m256i *)y[j].qs));            \
        a = _mm256_fmadd_ps(_mm256_set1_ps(F16T(x[j].d) * F16T(y[j].d)), _mm256_cvtepi32_ps(p_), a); \
        summs += F16T(x[j].m) * F16T(y[j].s);                                                    \
    } while (0)
    TWO_BLOCKS(n / QK, Q4_1_BLOCK);
#undef Q4_1_BLOCK
    *s = hsum8(acc) + summs;
}

static void XSFX(vd_q8_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const bq8_0 *x = (const bq8_0 *)vx;
    const bq8_0 *y = (const bq8_0 *)vy;
#define Q8_0_BLOCK(j, a)                                                                                   \
    do {                                                                                                   \
        __m256i p_ = dot_ss8(_mm256_loadu_si256((const __m256i *)x[j].qs), _mm256_loadu_si256((const __m256i *)y[j].qs)); \
        a = _mm256_fmadd_ps(_mm256_set1_ps(F16T(x[j].d) * F16T(y[j].d)), _mm256_cvtepi32_ps(p_), a); \
    } while (0)
    TWO_BLOCKS(n / QK, Q8_0_BLOCK);
#undef Q8_0_BLOCK
    *s = hsum8(acc);
}

/* Each dot kernel is written once for NC activation columns (1 or 2; always inlined with a constant NC): with
   two columns the weight block is unpacked once for both. */
#define INLINE static inline __attribute__((always_inline))

INLINE void q4_0_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq4_0 *x = (const bq4_0 *)vx;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i q = _mm256_sub_epi8(nibbles32(x[i].qs), off), aq = _mm256_sign_epi8(q, q);
        const float dx = F16T(x[i].d);
        for (int c = 0; c < NC; c++) {
            const bq8_0 *y = (const bq8_0 *)vy[c] + i;
            __m256i p = dot_us8(aq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), q));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * F16T(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]);
}

INLINE void q4_1_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq4_1 *x = (const bq4_1 *)vx;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    float summs[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i q = nibbles32(x[i].qs);
        const float dx = F16T(x[i].d), mx = F16T(x[i].m);
        for (int c = 0; c < NC; c++) {
            const bq8_1 *y = (const bq8_1 *)vy[c] + i;
            __m256i p = dot_us8(q, _mm256_loadu_si256((const __m256i *)y->qs));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * F16T(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
            summs[c] += mx * F16T(y->s);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]) + summs[c];
}

INLINE void q8_0_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq8_0 *x = (const bq8_0 *)vx;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)x[i].qs), aq = _mm256_sign_epi8(q, q);
        const float dx = F16T(x[i].d);
        for (int c = 0; c < NC; c++) {
            const bq8_0 *y = (const bq8_0 *)vy[c] + i;
            __m256i p = dot_us8(aq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), q));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * F16T(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]);
}

/* byte-shuffle masks that spread int16 lane pairs: K4_SPREAD[j] puts int16 j of each 128-bit lane into all eight
   int16 lanes; K6_SPREAD[k] puts int16 2k into the low 128-bit lane and int16 2k+1 into the high one */
static inline __m256i k4_spread(int j) {
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

static inline __m256i k6_spread(int k) {
    __m128i lo = _mm_set1_epi16((short)((4 * k) | ((4 * k + 1) << 8)));
    __m128i hi = _mm_set1_epi16((short)((4 * k + 2) | ((4 * k + 3) << 8)));
    return _mm256_set_m128i(hi, lo);
}

INLINE void q4_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq4_K *x = (const bq4_K *)vx;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i spread[8] = {k4_spread(0), k4_spread(1), k4_spread(2), k4_spread(3),
                               k4_spread(4), k4_spread(5), k4_spread(6), k4_spread(7)};
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 accm[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < n / QKK; i++) {
        /* 12 bytes of 6-bit scales and mins -> bytes 0..7 scales, 8..15 mins (same bits as pgc_scale_min_k4) */
        uint32_t u[4];
        memcpy(u, x[i].scales, 12);
        u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
        const uint32_t mins_lo = u[1] & 0x3f3f3f3f;
        u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
        u[2] = mins_lo;
        u[0] &= 0x3f3f3f3f;
        const __m256i ms = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u)); /* 8 scales, 8 mins */
        const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        const __m128i mn = _mm256_extracti128_si256(ms, 1);
        const float dx = F16T(x[i].d), dmx = F16T(x[i].dmin);
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int c = 0; c < NC; c++) { /* mins . (bsums summed in pairs) */
            const bq8_K *y = (const bq8_K *)vy[c] + i;
            __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                                        _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(y->d * dmx), _mm_cvtepi32_ps(_mm_madd_epi16(mn, bs)), accm[c]);
        }
        for (int k = 0; k < 4; k++) {
            __m256i q4 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * k));
            __m256i lo = _mm256_and_si256(q4, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
            __m256i s0 = _mm256_shuffle_epi8(sc, spread[2 * k]), s1 = _mm256_shuffle_epi8(sc, spread[2 * k + 1]);
            for (int c = 0; c < NC; c++) {
                const int8_t *q8 = ((const bq8_K *)vy[c] + i)->qs + 64 * k;
                __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8));
                __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
            }
        }
        for (int c = 0; c < NC; c++) {
            const float d = ((const bq8_K *)vy[c] + i)->d * dx;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) {
        __m128 m = _mm_add_ps(accm[c], _mm_movehl_ps(accm[c], accm[c]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[c] = hsum8(acc[c]) - _mm_cvtss_f32(m);
    }
}

INLINE void q6_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq6_K *x = (const bq6_K *)vx;
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    const __m256i h2 = _mm256_set1_epi8(0x0C), h4 = _mm256_set1_epi8(0x30), h6 = _mm256_set1_epi8((char)0xC0);
    const __m256i spread[4] = {k6_spread(0), k6_spread(1), k6_spread(2), k6_spread(3)};
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QKK; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        __m256i sumi[2];
        for (int c = 0; c < NC; c++) { /* 32 * sum_g scale_g * bsum_g: the -32 offset of every value, taken out once */
            const bq8_K *y = (const bq8_K *)vy[c] + i;
            __m256i bias = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qhp = x[i].qh + 32 * h;
            const __m256i sc = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                              : _mm256_castsi256_si128(sc16));
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
            __m256i q[4];
            /* high bit pairs masked in place and moved to bits 4..5 (masking first keeps 16-bit shifts
               from carrying bits across bytes) */
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, h2), 2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, h4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_srli_epi16(_mm256_and_si256(qh, h6), 2));
            for (int k = 0; k < 4; k++) {
                const __m256i sk = _mm256_shuffle_epi8(sc, spread[k]);
                for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = ((const bq8_K *)vy[c] + i)->qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)q8));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sk));
                }
            }
        }
        const float dx = F16T(x[i].d);
        for (int c = 0; c < NC; c++) {
            const float d = ((const bq8_K *)vy[c] + i)->d * dx;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]);
}

/* the table entries: one column (pgc_vec_dot_fn) and two columns (pgc_vec_dot2_fn) of a kernel; the 32-block
   types keep their own one-column kernels above (two accumulators) */
#define COLS_ENTRIES(T) PGC_VD1_ENTRY(XSFX(vd_##T), T##_cols) COLS2_ENTRY(T)
#define COLS2_ENTRY(T) PGC_VD2_ENTRY(XSFX(vd2_##T), T##_cols)
COLS2_ENTRY(q4_0)
COLS2_ENTRY(q4_1)
COLS2_ENTRY(q8_0)
COLS_ENTRIES(q4_K)
COLS_ENTRIES(q6_K)

static void XSFX(register_x86)(pgc_simd *s) {
    s->dot_f32 = XSFX(dot_f32);
    s->dot_f16 = XSFX(dot_f16);
    s->vec_dot[T_Q4_0] = XSFX(vd_q4_0);
    s->vec_dot[T_Q4_1] = XSFX(vd_q4_1);
    s->vec_dot[T_Q8_0] = XSFX(vd_q8_0);
    s->vec_dot[T_Q4_K] = XSFX(vd_q4_K);
    s->vec_dot[T_Q6_K] = XSFX(vd_q6_K);
    s->vec_dot2[T_Q4_0] = XSFX(vd2_q4_0);
    s->vec_dot2[T_Q4_1] = XSFX(vd2_q4_1);
    s->vec_dot2[T_Q8_0] = XSFX(vd2_q8_0);
    s->vec_dot2[T_Q4_K] = XSFX(vd2_q4_K);
    s->vec_dot2[T_Q6_K] = XSFX(vd2_q6_K);
}
