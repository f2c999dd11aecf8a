/* arm64 NEON dot products, included by dot_neon.c (plain Advanced SIMD, any arm64 CPU) and by
   dot_neon_dotprod.c (under an armv8.2-a+dotprod target, chosen at run time when the CPU has SDOT). The includer
   names the registration function: NEON_REGISTER.

   Every quantised kernel is written once for NC activation columns (1 or 2, always inlined with a constant NC),
   so the two-column entry unpacks each weight block once for both. Integer parts are exact, as in the portable
   kernels; the K-quant kernels also finish each block with the portable kernels' float expression in the same
   order, so their results are bit-identical to dot_impl.h. The 32-block kernels and the float dots keep vector
   float accumulators (a different summation order: equal to rounding). */
#include <arm_neon.h>

#include "quants.h"

#define NINLINE static inline __attribute__((always_inline))

/* acc + the products of a and b, summed in groups of four bytes per int32 lane (SDOT where the target has it;
   else widening multiplies and pairwise adds, which only group the same products differently) */
NINLINE int32x4_t sdot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#elif defined(PGC_DOTPROD_ASM) /* clang under a dotprod target attribute (dot_neon_dotprod.c) */
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
    return acc;
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* sum of the 32 products of two 32-byte runs */
NINLINE int32x4_t sdot32(int8x16_t a0, int8x16_t a1, const int8_t *b) {
    return sdot16(sdot16(vdupq_n_s32(0), a0, vld1q_s8(b)), a1, vld1q_s8(b + 16));
}

NINLINE int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* byte k of the result: `set` where bit k of the 16-bit mask is set, else 0 */
NINLINE uint8x16_t bits16(uint32_t mask, uint8_t set) {
    const uint8x16_t sel = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)mask), vdup_n_u8((uint8_t)(mask >> 8)));
    return vandq_u8(vtstq_u8(v, sel), vdupq_n_u8(set));
}

/* ---- float rows ------------------------------------------------------------------------------------------ */

static float dot_f32(int64_t n, const float *x, const float *y) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

/* eight halves (IEEE fp16 or bfloat16 bits) widened to two float vectors */
NINLINE void ld_f16x8(const uint16_t *p, float32x4_t *lo, float32x4_t *hi) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}

NINLINE void ld_bf16x8(const uint16_t *p, float32x4_t *lo, float32x4_t *hi) {
    const uint16x8_t h = vld1q_u16(p);
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}

#define HALF_DOT(name, LOAD, SCALAR)                                                                        \
    static float name(int64_t n, const uint16_t *x, const float *y) {                                     \
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                                     \
        int64_t i = 0;                                                                                      \
        for (; i + 16 <= n; i += 16) {                                                                      \
            float32x4_t x0, x1, x2, x3;                                                                     \
            LOAD(x + i, &x0, &x1);                                                                          \
            LOAD(x + i + 8, &x2, &x3);                                                                      \
            a0 = vfmaq_f32(a0, x0, vld1q_f32(y + i));                                                       \
            a1 = vfmaq_f32(a1, x1, vld1q_f32(y + i + 4));                                                   \
            a2 = vfmaq_f32(a2, x2, vld1q_f32(y + i + 8));                                                   \
            a3 = vfmaq_f32(a3, x3, vld1q_f32(y + i + 12));                                                  \
        }                                                                                                   \
        float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));                              \
        for (; i < n; i++) s += SCALAR(x[i]) * y[i];                                                        \
        return s;                                                                                           \
    }
HALF_DOT(dot_f16, ld_f16x8, F16T)
HALF_DOT(dot_bf16, ld_bf16x8, pgc_bf16_to_fp32)
#undef HALF_DOT

/* ---- 32-element blocks against Q8_0 / Q8_1 --------------------------------------------------------------- */

/* a weight block as two signed byte vectors: elements 0..15 and 16..31 */
NINLINE void unpack_q4(const uint8_t *qs, int off, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t v = vld1q_u8(qs);
    *lo = vsubq_s8(s8(vandq_u8(v, vdupq_n_u8(0xF))), vdupq_n_s8((int8_t)off));
    *hi = vsubq_s8(s8(vshrq_n_u8(v, 4)), vdupq_n_s8((int8_t)off));
}

