/* Plain-C dot products (and Q8_K, the K types' activations), written for auto-vectorisation. Included by
   dot_portable.c (no target flags) and by dot_avx2.c (under #pragma GCC target avx2/fma/f16c), so one text gives the
   portable and a vectorised build. The includer defines SFX(name) to give the functions their suffix and LD16(h) for
   an fp16 load. */
#include "quants.h"
#include "quantize.h" /* pg_all_finite */

static float SFX(dot_f32)(int64_t n, const float *x, const float *y) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) acc[k] += x[i + k] * y[i + k];
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += acc[k];
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static float SFX(dot_f16)(int64_t n, const uint16_t *x, const float *y) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) acc[k] += LD16(x[i + k]) * y[i + k];
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += acc[k];
    for (; i < n; i++) s += LD16(x[i]) * y[i];
    return s;
}

/* ggml_vec_dot_f16's order: four 8-lane accumulators over steps of 32, (a0 + a2) + (a1 + a3), lanes l and
   l + 4 added, then (0 + 1) + (2 + 3) (two horizontal adds); the n % 32 tail added in double */
static float SFX(dot_f16_ggml)(int64_t n, const uint16_t *x, const float *y) {
    float a[4][8] = {{0}};
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) a[j][l] = fmaf(LD16(x[i + 8 * j + l]), y[i + 8 * j + l], a[j][l]);
    float v[8];
    for (int l = 0; l < 8; l++) v[l] = (a[0][l] + a[2][l]) + (a[1][l] + a[3][l]);
    const float t0 = v[0] + v[4], t1 = v[1] + v[5], t2 = v[2] + v[6], t3 = v[3] + v[7];
    double s = (t0 + t1) + (t2 + t3);
    for (int64_t i = np; i < n; i++) s += (double)(LD16(x[i]) * y[i]);
    return (float)s;
}

static void SFX(round_f16)(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = pgc_fp16_to_fp32(pgc_fp32_to_fp16(x[i]));
}

/* dot_f16_ggml output by output (the SIMD levels take several per pass, same bits) */
static void SFX(dot_f16_ggml_tiles)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                    int64_t nc, char *d, size_t dr, size_t dc) {
    for (int64_t c = 0; c < nc; c++)
        for (int64_t r = 0; r < nr; r++)
            *(float *)(d + r * dr + c * dc) = SFX(dot_f16_ggml)(n, (const uint16_t *)((const char *)x + r * bx),
                                                                (const float *)((const char *)y + c * by));
}

/* llamafile tinyBLAS's order (n % 8 == 0): one 8-lane accumulator over the row, lanes l and l + 4 added, then
   (0 + 2) + (1 + 3). One output at a time here; the SIMD levels compute tiles of outputs, each with these bits. */
static void SFX(dot_f16_tiles)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                               int64_t nc, char *d, size_t dr, size_t dc) {
    for (int64_t c = 0; c < nc; c++) {
        const float *yc = (const float *)((const char *)y + c * by);
        for (int64_t r = 0; r < nr; r++) {
            const uint16_t *xr = (const uint16_t *)((const char *)x + r * bx);
            float a[8] = {0};
            for (int64_t i = 0; i + 8 <= n; i += 8)
                for (int l = 0; l < 8; l++) a[l] = fmaf(LD16(xr[i + l]), yc[i + l], a[l]);
            const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
            *(float *)(d + r * dr + c * dc) = (t0 + t2) + (t1 + t3);
        }
    }
}

static float SFX(dot_bf16)(int64_t n, const uint16_t *x, const float *y) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) {
            uint32_t u = (uint32_t)x[i + k] << 16;
            float f;
            memcpy(&f, &u, 4);
            acc[k] += f * y[i + k];
        }
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += acc[k];
    for (; i < n; i++) s += pgc_bf16_to_fp32(x[i]) * y[i];
    return s;
}

static inline int SFX(idot32)(const int8_t *a, const int8_t *b) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += a[j] * b[j];
    return s;
}

/* Legacy types against Q8_0 / Q8_1: per 32-block, the integer dot of the unpacked levels scaled by both d (and, for
   the types with a minimum, + m * s of the Q8_1 partner). UNPACK(x, q) is the block's 32 signed levels: q, filled,
   or (Q8_0) the block's own bytes. */
#define SFX_VD32(T, YT, UNPACK, MIN)                                                                                \
    static void SFX(vd_##T)(int64_t n, float *s, const void *vx, const void *vy) {                                \
        const b##T *x = (const b##T *)vx;                                                                           \
        const YT *y = (const YT *)vy;                                                                               \
        float sum = 0.0f;                                                                                           \
        for (int64_t i = 0; i < n / QK; i++) {                                                                      \
            int8_t q[QK];                                                                                           \
            sum += SFX(idot32)(UNPACK(&x[i], q), y[i].qs) * LD16(x[i].d) * LD16(y[i].d) MIN;                        \
        }                                                                                                           \
        *s = sum;                                                                                                   \
    }

