/* Block (de)quantisation, as ggml's reference functions do it, and row conversion for every type. */
#include "quants.h"
#include "quantize.h"
#include "api.h"

#include <stdlib.h>

int pgc_blck_size(int type) {
    switch (type) {
    case T_Q4_0: case T_Q4_1: case T_Q5_0: case T_Q5_1: case T_Q8_0: case T_Q8_1: return QK;
    case T_Q2_K: case T_Q3_K: case T_Q4_K: case T_Q5_K: case T_Q6_K: case T_Q8_K: return QKK;
    default: return 1;
    }
}

int pgc_type_size(int type) {
    switch (type) {
    case T_F32: case T_I32: return 4;
    case T_F16: case T_BF16: case T_I16: return 2;
    case T_I8: return 1;
    case T_I64: case T_F64: return 8;
    case T_Q4_0: return sizeof(bq4_0);
    case T_Q4_1: return sizeof(bq4_1);
    case T_Q5_0: return sizeof(bq5_0);
    case T_Q5_1: return sizeof(bq5_1);
    case T_Q8_0: return sizeof(bq8_0);
    case T_Q8_1: return sizeof(bq8_1);
    case T_Q2_K: return sizeof(bq2_K);
    case T_Q3_K: return sizeof(bq3_K);
    case T_Q4_K: return sizeof(bq4_K);
    case T_Q5_K: return sizeof(bq5_K);
    case T_Q6_K: return sizeof(bq6_K);
    case T_Q8_K: return sizeof(bq8_K);
    default: return 0;
    }
}

int pgc_vec_dot_type(int type) {
    switch (type) {
    case T_Q4_0: case T_Q5_0: case T_Q8_0: return T_Q8_0;
    case T_Q4_1: case T_Q5_1: return T_Q8_1;
    case T_Q2_K: case T_Q3_K: case T_Q4_K: case T_Q5_K: case T_Q6_K: return T_Q8_K;
    default: return -1;
    }
}

/* ---- dequantisation ------------------------------------------------------------------------------------ */

static void deq_q4_0(const bq4_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = FP16_TO_F32(x[i].d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xF) - 8) * d;
            y[j + QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const bq4_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = FP16_TO_F32(x[i].d), m = FP16_TO_F32(x[i].m);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (x[i].qs[j] & 0xF) * d + m;
            y[j + QK / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

static void deq_q5(const uint8_t *qhb, const uint8_t *qs, float d, float m, int off, float *y) {
    uint32_t qh;
    memcpy(&qh, qhb, 4);
    for (int j = 0; j < QK / 2; j++) {
        int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
        y[j] = (((qs[j] & 0xF) | h0) - off) * d + m;
        y[j + QK / 2] = (((qs[j] >> 4) | h1) - off) * d + m;
    }
}

static void deq_q8_0(const bq8_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK) {
        float d = FP16_TO_F32(x[i].d);
        for (int j = 0; j < QK; j++) y[j] = x[i].qs[j] * d;
    }
}

static void deq_q2_K(const bq2_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = FP16_TO_F32(x[i].d), mn = FP16_TO_F32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < QKK; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    uint8_t sc = x[i].scales[is++];
                    float dl = d * (sc & 0xF), ml = mn * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * h] >> shift) & 3) - ml;
                }
            }
        }
    }
}