NINLINE void unpack_q5(const uint8_t *qh4, const uint8_t *qs, int off, int8x16_t *lo, int8x16_t *hi) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const uint8x16_t v = vld1q_u8(qs);
    *lo = vsubq_s8(s8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0xF)), bits16(qh & 0xFFFF, 0x10))), vdupq_n_s8((int8_t)off));
    *hi = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(v, 4), bits16(qh >> 16, 0x10))), vdupq_n_s8((int8_t)off));
}

NINLINE void unpack_q4_0(const bq4_0 *b, int8x16_t *lo, int8x16_t *hi) { unpack_q4(b->qs, 8, lo, hi); }
NINLINE void unpack_q4_1(const bq4_1 *b, int8x16_t *lo, int8x16_t *hi) { unpack_q4(b->qs, 0, lo, hi); }
NINLINE void unpack_q5_0(const bq5_0 *b, int8x16_t *lo, int8x16_t *hi) { unpack_q5(b->qh, b->qs, 16, lo, hi); }
NINLINE void unpack_q5_1(const bq5_1 *b, int8x16_t *lo, int8x16_t *hi) { unpack_q5(b->qh, b->qs, 0, lo, hi); }
NINLINE void unpack_q8_0(const bq8_0 *b, int8x16_t *lo, int8x16_t *hi) {
    *lo = vld1q_s8(b->qs);
    *hi = vld1q_s8(b->qs + 16);
}

/* Blocks go in pairs into two accumulators per column, so consecutive blocks do not wait on each other.
   MIN adds a Q4_1 / Q5_1 block's min term (x.m * y.s) to summs[c]; empty for the symmetric types. */
#define NO_MIN(xb, yb, c)
#define WITH_MIN(xb, yb, c) summs[c] += F16T((xb)->m) * F16T((yb)->s);
#define LEGACY_COLS(T, YT, MIN)                                                                             \
    NINLINE void T##_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {       \
        const b##T *x = (const b##T *)vx;                                                                   \
        float32x4_t acc[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}}; \
        float summs[2] = {0.0f, 0.0f};                                                                      \
        const int64_t nb = n / QK;                                                                          \
        int64_t i = 0;                                                                                      \
        for (; i < nb; i += 2) {                                                                            \
            for (int k = 0; k < 2 && i + k < nb; k++) {                                                     \
                const b##T *xb = x + i + k;                                                                 \
                int8x16_t lo, hi;                                                                           \
                unpack_##T(xb, &lo, &hi);                                                                   \
                const float dx = F16T(xb->d);                                                               \
                for (int c = 0; c < NC; c++) {                                                              \
                    const YT *yb = (const YT *)vy[c] + i + k;                                               \
                    const float32x4_t p = vcvtq_f32_s32(sdot32(lo, hi, yb->qs));                            \
                    acc[c][k] = vfmaq_n_f32(acc[c][k], p, dx * F16T(yb->d));                                \
                    MIN(xb, yb, c)                                                                          \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        for (int c = 0; c < NC; c++) s[c] = vaddvq_f32(vaddq_f32(acc[c][0], acc[c][1])) + summs[c];        \
    }
LEGACY_COLS(q4_0, bq8_0, NO_MIN)
LEGACY_COLS(q4_1, bq8_1, WITH_MIN)
LEGACY_COLS(q5_0, bq8_0, NO_MIN)
LEGACY_COLS(q5_1, bq8_1, WITH_MIN)
LEGACY_COLS(q8_0, bq8_0, NO_MIN)
#undef LEGACY_COLS

/* ---- K-quants against Q8_K -------------------------------------------------------------------------------- */

/* isum += scale * (16 weights . 16 activations) */
NINLINE int32x4_t kgroup(int32x4_t isum, int8x16_t q, const int8_t *y, int scale) {
    return vmlaq_n_s32(isum, sdot16(vdupq_n_s32(0), q, vld1q_s8(y)), scale);
}

/* sum of 8 int16 mins times 8 int16 block sums */
NINLINE int32_t dot_s16x8(int16x8_t a, int16x8_t b) {
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(a), vget_low_s16(b)), a, b));
}

/* the block's share of the row sum, as the portable kernel writes it: y.d * (d * isum - dmin * msum) */
NINLINE float kblock(const bq8_K *y, float d, float dmin, int32x4_t isum, int32_t msum) {
    return y->d * (d * (float)vaddvq_s32(isum) - dmin * (float)msum);
}

