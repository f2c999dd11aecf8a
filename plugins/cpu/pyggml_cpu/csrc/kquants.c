/* Quantisation to the K block types (Q2_K .. Q6_K), reproducing ggml's reference quantisers (the weighted
   least-squares scale searches) so that CPY / SET_ROWS into K-quant tensors give ggml's bytes. Built without
   FMA contraction (-ffp-contract=off): every float operation rounds as the C reference does. */
#include "quants.h"

#define GROUP_MAX_EPS 1e-15f
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : ((v) > (hi) ? (hi) : (v)))

/* asymmetric (scale, min) search; returns the scale, *neg_min = -min */
static float qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                  float rmin, float rdelta, int nstep, int use_mad) {
    float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        memset(L, 0, (size_t)n);
        *neg_min = -mn;
        return 0.0f;
    }
    float iscale = nmax / (mx - mn), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - mn));
        L[i] = (uint8_t)CLAMP(l, 0, nmax);
        float diff = scale * L[i] + mn - x[i];
        best += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * (x[i] - mn));
            l = CLAMP(l, 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur += w[i] * (use_mad ? fabsf(diff) : diff * diff);
            }
            if (cur < best) {
                memcpy(L, Laux, (size_t)n);
                best = cur;
                scale = this_scale;
                mn = this_min;
            }
        }
    }
    *neg_min = -mn;
    return scale;
}

static float signed_absmax(const float *x, int n) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            mx = x[i];
        }
    return mx;
}