static void deq_q3_K(const bq3_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = FP16_TO_F32(x[i].d);
        int8_t sc[16];
        pgc_q3k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < QKK; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int h = 0; h < 2; h++) {
                    float dl = d * sc[is++];
                    for (int l = 0; l < 16; l++) {
                        int k = l + 16 * h;
                        *y++ = dl * ((int)((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

static void deq_q4_K(const bq4_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = FP16_TO_F32(x[i].d), mn = FP16_TO_F32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            i32 s0, m0, s1, m1;
            pg_scale_min_k4(j, x[i].scales, &s0, &m0);
            pg_scale_min_k4(j + 1, x[i].scales, &s1, &m1);
            for (int l = 0; l < 32; l++) *y++ = d * s0 * (q[l] & 0xF) - mn * m0;
            for (int l = 0; l < 32; l++) *y++ = d * s1 * (q[l] >> 4) - mn * m1;
        }
    }
}

static void deq_q5_K(const bq5_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = FP16_TO_F32(x[i].d), mn = FP16_TO_F32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            i32 s0, m0, s1, m1;
            pg_scale_min_k4(j, x[i].scales, &s0, &m0);
            pg_scale_min_k4(j + 1, x[i].scales, &s1, &m1);
            for (int l = 0; l < 32; l++) *y++ = d * s0 * ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - mn * m0;
            for (int l = 0; l < 32; l++) *y++ = d * s1 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - mn * m1;
        }
    }
}

static void deq_q6_K(const bq6_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = FP16_TO_F32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < QKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void pgc_dequant_row(int type, const void *vx, float *y, int64_t n) {
    int64_t nb = n / pgc_blck_size(type);
    switch (type) {
    case T_Q4_0: deq_q4_0((const bq4_0 *)vx, y, nb); break;
    case T_Q4_1: deq_q4_1((const bq4_1 *)vx, y, nb); break;
    case T_Q5_0: {
        const bq5_0 *x = (const bq5_0 *)vx;
        for (int64_t i = 0; i < nb; i++) deq_q5(x[i].qh, x[i].qs, FP16_TO_F32(x[i].d), 0.0f, 16, y + i * QK);
        break;
    }
    case T_Q5_1: {
        const bq5_1 *x = (const bq5_1 *)vx;
        for (int64_t i = 0; i < nb; i++)
            deq_q5(x[i].qh, x[i].qs, FP16_TO_F32(x[i].d), FP16_TO_F32(x[i].m), 0, y + i * QK);
        break;
    }
    case T_Q8_0: deq_q8_0((const bq8_0 *)vx, y, nb); break;
    case T_Q8_1: {
        const bq8_1 *x = (const bq8_1 *)vx;
        for (int64_t i = 0; i < nb; i++)
            for (int j = 0; j < QK; j++) y[i * QK + j] = x[i].qs[j] * FP16_TO_F32(x[i].d);
        break;
    }
    case T_Q2_K: deq_q2_K((const bq2_K *)vx, y, nb); break;
    case T_Q3_K: deq_q3_K((const bq3_K *)vx, y, nb); break;
    case T_Q4_K: deq_q4_K((const bq4_K *)vx, y, nb); break;
    case T_Q5_K: deq_q5_K((const bq5_K *)vx, y, nb); break;
    case T_Q6_K: deq_q6_K((const bq6_K *)vx, y, nb); break;
    case T_Q8_K: {
        const bq8_K *x = (const bq8_K *)vx;
        for (int64_t i = 0; i < nb; i++)
            for (int j = 0; j < QKK; j++) y[i * QKK + j] = x[i].qs[j] * x[i].d;
        break;
    }
    default: break;
    }
}

/* ---- quantisation (ggml's reference rounding) ----------------------------------------------------------- */

/* Q8_1 (a dot partner only; the shared quantisers are in quantize.c, Q8_K's in dot_impl.h). A block with a NaN or
   an infinity gets NaN scales and zero quants, as quantize.h's pg_nan_block and pyggml.quants.nan_block. */
/* Q8_0's quants and scale (quantize.h) plus s = d * sum(qs), d unrounded (NaN for a block with a non-finite value) */
static void q_q8_1(const float *x, void *vy, int64_t n) {
    bq8_1 *y = (bq8_1 *)vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        bq8_0 b;
        quantize_q8_0((char *)&b, x);
        float vmax, d = pg_amax(x, QK, &vmax) / 127.f;
        int sum = 0;
        for (int j = 0; j < QK; j++) sum += y[i].qs[j] = b.qs[j];
        y[i].d = b.d;
        y[i].s = F32_TO_FP16(pg_all_finite(x, QK) ? sum * d : NAN);
    }
}

void pgc_quant_shared(pgc_simd *s);

void pgc_quant_portable(pgc_simd *s) {
    pgc_quant_shared(s);
    s->quantize[T_Q8_1] = q_q8_1;
}

/* ---- activations of a matmul (dot partners) --------------------------------------------------------------
   ggml's CPU backend quantises a matmul's activations with its SIMD from_float, not with the reference: scale
   127 / amax and round to nearest even (the reference: 1 / (amax / 127) and round half away from zero). About
   one value in a thousand differs by one step, which moves Q/K/FFN outputs by 1e-4..1e-3 and, through 30
   layers, logits by up to 1. CPY keeps the reference quantisers (pgc_from_float). */
static void q8_act(const float *x, int8_t *qs, float *d_out, int *sum_out) {
    float amax = 0.0f, z = 0.0f;
    for (int j = 0; j < QK; j++) {
        const float a = fabsf(x[j]);
        amax = a > amax ? a : amax; /* MAXPS: the loop vectorises (fmaxf's NaN rule would keep it scalar) */
        z += x[j] * 0.0f;           /* NaN when the block holds a NaN or an infinity */
    }
    if (z != 0.0f) { /* a NaN scale, so the block's products are NaN (see pg_all_finite) */
        memset(qs, 0, QK);
        *d_out = NAN;
        *sum_out = 0;
        return;
    }
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK; j++) {
        /* |x * id| <= 127: adding and removing 1.5 * 2^23 rounds it to nearest even, as nearbyintf does
           (without a libm call per value; -ffp-contract=off keeps the two adds) */
        const float v = x[j] * id;
        qs[j] = (int8_t)(int)((v + 12582912.0f) - 12582912.0f);
        sum += qs[j];
    }
    *d_out = d;
    *sum_out = sum;
}