/* the 16 2-bit (Q2_K, Q3_K) weights of group g (0..15): bits 2j..2j+1 of 16 bytes of qs */
NINLINE uint8x16_t crumbs(const uint8_t *qs, int g) {
    const int half = g / 8, j = (g % 8) / 2, l = 16 * (g % 2);
    const uint8x16_t v = vld1q_u8(qs + 32 * half + l);
    return vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3));
}

NINLINE void q2_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq2_K *x = (const bq2_K *)vx;
    float sum[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QKK; i++) {
        const uint8x16_t sm = vld1q_u8(x[i].scales);
        const uint8x16_t mins = vshrq_n_u8(sm, 4);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        const float d = F16T(x[i].d), dmin = F16T(x[i].dmin);
        int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int g = 0; g < 16; g++) {
            const int8x16_t q = s8(crumbs(x[i].qs, g));
            const int sc = x[i].scales[g] & 0xF;
            for (int c = 0; c < NC; c++) isum[c] = kgroup(isum[c], q, ((const bq8_K *)vy[c] + i)->qs + 16 * g, sc);
        }
        for (int c = 0; c < NC; c++) {
            const bq8_K *y = (const bq8_K *)vy[c] + i;
            const int32_t msum = dot_s16x8(m0, vld1q_s16(y->bsums)) + dot_s16x8(m1, vld1q_s16(y->bsums + 8));
            sum[c] += kblock(y, d, dmin, isum[c], msum);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

NINLINE void q3_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq3_K *x = (const bq3_K *)vx;
    float sum[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QKK; i++) {
        int8_t sc[16];
        pgc_q3k_scales(x[i].scales, sc);
        const uint8x16_t hm[2] = {vld1q_u8(x[i].hmask), vld1q_u8(x[i].hmask + 16)};
        const float d = F16T(x[i].d);
        int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int g = 0; g < 16; g++) {
            /* 2 low bits, plus 4 where the high bit is set, minus 4: the portable lo - (hb ? 0 : 4) */
            const int half = g / 8, j = (g % 8) / 2;
            const uint8x16_t hb = vandq_u8(vtstq_u8(hm[g % 2], vdupq_n_u8((uint8_t)(1u << (4 * half + j)))), vdupq_n_u8(4));
            const int8x16_t q = vsubq_s8(s8(vorrq_u8(crumbs(x[i].qs, g), hb)), vdupq_n_s8(4));
            for (int c = 0; c < NC; c++) isum[c] = kgroup(isum[c], q, ((const bq8_K *)vy[c] + i)->qs + 16 * g, sc[g]);
        }
        for (int c = 0; c < NC; c++) sum[c] += kblock((const bq8_K *)vy[c] + i, d, 0.0f, isum[c], 0);
    }
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

/* Q4_K / Q5_K: the 8 6-bit scales and mins of the 12 packed bytes (the bits pg_scale_min_k4 reads) */
NINLINE void k4_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t u[3], o[4];
    memcpy(u, s12, 12);
    o[0] = u[0] & 0x3f3f3f3f;
    o[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    o[2] = u[1] & 0x3f3f3f3f;
    o[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}

/* shared by Q4_K and Q5_K: QH is NULL for Q4_K, else the 32 bytes of fifth bits */
NINLINE void k45_cols(const uint16_t *dd, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, int64_t i,
                      float *sum, const void *const *vy, const int NC) {
    uint8_t sc[8], mn[8];
    k4_scales(scales, sc, mn);
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    const float d = F16T(dd[0]), dmin = F16T(dd[1]);
    uint8x16_t h[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if (qh) {
        h[0] = vld1q_u8(qh);
        h[1] = vld1q_u8(qh + 16);
    }
    int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int k = 0; k < 4; k++) { /* 32 bytes: low nibbles are sub-block 2k, high nibbles sub-block 2k+1 */
        for (int half = 0; half < 2; half++) {
            const uint8x16_t v = vld1q_u8(qs + 32 * k + 16 * half);
            uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0xF)), hi = vshrq_n_u8(v, 4);
            if (qh) {
                lo = vorrq_u8(lo, vandq_u8(vtstq_u8(h[half], vdupq_n_u8((uint8_t)(1u << (2 * k)))), vdupq_n_u8(16)));
                hi = vorrq_u8(hi, vandq_u8(vtstq_u8(h[half], vdupq_n_u8((uint8_t)(2u << (2 * k)))), vdupq_n_u8(16)));
            }
            for (int c = 0; c < NC; c++) {
                const int8_t *y = ((const bq8_K *)vy[c] + i)->qs + 64 * k + 16 * half;
                isum[c] = kgroup(isum[c], s8(lo), y, sc[2 * k]);
                isum[c] = kgroup(isum[c], s8(hi), y + 32, sc[2 * k + 1]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        const bq8_K *y = (const bq8_K *)vy[c] + i;
        const int16x8_t pairs = vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8)); /* one per sub-block */
        sum[c] += kblock(y, d, dmin, isum[c], dot_s16x8(mins, pairs));
    }
}