/* a 32-block's 16 bytes of nibbles, minus off (8 for Q4_0, 0 for Q4_1) */
static inline const int8_t *SFX(unpack_q4)(const uint8_t *qs, int off, int8_t *q) {
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0xF) - off);
        q[j + QK / 2] = (int8_t)((qs[j] >> 4) - off);
    }
    return q;
}

static inline const int8_t *SFX(unpack_q5)(const uint8_t *qhb, const uint8_t *qs, int off, int8_t *q) {
    uint32_t qh;
    memcpy(&qh, qhb, 4);
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) - off);
        q[j + QK / 2] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - off);
    }
    return q;
}

#define SFX_UNPACK_Q4_0(b, q) SFX(unpack_q4)((b)->qs, 8, (q))
#define SFX_UNPACK_Q4_1(b, q) SFX(unpack_q4)((b)->qs, 0, (q))
#define SFX_UNPACK_Q5_0(b, q) SFX(unpack_q5)((b)->qh, (b)->qs, 16, (q))
#define SFX_UNPACK_Q5_1(b, q) SFX(unpack_q5)((b)->qh, (b)->qs, 0, (q))
#define SFX_UNPACK_Q8_0(b, q) ((void)(q), (const int8_t *)(b)->qs)
SFX_VD32(q4_0, bq8_0, SFX_UNPACK_Q4_0, )
SFX_VD32(q4_1, bq8_1, SFX_UNPACK_Q4_1, + LD16(x[i].m) * LD16(y[i].s))
SFX_VD32(q5_0, bq8_0, SFX_UNPACK_Q5_0, )
SFX_VD32(q5_1, bq8_1, SFX_UNPACK_Q5_1, + LD16(x[i].m) * LD16(y[i].s))
SFX_VD32(q8_0, bq8_0, SFX_UNPACK_Q8_0, )

/* K-quants: unpack a block to 256 signed levels with 16 integer scales (and mins), then integer dots per 16 */
typedef struct { int8_t q[QKK]; int sc[16]; int mn[16]; float d, dmin; } SFX(kblock);

static inline int SFX(idot16)(const int8_t *a, const int8_t *b) {
    int s = 0;
    for (int j = 0; j < 16; j++) s += a[j] * b[j];
    return s;
}

static float SFX(kdot)(const SFX(kblock) *k, const bq8_K *y) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; g++) {
        isum += k->sc[g] * SFX(idot16)(k->q + 16 * g, y->qs + 16 * g);
        msum += k->mn[g] * y->bsums[g];
    }
    return y->d * (k->d * isum - k->dmin * msum);
}

/* vd_T of a K type: UNPACK(k, x) fills the kblock of one block */
#define SFX_VDK(T, UNPACK)                                                                                          \
    static void SFX(vd_##T)(int64_t n, float *s, const void *vx, const void *vy) {                                \
        const b##T *x = (const b##T *)vx;                                                                           \
        const bq8_K *y = (const bq8_K *)vy;                                                                         \
        float sum = 0.0f;                                                                                           \
        SFX(kblock) k;                                                                                              \
        for (int64_t i = 0; i < n / QKK; i++) {                                                                     \
            UNPACK(&k, &x[i]);                                                                                      \
            sum += SFX(kdot)(&k, &y[i]);                                                                            \
        }                                                                                                           \
        *s = sum;                                                                                                   \
    }

/* 16 scales of one d and no minimum (Q3_K, Q6_K) */
static inline void SFX(k_scales16)(SFX(kblock) *k, uint16_t d, const int8_t *sc) {
    k->d = LD16(d);
    k->dmin = 0.0f;
    for (int g = 0; g < 16; g++) {
        k->sc[g] = sc[g];
        k->mn[g] = 0;
    }
}

static inline void SFX(unpack_q2_K)(SFX(kblock) *k, const bq2_K *x) {
    k->d = LD16(x->d);
    k->dmin = LD16(x->dmin);
    for (int g = 0; g < 16; g++) {
        k->sc[g] = x->scales[g] & 0xF;
        k->mn[g] = x->scales[g] >> 4;
    }
    for (int v = 0; v < QKK; v++) {
        int half = v / 128, j = (v % 128) / 32, l = v % 32;
        k->q[v] = (int8_t)((x->qs[32 * half + l] >> (2 * j)) & 3);
    }
}

static inline void SFX(unpack_q3_K)(SFX(kblock) *k, const bq3_K *x) {
    int8_t sc[16];
    pgc_q3k_scales(x->scales, sc);
    SFX(k_scales16)(k, x->d, sc);
    for (int v = 0; v < QKK; v++) {
        int half = v / 128, j = (v % 128) / 32, l = v % 32;
        int lo = (x->qs[32 * half + l] >> (2 * j)) & 3;
        int hb = (x->hmask[l] >> (4 * half + j)) & 1;
        k->q[v] = (int8_t)(lo - (hb ? 0 : 4));
    }
}