int pgc_quantize_act(const float *x, void *vy, int64_t n, int type) {
    float d;
    int sum;
    if (type == T_Q8_0) {
        bq8_0 *y = (bq8_0 *)vy;
        for (int64_t i = 0; i < n / QK; i++, x += QK) {
            q8_act(x, y[i].qs, &d, &sum);
            y[i].d = F32_TO_FP16(d);
        }
        return 0;
    }
    if (type == T_Q8_1) {
        bq8_1 *y = (bq8_1 *)vy;
        for (int64_t i = 0; i < n / QK; i++, x += QK) {
            q8_act(x, y[i].qs, &d, &sum);
            y[i].d = F32_TO_FP16(d);
            y[i].s = F32_TO_FP16(d * (float)sum);
        }
        return 0;
    }
    return pgc_from_float(x, vy, n, type);
}

/* ---- rows of any type <-> float ------------------------------------------------------------------------- */

int pgc_to_float(const void *src, float *dst, int64_t n, int type) {
    switch (type) {
    case T_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case T_F16: { const uint16_t *s = (const uint16_t *)src; for (int64_t i = 0; i < n; i++) dst[i] = FP16_TO_F32(s[i]); return 0; }
    case T_BF16: { const uint16_t *s = (const uint16_t *)src; for (int64_t i = 0; i < n; i++) dst[i] = pgc_bf16_to_fp32(s[i]); return 0; }
    case T_I32: { const int32_t *s = (const int32_t *)src; for (int64_t i = 0; i < n; i++) dst[i] = (float)s[i]; return 0; }
    default:
        if (pgc_blck_size(type) > 1 && n % pgc_blck_size(type) == 0) {
            const pgc_dequant_fn deq = pgc_simd_dequant(type);
            if (deq) deq(src, dst, n);
            else pgc_dequant_row(type, src, dst, n);
            return 0;
        }
        return PGC_E_TYPE;
    }
}

int pgc_from_float(const float *src, void *dst, int64_t n, int type) {
    switch (type) {
    case T_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case T_F16: { uint16_t *d = (uint16_t *)dst; for (int64_t i = 0; i < n; i++) d[i] = F32_TO_FP16(src[i]); return 0; }
    case T_BF16: { uint16_t *d = (uint16_t *)dst; for (int64_t i = 0; i < n; i++) d[i] = pgc_fp32_to_bf16(src[i]); return 0; }
    case T_I32: { int32_t *d = (int32_t *)dst; for (int64_t i = 0; i < n; i++) d[i] = (int32_t)src[i]; return 0; }
    default:
        if (type >= 0 && type < T_COUNT && pgc_S.quantize[type] && n % pgc_blck_size(type) == 0) {
            pgc_S.quantize[type](src, dst, n);
            return 0;
        }
        return PGC_E_TYPE;
    }
}

/* ---- entry points for Python (tests, CPY checks) --------------------------------------------------------- */

int pgc_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t ne0) {
    int64_t rs = pgc_row_size(type, ne0);
    for (int64_t r = 0; r < nrows; r++) {
        int rc = pgc_from_float(src + r * ne0, (char *)dst + r * rs, ne0, type);
        if (rc) return rc;
    }
    return 0;
}

int pgc_dequantize_rows(int type, const void *src, float *dst, int64_t nrows, int64_t ne0) {
    int64_t rs = pgc_row_size(type, ne0);
    for (int64_t r = 0; r < nrows; r++) {
        int rc = pgc_to_float((const char *)src + r * rs, dst + r * ne0, ne0, type);
        if (rc) return rc;
    }
    return 0;
}

int pgc_vec_dot(int type, int64_t n, const void *x, const void *y, float *out) {
    if (type == T_F32) { *out = pgc_S.dot_f32(n, (const float *)x, (const float *)y); return 0; }
    if (type == T_F16) { *out = pgc_S.dot_f16(n, (const uint16_t *)x, (const float *)y); return 0; }
    if (type == T_BF16) { *out = pgc_S.dot_bf16(n, (const uint16_t *)x, (const float *)y); return 0; }
    if (type < 0 || type >= T_COUNT || !pgc_S.vec_dot[type]) return PGC_E_TYPE;
    pgc_S.vec_dot[type](n, out, x, y);
    return 0;
}