NINLINE void q4_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq4_K *x = (const bq4_K *)vx;
    float sum[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QKK; i++) k45_cols(&x[i].d, x[i].scales, x[i].qs, NULL, i, sum, vy, NC);
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

NINLINE void q5_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq5_K *x = (const bq5_K *)vx;
    float sum[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QKK; i++) k45_cols(&x[i].d, x[i].scales, x[i].qs, x[i].qh, i, sum, vy, NC);
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

NINLINE void q6_K_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq6_K *x = (const bq6_K *)vx;
    const uint8x16_t m4 = vdupq_n_u8(0xF), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QKK; i++) {
        int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *sc = x[i].scales + 8 * h;
            for (int half = 0; half < 2; half++) { /* elements l = 16 * half .. +15 of each 32-run */
                const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
                const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                int8x16_t q[4]; /* runs 0..3 of 32 (groups 2r + half), 6 bits each, minus 32 */
                q[0] = vsubq_s8(s8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4))), off);
                q[1] = vsubq_s8(s8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4))), off);
                q[2] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4))), off);
                q[3] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4))), off);
                for (int r = 0; r < 4; r++)
                    for (int c = 0; c < NC; c++) {
                        const int8_t *y = ((const bq8_K *)vy[c] + i)->qs + 128 * h + 32 * r + 16 * half;
                        isum[c] = kgroup(isum[c], q[r], y, sc[2 * r + half]);
                    }
            }
        }
        const float d = F16T(x[i].d);
        for (int c = 0; c < NC; c++) sum[c] += kblock((const bq8_K *)vy[c] + i, d, 0.0f, isum[c], 0);
    }
    for (int c = 0; c < NC; c++) s[c] = sum[c];
}

/* ---- the table entries: one column (pgc_vec_dot_fn) and two (pgc_vec_dot2_fn) of each kernel ------------- */

#define ENTRIES(T) PGC_VD1_ENTRY(vd_##T, T##_cols) PGC_VD2_ENTRY(vd2_##T, T##_cols)
ENTRIES(q4_0)
ENTRIES(q4_1)
ENTRIES(q5_0)
ENTRIES(q5_1)
ENTRIES(q8_0)
ENTRIES(q2_K)
ENTRIES(q3_K)
ENTRIES(q4_K)
ENTRIES(q5_K)
ENTRIES(q6_K)
#undef ENTRIES

#define SET_ENTRIES(s, T, TID)                                                                              \
    do {                                                                                                    \
        (s)->vec_dot[TID] = vd_##T;                                                                         \
        (s)->vec_dot2[TID] = vd2_##T;                                                                       \
    } while (0)

void NEON_REGISTER(pgc_simd *s) {
    s->dot_f32 = dot_f32;
    s->dot_f16 = dot_f16;
    s->dot_bf16 = dot_bf16;
    SET_ENTRIES(s, q4_0, T_Q4_0);
    SET_ENTRIES(s, q4_1, T_Q4_1);
    SET_ENTRIES(s, q5_0, T_Q5_0);
    SET_ENTRIES(s, q5_1, T_Q5_1);
    SET_ENTRIES(s, q8_0, T_Q8_0);
    SET_ENTRIES(s, q2_K, T_Q2_K);
    SET_ENTRIES(s, q3_K, T_Q3_K);
    SET_ENTRIES(s, q4_K, T_Q4_K);
    SET_ENTRIES(s, q5_K, T_Q5_K);
    SET_ENTRIES(s, q6_K, T_Q6_K);
}