/* Q4_K / Q5_K: eight 6-bit scales and mins, each covering 32 values (two groups of 16); qh (Q5_K's fifth bits) or
   NULL */
static inline void SFX(unpack_k45)(SFX(kblock) *k, uint16_t d, uint16_t dmin, const uint8_t *scales,
                                   const uint8_t *qs, const uint8_t *qh) {
    k->d = LD16(d);
    k->dmin = LD16(dmin);
    for (int j = 0; j < 8; j++) {
        i32 sc, m;
        pg_scale_min_k4(j, scales, &sc, &m);
        k->sc[2 * j] = k->sc[2 * j + 1] = sc;
        k->mn[2 * j] = k->mn[2 * j + 1] = m;
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int h = qh ? qh[l] : 0;
            k->q[64 * c + l] = (int8_t)((qs[32 * c + l] & 0xF) | (((h >> (2 * c)) & 1) << 4));
            k->q[64 * c + 32 + l] = (int8_t)((qs[32 * c + l] >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
        }
}

static inline void SFX(unpack_q4_K)(SFX(kblock) *k, const bq4_K *x) {
    SFX(unpack_k45)(k, x->d, x->dmin, x->scales, x->qs, NULL);
}

static inline void SFX(unpack_q5_K)(SFX(kblock) *k, const bq5_K *x) {
    SFX(unpack_k45)(k, x->d, x->dmin, x->scales, x->qs, x->qh);
}

static inline void SFX(unpack_q6_K)(SFX(kblock) *k, const bq6_K *x) {
    SFX(k_scales16)(k, x->d, x->scales);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *q = k->q + 128 * h;
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

SFX_VDK(q2_K, SFX(unpack_q2_K))
SFX_VDK(q3_K, SFX(unpack_q3_K))
SFX_VDK(q4_K, SFX(unpack_q4_K))
SFX_VDK(q5_K, SFX(unpack_q5_K))
SFX_VDK(q6_K, SFX(unpack_q6_K))

/* Q8_K, the K types' activations (a block with a NaN or an infinity: NaN scale, zero quants, as quants.c's
   Q8_1): ggml's quantize_row_q8_K_ref, the same bytes, in loops the compiler vectorises: the largest magnitude in
   eight running maxima, the non-finite test on the exponent bits (pg_all_finite), the first value of the largest
   magnitude as a minimum of indices (ggml's branch per value keeps its loop scalar: 1.20 ns a value, one thread;
   this text 0.99 in the portable build, 0.51 in the AVX2 one) */
static void SFX(q_q8_K)(const float *x, void *vy, int64_t n) {
    bq8_K *y = (bq8_K *)vy;
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        float lane[8] = {0}, amax = 0.0f; /* eight running maxima (a max is exact in any order) */
        for (int j = 0; j < QKK; j += 8)
            for (int l = 0; l < 8; l++) {
                const float a = fabsf(x[j + l]);
                lane[l] = a > lane[l] ? a : lane[l];
            }
        for (int l = 0; l < 8; l++) amax = lane[l] > amax ? lane[l] : amax;
        const int nonfinite = !pg_all_finite(x, QKK);
        if (nonfinite || !amax) {
            memset(&y[i], 0, sizeof(bq8_K));
            y[i].d = nonfinite ? NAN : 0.0f;
            continue;
        }
        int first = QKK;
        for (int j = 0; j < QKK; j++) {
            const int at = fabsf(x[j]) == amax ? j : QKK;
            first = at < first ? at : first;
        }
        const float iscale = -127.f / x[first];
        for (int j = 0; j < QKK; j++) {
            int v = pg_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

static void SFX(register)(pgc_simd *s) {
    s->dot_f32 = SFX(dot_f32);
    s->dot_f16 = SFX(dot_f16);
    s->dot_bf16 = SFX(dot_bf16);
    s->dot_f16_ggml = SFX(dot_f16_ggml);
    s->dot_f16_ggml_tiles = SFX(dot_f16_ggml_tiles);
    s->round_f16 = SFX(round_f16);
    s->quantize[T_Q8_K] = SFX(q_q8_K);
    s->dot_f16_tiles = SFX(dot_f16_tiles);
    s->vec_dot[T_Q4_0] = SFX(vd_q4_0);
    s->vec_dot[T_Q4_1] = SFX(vd_q4_1);
    s->vec_dot[T_Q5_0] = SFX(vd_q5_0);
    s->vec_dot[T_Q5_1] = SFX(vd_q5_1);
    s->vec_dot[T_Q8_0] = SFX(vd_q8_0);
    s->vec_dot[T_Q2_K] = SFX(vd_q2_K);
    s->vec_dot[T_Q3_K] = SFX(vd_q3_K);
    s->vec_dot[T_Q4_K] = SFX(vd_q4_K);
    s->vec_dot[T_Q5_K] = SFX(vd_q5_K);
    s->vec_dot[T_Q6_K] = SFX(vd_q6_K);
}