/* symmetric search with weights x^2 (rmse type 1); L in [0, 2*nmax) */
static float qx_rmse1(int n, int nmax, const float *x, int8_t *L) {
    float mx = signed_absmax(x, n);
    if (fabsf(mx) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -nmax / mx, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = CLAMP(l, -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / mx;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = CLAMP(l, -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + CLAMP(l, -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's search: coordinate descent over the elements (up to 5 passes); L in [0, 2*nmax) */
static float q3_search(int n, int nmax, const float *x, int8_t *L) {
    float mx = signed_absmax(x, n);
    if (fabsf(mx) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -nmax / mx, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        L[i] = (int8_t)CLAMP(l, -nmax, nmax - 1);
        float w = x[i] * x[i];
        sumlx += w * x[i] * L[i];
        suml2 += w * L[i] * L[i];
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i], slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = nearest_int(x[i] * sl2 / slx);
                nl = CLAMP(nl, -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* four 2-bit planes of 128 values -> 32 bytes (value l + 32k in bits 2k of byte l) */
static void pack2(const uint8_t *L, uint8_t *q) {
    for (int j = 0; j < QKK; j += 128)
        for (int l = 0; l < 32; l++)
            q[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

static void q_q2_K(const float *x, void *vy, int64_t n) {
    bq2_K *y = (bq2_K *)vy;
    uint8_t L[QKK], Laux[16];
    float w[16], mins[16], scales[16];
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float is = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)nearest_int(is * scales[j]);
            y[i].d = F32_TO_FP16(max_scale / 15.f);
        } else {
            memset(y[i].scales, 0, 16);
            y[i].d = F32_TO_FP16(0.f);
        }
        if (max_min > 0) {
            float is = 15.f / max_min;
            for (int j = 0; j < 16; j++) y[i].scales[j] |= (uint8_t)(nearest_int(is * mins[j]) << 4);
            y[i].dmin = F32_TO_FP16(max_min / 15.f);
        } else {
            y[i].dmin = F32_TO_FP16(0.f);
        }
        for (int j = 0; j < 16; j++) {
            float d = FP16_TO_F32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            float dm = FP16_TO_F32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                int q = nearest_int((x[16 * j + l] + dm) / d);
                L[16 * j + l] = (uint8_t)CLAMP(q, 0, 3);
            }
        }
        pack2(L, y[i].qs);
    }
}

static void q_q3_K(const float *x, void *vy, int64_t n) {
    bq3_K *y = (bq3_K *)vy;
    int8_t L[QKK];
    float scales[16];
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        for (int j = 0; j < 16; j++) scales[j] = q3_search(16, 4, x + 16 * j, L + 16 * j);
        float max_scale = signed_absmax(scales, 16);
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = nearest_int(iscale * scales[j]);
                l = CLAMP(l, -32, 31) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = F32_TO_FP16(1 / iscale);
        } else {
            y[i].d = F32_TO_FP16(0.f);
        }
        int8_t sc[16];
        pgc_q3k_scales(y[i].scales, sc);
        for (int j = 0; j < 16; j++) {
            float d = FP16_TO_F32(y[i].d) * sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                int q = nearest_int(x[16 * j + l] / d);
                L[16 * j + l] = (int8_t)(CLAMP(q, -4, 3) + 4);
            }
        }
        memset(y[i].hmask, 0, 32);
        uint8_t U[QKK];
        for (int j = 0; j < QKK; j++) {
            int v = L[j];
            if (v > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                v -= 4;
            }
            U[j] = (uint8_t)v;
        }
        pack2(U, y[i].qs);
    }
}

/* Q4_K / Q5_K: eight 32-value sub-blocks with 6-bit scales and mins; fills d, dmin, scales and L */
static void k4_block(const float *x, int nmax, float rmin, int nstep, uint16_t *d, uint16_t *dmin,
                     uint8_t *scales, uint8_t *L) {
    uint8_t Laux[32];
    float w[32], mins[8], sc[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        sc[j] = qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * sc[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = F32_TO_FP16(max_scale / 63.f);
    *dmin = F32_TO_FP16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        pgc_scale_min_k4(j, scales, &s, &m);
        float dd = FP16_TO_F32(*d) * s;
        if (!dd) continue;
        float dm = FP16_TO_F32(*dmin) * m;
        for (int l = 0; l < 32; l++) {
            int q = nearest_int((x[32 * j + l] + dm) / dd);
            L[32 * j + l] = (uint8_t)CLAMP(q, 0, nmax);
        }
    }
}

static void q_q4_K(const float *x, void *vy, int64_t n) {
    bq4_K *y = (bq4_K *)vy;
    uint8_t L[QKK];
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        k4_block(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void q_q5_K(const float *x, void *vy, int64_t n) {
    bq5_K *y = (bq5_K *)vy;
    uint8_t L[QKK];
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        k4_block(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int a = L[64 * c + l], b = L[64 * c + 32 + l];
                if (a > 15) { a -= 16; y[i].qh[l] |= (uint8_t)(1 << (2 * c)); }
                if (b > 15) { b -= 16; y[i].qh[l] |= (uint8_t)(2 << (2 * c)); }
                y[i].qs[32 * c + l] = (uint8_t)(a | (b << 4));
            }
    }
}

static void q_q6_K(const float *x, void *vy, int64_t n) {
    bq6_K *y = (bq6_K *)vy;
    int8_t L[QKK];
    float scales[16];
    for (int64_t i = 0; i < n / QKK; i++, x += QKK) {
        for (int j = 0; j < 16; j++) scales[j] = qx_rmse1(16, 32, x + 16 * j, L + 16 * j);
        float max_scale = signed_absmax(scales, 16);
        if (fabsf(max_scale) < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(bq6_K));
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = F32_TO_FP16(1 / iscale);
        for (int j = 0; j < 16; j++) {
            int v = nearest_int(iscale * scales[j]);
            y[i].scales[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            float d = FP16_TO_F32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                int q = nearest_int(x[16 * j + l] / d);
                L[16 * j + l] = (int8_t)(CLAMP(q, -32, 31) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void pgc_quant_k(pgc_simd *s) {
    s->quantize[T_Q2_K] = q_q2_K;
    s->quantize[T_Q3_K] = q_q3_K;
    s->quantize[T_Q4_K] = q_q4_K;
    s->quantize[T_Q5_K] = q_q5_K;
    s->quantize[T_Q6_K] = q_q6_K;
}
